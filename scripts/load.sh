#!/usr/bin/env bash
# Builds bench/load and the server, then loads a freshly spawned tensord with concurrent
# clients (default 32 for 20 s). Fails on any failed call, on server RSS that does not come
# back near its baseline after every session closed, or on an unclean SIGTERM exit.
#   scripts/load.sh [--seconds 300] [--clients 64] [...]   (flags: build/bench/load --help)
# BUILD_DIR picks the build tree (default build; it is configured with benchmarks on).
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build}
if [[ ! -f "$dir/CMakeCache.txt" ]]; then
  cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DTENSORD_BUILD_BENCH=ON
elif grep -q '^TENSORD_BUILD_BENCH:BOOL=OFF' "$dir/CMakeCache.txt"; then
  cmake "$dir" -DTENSORD_BUILD_BENCH=ON >/dev/null
fi
cmake --build "$dir" -j"$(nproc)" --target load tensord
exec "$dir/bench/load" --tensord "$dir/tensord" "$@"
