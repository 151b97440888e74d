#!/usr/bin/env bash
# Configures and builds tensord into build/ (BUILD_DIR and BUILD_TYPE override).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
BUILD_TYPE=${BUILD_TYPE:-Release}
if [[ ! -f "$BUILD_DIR/CMakeCache.txt" ]]; then
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE="$BUILD_TYPE" "$@"
fi
cmake --build "$BUILD_DIR" -j"$(nproc)"
