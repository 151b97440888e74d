#!/usr/bin/env bash
# Checks what tensord installs, used the way another project uses it, outside this checkout:
#  - `cmake --install` of an existing build tree (BUILD_DIR, default build, from
#    scripts/build.sh) into a temporary prefix, which is then moved, so that any absolute path
#    left in tensordConfig.cmake or tensord.pc breaks the check;
#  - examples/cpp-consumer, copied out of the checkout, built against the prefix with
#    find_package(tensord) (CMAKE_PREFIX_PATH) and once more with `pkg-config tensord`; both
#    builds run against the installed tensord on a free loopback port and must get the right
#    results;
#  - a wheel of client/python built offline, installed into a venv (grpcio, protobuf, numpy,
#    pytest and torch from the system's site-packages), and tests/python/test_client.py run
#    against the installed package rather than client/python.
# Fails on any failure; the server and every temporary file go on exit.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
build=$(realpath -m "${BUILD_DIR:-build}")
# Debian's interpreter, whose site-packages hold grpcio, protobuf, numpy, pytest and torch
# (scripts/install-deps.sh test), as for the other Python tests.
python=${PYTHON:-/usr/bin/python3}

die() {
  echo "check-package: $*" >&2
  exit 1
}
step() { echo "-- [${SECONDS} s] $*"; }

[[ -f "$build/CMakeCache.txt" ]] || die "no build tree at $build: run scripts/build.sh first"
for tool in cmake pkg-config "$python" timeout; do
  command -v "$tool" >/dev/null || die "$tool not found (scripts/install-deps.sh test)"
done

