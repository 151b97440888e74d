#!/usr/bin/env bash
# The CUDA backend's check on a machine with an NVIDIA GPU, in two halves:
#   scripts/device-check.sh pack          here: packs the built server, tensordctl, the tests/gpu
#                                         binaries, their non-system, non-CUDA libraries, the
#                                         Python client (with its generated modules) and the
#                                         Python device tests into device-check/bundle.tar.xz
#                                         (under 60 MiB; device-check/ is ignored by git)
#   scripts/device-check.sh run [--quick] there, beside the bundle (or in the checkout): unpacks
#                                         it and runs, each stage in its own time box: nvidia-smi;
#                                         the server listing cuda:0; tests/gpu on cuda:0; the
#                                         Python device and conformance tests on cuda:0; both
#                                         seed failures; the bench against torch on the same
#                                         GPU (GEMM in f32, TF32 and bf16 with their errors;
#                                         ResNet-50's convolutions through cuDNN and through
#                                         tensord's own passes, with their errors; the MLP and
#                                         CNN training steps, eager and compiled). --quick stops after the listing. At
#                                         most 7.5 minutes in all (the boxes:
#                                         20+30+150+100+30+120 s). The last
#                                         line sums up:
#                                         "device-check: N passed, M failed; gemm ...".
# BUILD_DIR names the build to pack (default build/, built with the CUDA toolkit).
set -uo pipefail
mode=${1:?usage: scripts/device-check.sh pack | run [--quick]}
quick=0
[[ ${2:-} == --quick ]] && quick=1

