#!/usr/bin/env bash
# Installs the Debian 12 packages tensord needs, only those missing (fast when all are present).
# Usage: scripts/install-deps.sh [build|test]   (test adds the Python test oracle and clang)
set -euo pipefail

packages=(
  build-essential cmake pkg-config ccache
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libdnnl-dev ocl-icd-opencl-dev libclblast-dev libgtest-dev libgmock-dev libbenchmark-dev libcpp-httplib-dev
  # Collectives across servers.
  libgloo-dev libhiredis-dev
  # The server's malloc (server/core/process_malloc.h): tcmalloc.
  libgoogle-perftools-dev
)
if [[ "${1:-build}" == "test" ]]; then
  packages+=(python3 python3-grpcio python3-protobuf python3-numpy python3-pytest python3-torch
             python3-pytest-xdist
             libopenblas0-pthread protobuf-compiler-grpc nodejs
             # The package stage (scripts/check-package.sh) builds and installs the Python
             # wheel offline into a venv.
             python3-pip python3-setuptools python3-wheel python3-venv
             # The fuzz stage (scripts/fuzz.sh): clang, and libFuzzer with clang's sanitizer
             # runtimes, which clang-14 only recommends.
             clang libclang-rt-14-dev
             # The metrics test scrapes the server with a real Prometheus (and promtool).
             prometheus
             # OpenCL on the CPU: the OpenCL backend's tests (tests/gpu) run for real on it.
             pocl-opencl-icd
             # Process groups meet through a Redis store in the collective tests.
             redis-server
             # Replicas behind a real balancer (tests/python/test_balancer.py).
             nginx)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
if ((${#missing[@]})); then
  echo "install-deps: installing ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
