#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test suite; fails on any failure.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh test
scripts/build.sh
echo "== C++ tests (ctest)"
ctest --test-dir "${BUILD_DIR:-build}" --output-on-failure -j"$(nproc)" --timeout 600
export TENSORD_BIN="${TENSORD_BIN:-$PWD/${BUILD_DIR:-build}/tensord}"
if [[ -d tests/python ]]; then
  echo "== Python tests (pytest)"
  /usr/bin/python3 -m pytest -q tests/python
fi
if [[ -d tests/node ]]; then
  echo "== Node tests"
  (cd client/node && npm install --no-audit --no-fund --silent)
  node --test tests/node/
fi
