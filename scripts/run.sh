#!/usr/bin/env bash
# Installs what is missing, builds, and serves tensord in the foreground (CPU backend).
# Every server flag can be passed through, e.g. scripts/run.sh --address=0.0.0.0:50051;
# environment variables work too (TENSORD_ADDRESS, TENSORD_TTL_SECONDS, TENSORD_QUOTA_BYTES, ...).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh build
scripts/build.sh >/dev/null
export TENSORD_ADDRESS=${TENSORD_ADDRESS:-127.0.0.1:50051}
exec build/tensord "$@"
