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
# The container image: built from docker/Dockerfile with podman/buildah and driven from the
# host (docker/check-image.sh). Last, as the longest stage; the time box covers a cold machine
# (debootstrap of both bases, the in-image compile) with room to spare. TENSORD_TEST_IMAGE=0
# skips it on a developer machine.
if [[ ${TENSORD_TEST_IMAGE:-1} == 1 ]]; then
  echo "== Container image (docker/check-image.sh)"
  TENSORD_BUILD_TIMEOUT=${TENSORD_BUILD_TIMEOUT:-2400} \
    timeout --kill-after=60 "${TENSORD_IMAGE_CHECK_TIMEOUT:-3000}" docker/check-image.sh
fi
