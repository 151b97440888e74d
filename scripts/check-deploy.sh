#!/usr/bin/env bash
# Validates the Kubernetes manifests (deploy/kubernetes/*.yaml, or the files given) against
# the Kubernetes API's schemas, offline: types, required fields, enums, unknown fields, names,
# selectors (scripts/check-deploy/validate.mjs says how). Exits 1 on any problem.
#
# The validator's npm packages, pinned by scripts/check-deploy/package-lock.json, are installed
# into scripts/check-deploy/node_modules on the first run and again only when the lock file
# changes. Needs node and npm (as the Node client's tests do).
#
# Usage: scripts/check-deploy.sh [--install-only] [FILE.yaml ...]
set -euo pipefail
cd "$(dirname "$0")/.."
tool=scripts/check-deploy
for cmd in node npm; do
  if ! command -v "$cmd" >/dev/null; then
    echo "check-deploy: $cmd not found (scripts/install-deps.sh test installs it)" >&2
    exit 1
  fi
done
stamp=$tool/node_modules/.installed-from-lock
if ! cmp -s "$tool/package-lock.json" "$stamp"; then
  echo "check-deploy: installing the validator (npm ci in $tool)"
  (cd "$tool" && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error >/dev/null)
  cp "$tool/package-lock.json" "$stamp"
fi
if [[ "${1:-}" == "--install-only" ]]; then
  exit 0
fi
if (($# == 0)); then
  set -- deploy/kubernetes/*.yaml
fi
exec node "$tool/validate.mjs" "$@"