work=$(mktemp -d "${TMPDIR:-/tmp}/tensord-package.XXXXXX")
server_pid=""
stop_server() {
  [[ -n "$server_pid" ]] || return 0
  local pid=$server_pid status=0
  server_pid=""
  kill -TERM "$pid" 2>/dev/null || return 0
  # The server drains in-flight calls on SIGTERM (--shutdown-grace); past that, kill it.
  for _ in $(seq 150); do
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  if kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    echo "check-package: tensord did not exit within 15 s of SIGTERM" >&2
    return 1
  fi
  wait "$pid" || status=$?
  if ((status != 0)); then
    echo "check-package: tensord exited with status $status on SIGTERM; log:" >&2
    tail -n 20 "$work/tensord.log" >&2
    return 1
  fi
}
cleanup() {
  local rc=$?
  stop_server || rc=1
  rm -rf "$work"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
# A command failing where no message was planned still says which one it was.
trap 'echo "check-package: failed (status $?) at line $LINENO: $BASH_COMMAND" >&2' ERR

# What a consumer finds must come from the prefix alone.
unset PYTHONPATH TENSORD_PROTO_DIR TENSORD_ADDRESS
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
# The consumer's compiles go through ccache like the project's own; paths are hashed relative
# to the temporary directory, so a rerun hits what the last one compiled.
launcher=()
if command -v ccache >/dev/null; then
  launcher=(env CCACHE_BASEDIR="$work" CCACHE_NOHASHDIR=1 ccache)
fi

step "building tensord, tensordctl and the client library (no-op when current)"
cmake --build "$build" -j"$(nproc)" --target tensord tensordctl tensord_client >/dev/null

step "installing into a temporary prefix"
cmake --install "$build" --prefix "$work/staged" >"$work/install.log" ||
  { cat "$work/install.log" >&2; die "cmake --install failed"; }
prefix=$work/prefix
mv "$work/staged" "$prefix"
for path in "$repo" "$build" "$work/staged"; do
  if found=$(grep -rlF --include='*.cmake' --include='*.pc' -- "$path" "$prefix"); then
    die "the installed package names $path, so it cannot be moved:"$'\n'"$found"
  fi
done
for file in bin/tensord bin/tensordctl include/tensord/client/cpp/tensord.h; do
  [[ -e "$prefix/$file" ]] || die "the install lacks $file"
done
pc_file=$(find "$prefix" -name tensord.pc -path '*/pkgconfig/*' -print -quit)
[[ -n "$pc_file" ]] || die "the install lacks tensord.pc"

step "building examples/cpp-consumer with find_package(tensord)"
cp -r examples/cpp-consumer "$work/consumer-src"
consumer_cmake=(-S "$work/consumer-src" -B "$work/consumer-cmake" -DCMAKE_BUILD_TYPE=Release
                -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
if ((${#launcher[@]})); then
  consumer_cmake+=(-DCMAKE_CXX_COMPILER_LAUNCHER="$(IFS=';' && echo "${launcher[*]}")")
fi
if ! { timeout 300 cmake "${consumer_cmake[@]}" &&
        timeout 300 cmake --build "$work/consumer-cmake"; } >"$work/consumer-cmake.log" 2>&1; then
  cat "$work/consumer-cmake.log" >&2
  die "the consumer does not build against the install"
fi
tensord_dir=$(sed -n 's/^tensord_DIR:PATH=//p' "$work/consumer-cmake/CMakeCache.txt")
[[ "$tensord_dir" == "$prefix"/* ]] ||
  die "the consumer found tensord at $tensord_dir, not in $prefix"

step "building examples/cpp-consumer with pkg-config tensord"
PKG_CONFIG_PATH="$(dirname "$pc_file")${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
pc_cflags=$(pkg-config --cflags tensord) || die "pkg-config --cflags tensord failed"
pc_libs=$(pkg-config --libs tensord) || die "pkg-config --libs tensord failed"
[[ "$(pkg-config --variable=prefix tensord)" -ef "$prefix" ]] ||
  die "tensord.pc's prefix $(pkg-config --variable=prefix tensord) is not $prefix"
mkdir "$work/consumer-pc"
# Compiled and linked in two steps, as a build system would (and ccache caches only the first).
# shellcheck disable=SC2086  # the flags are words
(cd "$work/consumer-pc" &&
  timeout 300 "${launcher[@]}" "${CXX:-c++}" -std=c++17 -O2 $pc_cflags \
    -c "$work/consumer-src/main.cc" -o main.o &&
  timeout 300 "${CXX:-c++}" main.o $pc_libs -o tensord_consumer) ||
  die "the consumer does not build with: c++ -std=c++17 $pc_cflags main.cc $pc_libs"

step "starting the installed tensord on a free port"
# The log exists before the server does: the loop below reads it at once.
: >"$work/tensord.log"
"$prefix/bin/tensord" --address=127.0.0.1:0 </dev/null >>"$work/tensord.log" 2>&1 &
server_pid=$!
address=""
deadline=$((SECONDS + 30))
while [[ -z "$address" ]]; do
  # The start-up line names the bound port: "tensord listening on 127.0.0.1:PORT (...)".
  address=$(sed -n 's/^tensord listening on \([^ ]*\) .*/\1/p' "$work/tensord.log" | head -n 1)
  [[ -n "$address" ]] && break
  if ! kill -0 "$server_pid" 2>/dev/null; then
    server_pid=""
    die "tensord exited at start-up; log:"$'\n'"$(cat "$work/tensord.log")"
  fi
  ((SECONDS < deadline)) ||
    die "tensord did not start within 30 s; log:"$'\n'"$(cat "$work/tensord.log")"
  sleep 0.1
done

for consumer in consumer-cmake consumer-pc; do
  step "running the $consumer build against $address"
  timeout 60 "$work/$consumer/tensord_consumer" "$address" ||
    die "$consumer/tensord_consumer failed (status $?)"
done
stop_server

step "building the Python wheel (offline)"
# A copy without what importing from the checkout generated (tensord/_proto) or a build left.
mkdir "$work/python-src"
tar -C client/python --exclude=_proto --exclude=__pycache__ --exclude='*.egg-info' \
  --exclude=./build --exclude=./dist -cf - . | tar -C "$work/python-src" -xf -
TENSORD_PROTO_DIR="$repo/proto" timeout 300 "$python" -m pip wheel --no-deps --no-build-isolation \
  -w "$work/wheel" "$work/python-src" >"$work/wheel.log" 2>&1 ||
  { cat "$work/wheel.log" >&2; die "building the wheel failed"; }
wheel=$(find "$work/wheel" -name 'tensord-*.whl' -print -quit)
[[ -n "$wheel" ]] || die "pip wheel made no tensord wheel; log:"$'\n'"$(cat "$work/wheel.log")"
"$python" - "$wheel" <<'PY' || die "the wheel lacks the generated protobuf modules"
import sys, zipfile
names = set(zipfile.ZipFile(sys.argv[1]).namelist())
sys.exit(0 if "tensord/_proto/tensord/v1/service_pb2_grpc.py" in names else 1)
PY

step "installing $(basename "$wheel") into a venv"
# Without a pip of its own (seconds to set up): the system's pip installs into it.
"$python" -m venv --system-site-packages --without-pip "$work/venv"
venv_python=$work/venv/bin/python
timeout 300 "$python" -m pip --python "$venv_python" install --no-deps "$wheel" \
  >"$work/pip-install.log" 2>&1 ||
  { cat "$work/pip-install.log" >&2; die "installing the wheel failed"; }
imported=$(cd "$work" && "$venv_python" -c 'import tensord; print(tensord.__file__)') ||
  die "the installed tensord package does not import"
[[ "$(realpath "$imported")" == "$(realpath "$work/venv")"/* ]] ||
  die "import tensord gave $imported, not the package installed in the venv"

step "tests/python/test_client.py against the installed package"
# conftest.py leaves client/python off sys.path and checks where tensord came from.
(cd "$work" && TENSORD_INSTALLED_CLIENT="$work/venv" TENSORD_BIN="$prefix/bin/tensord" \
  timeout 600 "$venv_python" -m pytest -q -p no:cacheprovider \
    "$repo/tests/python/test_client.py") ||
  die "tests/python/test_client.py failed against the installed wheel"
echo "check-package: the installed C++ client, pkg-config file and Python wheel work"
