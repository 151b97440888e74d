#!/usr/bin/env bash
# Reruns the kernel unit tests, the gradient tests and the Python op tests with oneDNN capped at
# one instruction set. oneDNN picks its kernels by the CPU it runs on, so a kernel (or a fallback
# when oneDNN has none at that ISA) that is right on one ISA only would otherwise fail only on
# the machines that lack the bigger one; capped, it fails everywhere.
#   scripts/capped-isa.sh ISA [pytest args...]   ISA: SSE41, AVX, AVX2, AVX512_CORE, ...
# BUILD_DIR is the Release tree (default build/), built by scripts/build.sh.
set -euo pipefail
cd "$(dirname "$0")/.."
isa=${1:?usage: scripts/capped-isa.sh ISA (SSE41, AVX, AVX2, AVX512_CORE, ...) [pytest args]}
shift
dir=${BUILD_DIR:-build}
export ONEDNN_MAX_CPU_ISA=$isa

# The cap must have taken: oneDNN names the ISA it dispatches to when verbose. A machine whose
# best ISA is below the cap runs at its own, which is as good a check, so only nothing or an ISA
# above the cap fails.
probe=$(ONEDNN_VERBOSE=1 "$dir/tests/onednn_kernels_test" --gtest_filter='*EltwiseMatches*' 2>&1 |
  grep -m1 -o 'isa:[^,]*' || true)
echo "capped-isa: ONEDNN_MAX_CPU_ISA=$isa, oneDNN reports ${probe:-nothing}"
above=""
case "$isa" in
  SSE41) above="AVX" ;;
  AVX | AVX2) above="AVX-512" ;;
esac
if [[ -z $probe || (-n $above && $probe == *"$above"*) ]] ||
   [[ $isa == AVX && $probe == *"AVX2"* ]]; then
  echo "capped-isa: oneDNN did not take the cap $isa (it reports '${probe:-nothing}')" >&2
  exit 1
fi

echo "== kernel and gradient tests (ctest -L unit|autodiff) at $isa"
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)" --timeout 600 -L 'unit|autodiff'
echo "== Python op tests at $isa"
# One pytest worker per core (pytest-xdist), each with its own server: the op tests wait on round
# trips more than they compute, so two workers halve the stage on a 2-core machine.
workers=()
if /usr/bin/python3 -c "import xdist" 2>/dev/null; then workers=(-n "$(nproc)"); fi
TENSORD_BIN="${TENSORD_BIN:-$PWD/$dir/tensord}" /usr/bin/python3 -m pytest -q "${workers[@]}" \
  tests/python/test_conformance.py tests/python/test_low_precision.py \
  tests/python/test_batch_norm.py "$@"