pack() {
  set -e
  cd "$(dirname "$0")/.."
  local build=${BUILD_DIR:-build} out=device-check stage
  [[ -x $build/tensord ]] || { echo "device-check: no $build/tensord; build first" >&2; exit 1; }
  /usr/bin/python3 -c "import sys; sys.path.insert(0, 'client/python'); import tensord" ||
    { echo "device-check: the Python client's modules could not be generated" >&2; exit 1; }
  rm -rf "$out/stage"
  stage=$out/stage/tensord-device-check
  mkdir -p "$stage/bin" "$stage/lib" "$stage/tests/python" "$stage/client" "$stage/bench"
  local bins=("$build/tensord" "$build/tensordctl")
  for src in tests/gpu/*_test.cc tests/gpu/cuda/*_test.cc; do
    bins+=("$build/tests/$(basename "$src" .cc)")
  done
  cp "${bins[@]}" "$stage/bin/"
  # Every library they load, except the C library's, the compiler's and the CUDA/NVIDIA ones
  # (the GPU machine has its own, matching its driver).
  ldd "${bins[@]}" 2>/dev/null | awk '/=> \// {print $3}' | sort -u | while read -r lib; do
    case $(basename "$lib") in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
      libcuda.so*|libcudart*|libnvrtc*|libcublas*|libcudnn*|libnccl*|libnvidia*) ;;
      *) cp -L "$lib" "$stage/lib/" ;;
    esac
  done
  cp -r client/python/tensord "$stage/client/"
  cp -r proto "$stage/"
  cp tests/python/*.py "$stage/tests/python/"
  cp bench/*.py "$stage/bench/"
  cp scripts/device-check.sh "$stage/"
  find "$stage" -name __pycache__ -prune -exec rm -rf {} +
  tar -C "$out/stage" -cf - tensord-device-check | xz -T0 -6 > "$out/bundle.tar.xz"
  rm -rf "$out/stage"
  local mib=$(( $(stat -c %s "$out/bundle.tar.xz") / 1048576 ))
  echo "device-check: packed $out/bundle.tar.xz ($mib MiB; limit 60)"
  (( mib < 60 )) || { echo "device-check: the bundle is over 60 MiB" >&2; exit 1; }
}

passed=0
failed=0
summary=()
# stage NAME SECONDS COMMAND...: runs the command in a time box and counts it.
stage() {
  local name=$1 limit=$2 start=$SECONDS rc
  shift 2
  echo "== $name (at most $limit s)"
  timeout --kill-after=10 "$limit" "$@"
  rc=$?
  if (( rc == 0 )); then
    passed=$((passed + 1))
    echo "== $name: passed in $((SECONDS - start)) s"
  else
    failed=$((failed + 1))
    summary+=("$name")
    echo "== $name: FAILED (exit $rc) after $((SECONDS - start)) s"
  fi
}

run() {
  local here
  here=$(cd "$(dirname "$0")" && pwd)
  if [[ -f $here/bundle.tar.xz || -f $here/device-check/bundle.tar.xz ]]; then
    local bundle=$here/bundle.tar.xz
    [[ -f $bundle ]] || bundle=$here/device-check/bundle.tar.xz
    python3 -c "import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])" \
      "$bundle" "$here" || exit 1
    here=$here/tensord-device-check
  elif [[ ! -x $here/bin/tensord ]]; then
    echo "device-check: no bundle.tar.xz beside this script" >&2
    exit 1
  fi
  cd "$here"
  export LD_LIBRARY_PATH=$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # NCCL and cuDNN where the loader does not look: their pip packages' (nvidia-nccl-cu13,
  # nvidia-cudnn-cu13) lib directories.
  local pkg lib
  for pkg in nccl cudnn; do
    lib=$(python3 -c "import os, nvidia.$pkg as n; print(os.path.join(list(n.__path__)[0], 'lib'))" \
      2>/dev/null) && [[ -d $lib ]] && export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$lib
  done
  export PYTHONPATH=$here/client${PYTHONPATH:+:$PYTHONPATH}
  export TENSORD_PROTO_DIR=$here/proto TENSORD_BIN=$here/bin/tensord
  export TENSORD_CUDA_CACHE_DIR=$here/cuda-cache TENSORD_REQUIRE_GPU=1
  export TENSORD_TEST_GPU_DEVICE=cuda:0 TENSORD_TEST_DEVICES=cuda:0

  stage "nvidia-smi" 20 nvidia-smi
  bin/tensord --address 127.0.0.1:50061 > server.log 2>&1 &
  local server=$!
  sleep 3
  stage "tensordctl devices lists cuda:0" 30 \
    bash -c 'bin/tensordctl --address 127.0.0.1:50061 devices | tee /dev/stderr | grep -q "^cuda:0 "'
  kill "$server" 2>/dev/null
  wait "$server" 2>/dev/null
  if (( quick == 0 )); then
    # The tests/gpu binaries side by side (the machine has cores to spare); kernels compiled
    # by one are on disk for the others.
    stage "tests/gpu on cuda:0" 150 bash -c '
      for t in bin/*_test; do "$t" --gtest_brief=1 > "$t.log" 2>&1 & done
      rc=0
      while wait -n; s=$?; (( s != 127 )); do (( s == 0 )) || rc=1; done
      for t in bin/*_test; do
        tail -n 3 "$t.log" | grep -q "FAILED" && { echo "$t:"; tail -n 20 "$t.log"; rc=1; }
        grep -h "tests ran\|PASSED\|FAILED TEST" "$t.log" | sed "s|^|$(basename "$t"): |"
      done
      exit $rc'
    stage "Python device and conformance tests on cuda:0" 100 \
      python3 -m pytest -q -x -p no:cacheprovider tests/python/test_devices.py \
      tests/python/test_conformance_devices.py
    stage "both seed failures on cuda:0" 30 \
      python3 -m pytest -q -p no:cacheprovider tests/python/test_devices.py \
      -k autodiff_failures_name_the_device
    bin/tensord --address 127.0.0.1:50062 > server-bench.log 2>&1 &
    server=$!
    TENSORD_CUDNN=off bin/tensord --address 127.0.0.1:50063 > server-own-passes.log 2>&1 &
    local own=$!
    sleep 3
    # bench/gpu_gemm.py: 4096² f32, TF32 and bf16 products with their errors; bench/gpu_conv.py:
    # ResNet-50's convolutions through cuDNN and through tensord's own passes (the second
    # server), with their errors; bench/compare.py: the MLP and CNN training steps, eager and
    # compiled; each beside torch on the same GPU.
    stage "bench: GEMM, convolutions and training steps against torch on cuda:0" 120 bash -c '
      python3 bench/gpu_gemm.py 127.0.0.1:50062 cuda:0 &&
      python3 bench/gpu_conv.py 127.0.0.1:50062 --own-passes 127.0.0.1:50063 --device cuda:0 &&
      python3 bench/compare.py --address 127.0.0.1:50062 --device cuda:0 --quick \
        --only mlp --only cnn'
    kill "$server" "$own" 2>/dev/null
    wait "$server" "$own" 2>/dev/null
  fi
  local line="device-check: $passed passed, $failed failed"
  (( failed > 0 )) && line+=" (${summary[*]})"
  echo "$line"
  (( failed == 0 ))
}

case "$mode" in
  pack) pack ;;
  run) run ;;
  *) echo "usage: scripts/device-check.sh pack | run [--quick]" >&2; exit 2 ;;
esac
