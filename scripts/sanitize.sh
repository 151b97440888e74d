#!/usr/bin/env bash
# Builds and runs the C++ tests under sanitizers, each in its own build tree.
#   scripts/sanitize.sh asan   every C++ test under AddressSanitizer + UndefinedBehaviorSanitizer
#                              (+ LeakSanitizer) in build-asan/
#   scripts/sanitize.sh tsan   the service tests (the multi-threaded code: sessions, the reaper,
#                              concurrent RPCs) under ThreadSanitizer in build-tsan/
# BUILD_DIR overrides the tree; extra arguments go to ctest (e.g. -R batch_test).
# Any report fails the run: halt_on_error everywhere, and UBSan is built non-recovering.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: scripts/sanitize.sh asan|tsan [ctest args...]}
shift
supp="$PWD/tests/sanitizers"
jobs=$(nproc)

# -O1 keeps the instrumented tests fast enough, -g1 (line tables) keeps reports readable while
# the object files and links stay small; both matter on a cold 2-core CI machine.
flags=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1"
       "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1" -DTENSORD_BUILD_BENCH=OFF
       # PoCL's compiler and threads, and the CUDA runtime, are not instrumented and report on
       # their own; the GPU backends' tests run in the normal build.
       -DTENSORD_OPENCL=OFF -DTENSORD_CUDA=OFF)

# Always (re)configured: the test targets come from globs, and a test file added since the last
# configure would otherwise be an unknown target below.
configure() {
  local dir=$1 sanitize=$2
  cmake -S . -B "$dir" "${flags[@]}" -DTENSORD_SANITIZE="$sanitize" >/dev/null
}

case "$mode" in
  asan)
    dir=${BUILD_DIR:-build-asan}
    configure "$dir" address,undefined
    # Set before the build too: test discovery runs the instrumented binaries.
    export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:strict_string_checks=1:check_initialization_order=1:suppressions=$supp/asan.supp"
    export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
    export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$supp/ubsan.supp"
    start=$SECONDS
    cmake --build "$dir" -j"$jobs"
    echo "sanitize: asan build took $((SECONDS - start)) s"
    start=$SECONDS
    ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 900 "$@"
    echo "sanitize: asan tests took $((SECONDS - start)) s"
    ;;
  tsan)
    dir=${BUILD_DIR:-build-tsan}
    configure "$dir" thread
    targets=()
    for f in tests/service/*_test.cc; do targets+=("$(basename "$f" .cc)"); done
    # oneDNN's OpenMP pool (libgomp, not instrumented) synchronizes in ways TSan cannot see;
    # one OpenMP thread keeps kernels on the calling thread, so the races TSan reports are
    # between tensord's own threads (gRPC pool, reaper), which is what this stage checks.
    export OMP_NUM_THREADS=1
    export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$supp/tsan.supp"
    start=$SECONDS
    cmake --build "$dir" -j"$jobs" --target "${targets[@]}"
    echo "sanitize: tsan build took $((SECONDS - start)) s"
    start=$SECONDS
    ctest --test-dir "$dir" --output-on-failure -j"$jobs" --timeout 900 -L service "$@"
    echo "sanitize: tsan tests took $((SECONDS - start)) s"
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan [ctest args...]" >&2
    exit 2
    ;;
esac
