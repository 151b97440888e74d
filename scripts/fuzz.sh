#!/usr/bin/env bash
# Builds tests/fuzz/request_fuzzer with clang (libFuzzer + ASan + UBSan) in build-fuzz/ and runs
# it from the committed seed corpus. Fails on any crash, sanitizer report, leak or timeout.
#   scripts/fuzz.sh [seconds]            fuzz for that long (default 60)
#   scripts/fuzz.sh --regen-corpus       rewrite tests/fuzz/corpus from make_corpus.cc
#   scripts/fuzz.sh --replay FILE...     run the given inputs once (a crash file, a seed)
#   scripts/fuzz.sh --merge-found        add to tests/fuzz/corpus-found the inputs of
#                                        $BUILD_DIR/fuzz-corpus that cover what the committed
#                                        corpus does not (after a long run)
# BUILD_DIR overrides the tree; FUZZ_JOBS runs that many fuzzing processes (default 1).
# New inputs found go to $BUILD_DIR/fuzz-corpus (not the repo); crash files to
# $BUILD_DIR/fuzz-artifacts/.
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build-fuzz}
CC=${CC:-clang} CXX=${CXX:-clang++}
if ! command -v "$CXX" >/dev/null; then
  echo "fuzz: $CXX not found (scripts/install-deps.sh test installs clang)" >&2
  exit 1
fi
if [[ ! -f "$dir/CMakeCache.txt" ]]; then
  CC=$CC CXX=$CXX cmake -S . -B "$dir" -DTENSORD_FUZZ=ON -DTENSORD_BUILD_TESTS=OFF -DTENSORD_OPENCL=OFF \
    -DTENSORD_CUDA=OFF -DTENSORD_BUILD_BENCH=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1"
fi
start=$SECONDS
cmake --build "$dir" -j"$(nproc)" --target request_fuzzer request_fuzzer_corpus
echo "fuzz: build took $((SECONDS - start)) s"

export ASAN_OPTIONS="halt_on_error=1:detect_leaks=1:suppressions=$PWD/tests/sanitizers/asan.supp"
export LSAN_OPTIONS="suppressions=$PWD/tests/sanitizers/lsan.supp"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:suppressions=$PWD/tests/sanitizers/ubsan.supp"
# oneDNN's OpenMP threads would make runs nondeterministic and slower per input.
export OMP_NUM_THREADS=1

case "${1:-60}" in
  --regen-corpus)
    rm -f tests/fuzz/corpus/*
    mkdir -p tests/fuzz/corpus
    "$dir/tests/fuzz/request_fuzzer_corpus" tests/fuzz/corpus
    ls -l tests/fuzz/corpus
    ;;
  --replay)
    shift
    "$dir/tests/fuzz/request_fuzzer" -runs=1 "$@"
    ;;
  --merge-found)
    # libFuzzer's merge copies into its first directory the inputs of the others that add
    # coverage; starting from the committed inputs, what it adds is new. Edges only (no hit
    # counts), so the set stays small.
    tmp=$(mktemp -d)
    cp tests/fuzz/corpus/* "$tmp"/
    mkdir -p tests/fuzz/corpus-found
    cp tests/fuzz/corpus-found/* "$tmp"/ 2>/dev/null || true
    "$dir/tests/fuzz/request_fuzzer" -merge=1 -use_counters=0 -timeout=60 -rss_limit_mb=4096 -max_len=4096 \
      "$tmp" "$dir/fuzz-corpus"
    for f in "$tmp"/*; do
      [[ -e tests/fuzz/corpus/$(basename "$f") ]] || cp -n "$f" tests/fuzz/corpus-found/
    done
    rm -rf "$tmp"
    echo "fuzz: tests/fuzz/corpus-found has $(ls tests/fuzz/corpus-found | wc -l) inputs"
    ;;
  *)
    seconds=${1:-60}
    mkdir -p "$dir/fuzz-corpus" "$dir/fuzz-artifacts"
    # -timeout: one input taking this long is a finding (the quota bounds every shape);
    # -rss_limit_mb: ASan's shadow and quarantine on top of the 16 MiB session quota.
    parallel=()
    # With -jobs libFuzzer runs child processes logging to fuzz-N.log; one job stays inline.
    if ((${FUZZ_JOBS:-1} > 1)); then parallel=(-jobs="$FUZZ_JOBS" -workers="$FUZZ_JOBS"); fi
    "$dir/tests/fuzz/request_fuzzer" -max_total_time="$seconds" -timeout=60 -rss_limit_mb=4096 \
      -max_len=4096 -print_final_stats=1 "${parallel[@]}" \
      -artifact_prefix="$dir/fuzz-artifacts/" "$dir/fuzz-corpus" tests/fuzz/corpus \
      $(test -d tests/fuzz/corpus-found && echo tests/fuzz/corpus-found)
    ;;
esac
