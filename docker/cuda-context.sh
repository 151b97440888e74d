#!/usr/bin/env bash
# Stages the build context of docker/Dockerfile.cuda: the tensord and tensordctl of BUILD_DIR
# (a build with the CUDA backend; stripped) in OUT/bin, and the CUDA libraries the server loads
# when it finds a GPU (NVRTC and its builtins, cuBLASLt, cuDNN's front library with the parts its
# convolutions load: cnn, ops, graph, heuristics and engines; and NCCL for process groups on cuda
# devices) from the toolkit in OUT/lib.
#
#   docker/cuda-context.sh BUILD_DIR OUT
#
# CUDA_HOME names the toolkit (default /usr/local/cuda). Exits 3, saying why, when the build
# has no CUDA backend or the toolkit lacks a library.
set -euo pipefail
build=${1:?usage: docker/cuda-context.sh BUILD_DIR OUT}
out=${2:?usage: docker/cuda-context.sh BUILD_DIR OUT}
cuda=${CUDA_HOME:-/usr/local/cuda}
[[ -x $build/tensord && -x $build/tensordctl ]] || { echo "cuda-context: no tensord and tensordctl in $build" >&2; exit 3; }
# A server asked for a device it lacks lists the backends it was built with.
backends=$("$build/tensord" --address 127.0.0.1:0 --devices cuda:0 2>&1 | grep -o 'backends in this build: [a-z, ]*' || true)
if [[ $backends != *cuda* ]]; then
  echo "cuda-context: $build/tensord has no CUDA backend (${backends:-no backend list})" >&2
  exit 3
fi
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib"
for b in tensord tensordctl; do
  cp "$build/$b" "$out/bin/$b"
  strip "$out/bin/$b"
done
for pattern in 'libnvrtc.so.[0-9]*' 'libnvrtc-builtins.so.[0-9]*' 'libcublasLt.so.[0-9]*' \
               'libcudnn.so.[0-9]*' 'libcudnn_cnn.so.[0-9]*' 'libcudnn_ops.so.[0-9]*' \
               'libcudnn_graph.so.[0-9]*' 'libcudnn_heuristic.so.[0-9]*' \
               'libcudnn_engines_precompiled.so.[0-9]*' \
               'libcudnn_engines_runtime_compiled.so.[0-9]*' 'libnccl.so.[0-9]*'; do
  found=$(find -L "$cuda/lib64/" -maxdepth 1 -name "$pattern" -type f | sort | sed -n 1p)
  [[ -n $found ]] || { echo "cuda-context: no $pattern in $cuda/lib64" >&2; exit 3; }
  # Under the name the loader asks for (libnvrtc.so.13, libnvrtc-builtins.so.13.0, ...).
  cp -L "$found" "$out/lib/$(basename "$found")"
done
du -sh "$out/bin" "$out/lib" | sed 's/^/cuda-context: /'
