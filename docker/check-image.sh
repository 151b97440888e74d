#!/usr/bin/env bash
# Proves docker/Dockerfile: lints it, builds the image, runs it, calls it, and checks it.
#
# Made for a Debian 12 machine like CI's: root, a couple of cores, Debian's package mirror
# reachable but no container registry, and no Docker daemon. So it uses rootful podman/buildah
# from Debian and makes the two base images itself with debootstrap:
#   1. deps    install podman, buildah, runc, debootstrap, the Python client's packages, npm
#   2. lint    dockerfilelint on docker/Dockerfile (npm, installed into the cache folder)
#   3. base    debian:bookworm and debian:bookworm-slim from debootstrap (rootfs tarballs
#              cached in $TENSORD_IMAGE_CACHE), imported into a private image store
#   4. build   docker/Dockerfile with no registry access (--pull=never)
#   5. run     the container, waiting for its HEALTHCHECK (tensordctl health) to pass
#   6. client  the Python client from the host: a backward pass and the two autodiff failures
#   7. checks  the server process is not root, no compiler in the image, misspelt TLS variable refused
#   8. tls     a second container serving TLS with bearer tokens (certificates, tokens file and
#              settings through TENSORD_* variables and a read-only mount), driven the same way
#              with the CA and a token, and refusing a call without the token
#   9. stop    SIGTERM, expecting a clean exit 0
#  10. cuda    where the host's build has the CUDA backend and the toolkit is installed:
#              docker/Dockerfile.cuda on the image above (docker/cuda-context.sh stages the
#              build's binaries and the toolkit's NVRTC and cuBLASLt), every library found in
#              it, its server naming its CUDA backend and serving without a GPU
# and prints the image size and the time of each phase. Exits non-zero on the first failure.
#
# Environment:
#   TENSORD_IMAGE_CACHE    cache folder: base rootfs tarballs, the image store (default
#                          /var/cache/tensord/image-check, outside the checkout, so every clone
#                          on the machine shares it); a second run with a warm cache skips
#                          debootstrap and reuses the build's layers
#   TENSORD_IMAGE_REFRESH  1: rebuild the base rootfs tarballs
#   TENSORD_BUILD_JOBS     compile jobs in the build stage (default 2)
#   TENSORD_BUILD_TIMEOUT  seconds allowed for the image build (default 3600)
#   TENSORD_DEBIAN_MIRROR  mirror for debootstrap (default: the host's apt source for bookworm)
#   TENSORD_BUILD_DIR      the host's build folder the CUDA variant takes its binaries from
#                          (default build)
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD

CACHE=${TENSORD_IMAGE_CACHE:-/var/cache/tensord/image-check}
mkdir -p "$CACHE"
CACHE=$(cd "$CACHE" && pwd)
STORE=$CACHE/storage
# Podman's run root (its locks, conmon's sockets) must be a short path: podman refuses one over
# 50 characters, and a socket path over 108 cannot be bound. So it lives under /run, named after
# the store it belongs to (libpod records it in the store and refuses a different one later),
# wherever the checkout and the cache are.
RUNTIME=/run/tensord-check/$(printf '%s' "$STORE" | sha256sum | cut -c1-12)
LOGS=$CACHE/logs
IMAGE=localhost/tensord:check
JOBS=${TENSORD_BUILD_JOBS:-2}
BUILD_TIMEOUT=${TENSORD_BUILD_TIMEOUT:-3600}
CTR=tensord-check-$$
mkdir -p "$STORE" "$LOGS"

START=$SECONDS
PHASE=setup
PHASE_START=$SECONDS
TIMES=()
WORK=""

say() { echo "check-image: $*"; }
fail() {
  echo "check-image: FAIL [$PHASE]: $*" >&2
  exit 1
}
phase() {
  if [[ $PHASE != setup ]]; then
    TIMES+=("$(printf '%-7s %5ds' "$PHASE" $((SECONDS - PHASE_START)))")
  fi
  PHASE=$1
  PHASE_START=$SECONDS
  echo "== $PHASE: $2"
}
# Runs a command under a time limit, failing the phase with WHAT when it fails or times out.
limit() {
  local seconds=$1 what=$2 rc=0
  shift 2
  timeout --kill-after=10 "$seconds" "$@" || rc=$?
  if ((rc == 124 || rc == 137)); then fail "$what: timed out after ${seconds}s"; fi
  if ((rc != 0)); then fail "$what: exit status $rc"; fi
}

# Podman and buildah against a private store under the cache folder, so the check neither sees
# nor touches other images on the machine and its layers survive for the next run.
#   --storage-driver vfs   no overlayfs mount is needed (none inside many sandboxes and VMs);
#                          each layer is a plain copy
#   --runroot, --tmpdir    fixed, short paths (see RUNTIME above)
#   --cgroup-manager cgroupfs   no systemd as PID 1 here, so no systemd cgroup manager
#   --runtime runc         Debian's OCI runtime
#   --events-backend file  no journald
STORE_FLAGS=(--root "$STORE/root" --runroot "$RUNTIME/run" --storage-driver vfs)
PODMAN=(podman "${STORE_FLAGS[@]}" --tmpdir "$RUNTIME/libpod" --cgroup-manager cgroupfs
        --runtime runc --events-backend file)

cleanup() {
  local rc=$?
  set +e
  if command -v podman >/dev/null; then
    for c in "$CTR" "$CTR-tls" "$CTR-secure" "$CTR-probe" "$CTR-cuda"; do
      timeout 60 "${PODMAN[@]}" rm -f -t 0 "$c" >/dev/null 2>&1
    done
    # Working containers of an interrupted build, then superseded images of earlier builds;
    # the current image and the base images stay as the cache.
    timeout 120 buildah "${STORE_FLAGS[@]}" rm --all >/dev/null 2>&1
    timeout 120 "${PODMAN[@]}" image prune -f >/dev/null 2>&1
  fi
  [[ -n $WORK ]] && rm -rf "$WORK"
  if ((rc != 0)); then
    echo "check-image: FAILED after $((SECONDS - START))s (logs in $LOGS)" >&2
  fi
  exit $rc
}
trap cleanup EXIT
# set -e would stop silently: name the command that failed.
trap 'fail "line $LINENO: \"$BASH_COMMAND\" failed"' ERR
trap 'exit 130' INT TERM

# One check at a time per cache: they share the image store.
exec 9>"$CACHE/.lock"
flock -w 60 9 || fail "another check-image.sh holds $CACHE/.lock"

# ------------------------------------------------------------------------------------------
phase deps "installing what is missing from Debian"
[[ $(id -u) -eq 0 ]] || fail "needs root: rootful podman/buildah with the vfs driver (run with sudo)"
# fuse-overlayfs and uidmap are not needed: rootful, vfs, and no user namespace remapping.
packages=(podman buildah runc conmon debootstrap coreutils util-linux tar openssl
          python3 python3-grpcio python3-protobuf python3-numpy protobuf-compiler
          protobuf-compiler-grpc)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Any npm will do (a Node.js from elsewhere may bundle its own).
command -v npm >/dev/null || missing+=(nodejs npm)
if ((${#missing[@]})); then
  say "installing ${missing[*]}"
  limit 300 "apt-get update" apt-get update -qq
  limit 900 "apt-get install" \
    env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >"$LOGS/apt.log"
fi

# ------------------------------------------------------------------------------------------
phase lint "dockerfilelint docker/Dockerfile"
NPM_TOOLS=$CACHE/npm-tools
if [[ ! -x $NPM_TOOLS/node_modules/.bin/dockerfilelint ]]; then
  mkdir -p "$NPM_TOOLS"
  limit 300 "npm install dockerfilelint" \
    npm install --prefix "$NPM_TOOLS" --no-audit --no-fund --silent dockerfilelint
fi
# docker/.dockerfilelintrc turns off the one rule that cannot see ARG defaults; any other
# issue fails the check.
limit 60 "dockerfilelint found issues" "$NPM_TOOLS/node_modules/.bin/dockerfilelint" docker/Dockerfile

# ------------------------------------------------------------------------------------------
phase base "debian:bookworm and debian:bookworm-slim base images"
WORK=$(mktemp -d "$CACHE/work.XXXXXX")

# The host's apt source for bookworm (deb822 or one-line format), unless given.
debian_mirror() {
  if [[ -n ${TENSORD_DEBIAN_MIRROR:-} ]]; then
    echo "$TENSORD_DEBIAN_MIRROR"
    return
  fi
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f $f ]] || continue
    awk 'BEGIN { RS = ""; FS = "\n" }
         { uri = ""; ok = 0
           for (i = 1; i <= NF; i++) {
             if ($i ~ /^URIs:/) { split($i, a, /[ \t]+/); uri = a[2] }
             if ($i ~ /^Suites:/ && $i ~ /[ \t]bookworm([ \t]|$)/) ok = 1
           }
           if (ok && uri != "") { print uri; exit } }' "$f"
  done | sed -n 1p
  if [[ -f /etc/apt/sources.list ]]; then
    awk '$1 == "deb" { for (i = 2; i < NF; i++) if ($i ~ /:\/\// && $(i + 1) == "bookworm") { print $i; exit } }' \
      /etc/apt/sources.list
  fi
}

make_rootfs_tarballs() {
  local mirror rootfs=$WORK/rootfs slim=$WORK/rootfs-slim
  mirror=$(debian_mirror | sed -n 1p)
  say "debootstrap --variant=minbase bookworm ${mirror:-(debootstrap default mirror)}"
  # minbase (essential packages and apt) is what the official debian images are made from;
  # the slim one additionally drops documentation, man pages and translations.
  limit 900 debootstrap nice -n 10 debootstrap --variant=minbase bookworm "$rootfs" ${mirror:+"$mirror"} \
    >"$LOGS/debootstrap.log" 2>&1
  # Same apt sources as the host (also Debian 12): updates and security included.
  if [[ -f /etc/apt/sources.list.d/debian.sources ]]; then
    cp /etc/apt/sources.list.d/debian.sources "$rootfs/etc/apt/sources.list.d/"
    rm -f "$rootfs/etc/apt/sources.list"
  fi
  chroot "$rootfs" apt-get clean
  rm -rf "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/cache/apt/*.bin "$rootfs"/var/log/*.log \
    "$rootfs"/var/log/apt/* "$rootfs/etc/resolv.conf" "$rootfs/etc/hostname"
  : >"$rootfs/etc/machine-id"
  # Package installs inside an image must not try to start services.
  printf '#!/bin/sh\nexit 101\n' >"$rootfs/usr/sbin/policy-rc.d"
  chmod 755 "$rootfs/usr/sbin/policy-rc.d"

  cp -a "$rootfs" "$slim"
  cat >"$slim/etc/dpkg/dpkg.cfg.d/slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  find "$slim/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
  find "$slim/usr/share/doc" -mindepth 1 -type d -empty -delete
  rm -rf "$slim"/usr/share/man/* "$slim"/usr/share/info/* "$slim"/usr/share/groff/* \
    "$slim"/usr/share/lintian/*
  find "$slim/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +

  tar --numeric-owner -C "$rootfs" -cf "$WORK/debian-bookworm.tar" .
  tar --numeric-owner -C "$slim" -cf "$WORK/debian-bookworm-slim.tar" .
  mv "$WORK/debian-bookworm.tar" "$WORK/debian-bookworm-slim.tar" "$CACHE/"
  rm -rf "$rootfs" "$slim"
}

if [[ ${TENSORD_IMAGE_REFRESH:-0} == 1 || ! -f $CACHE/debian-bookworm.tar ||
      ! -f $CACHE/debian-bookworm-slim.tar ]]; then
  make_rootfs_tarballs
else
  say "using cached rootfs tarballs in $CACHE"
fi

# Imported under the exact names the Dockerfile's FROM lines use. Re-imported only when the
# tarball changed (a new import is a new image id, which would invalidate the build cache).
for name in bookworm bookworm-slim; do
  tarball=$CACHE/debian-$name.tar
  sum=$(sha256sum "$tarball" | cut -c1-64)
  have=$("${PODMAN[@]}" image inspect --format '{{index .Labels "tensord.check.rootfs"}}' \
    "localhost/debian:$name" 2>/dev/null || true)
  if [[ $have != "$sum" ]]; then
    say "importing debian:$name ($(du -h "$tarball" | cut -f1))"
    limit 300 "import debian:$name" "${PODMAN[@]}" import --quiet \
      --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
      --change 'CMD ["bash"]' --change "LABEL tensord.check.rootfs=$sum" \
      "$tarball" "localhost/debian:$name" >/dev/null
    limit 60 "tag debian:$name" "${PODMAN[@]}" tag "localhost/debian:$name" "docker.io/library/debian:$name"
  fi
done

# ------------------------------------------------------------------------------------------
phase build "building docker/Dockerfile (-j$JOBS, log: $LOGS/build.log)"
#   --pull=never        there is no registry: FROM must resolve to the local base images
#   --isolation chroot  RUN steps in a chroot: needs no user namespace and no OCI runtime
#   --network host      RUN steps reach the Debian mirror through the host's network
#   --format docker     OCI image configs have no HEALTHCHECK; the docker format keeps it
#   no --layers         with vfs every cached step is a full copy of the tree (about 1.5 GB
#                       in the build stage) and the disk is slow to copy and free it; one
#                       container per stage is faster when the sources changed, and the ccache
#                       mount keeps the recompile short. TENSORD_IMAGE_LAYERS=1 caches steps.
#   nice -n 10          the compile leaves room for the rest of the machine
layers=()
# The host's compiler cache, mounted as the build's CCACHE_DIR: a host that built the same
# sources (scripts/build.sh, CI's first stage) has compiled most of the image's objects already
# (see the Dockerfile). TENSORD_IMAGE_HOST_CCACHE=0 keeps the image's own cache mount only.
host_cache=()
if [[ ${TENSORD_IMAGE_HOST_CCACHE:-1} == 1 ]] && command -v ccache >/dev/null; then
  cache_dir=$(ccache -k cache_dir 2>/dev/null || true)
  if [[ -n $cache_dir ]]; then
    mkdir -p "$cache_dir"
    host_cache=(-v "$cache_dir:/var/cache/ccache-host" --build-arg CCACHE_DIR=/var/cache/ccache-host)
    say "compiler cache: the host's $cache_dir"
  fi
fi
# --force-rm: a failed step leaves no working container behind (a full copy with vfs).
[[ ${TENSORD_IMAGE_LAYERS:-0} == 1 ]] && layers=(--layers --force-rm)
revision=$(git rev-parse HEAD 2>/dev/null || echo unknown)
stamp() { while IFS= read -r line; do printf '[%4ds] %s\n' $((SECONDS - PHASE_START)) "$line"; done; }
if ! timeout --kill-after=30 "$BUILD_TIMEOUT" nice -n 10 "$(command -v buildah)" "${STORE_FLAGS[@]}" \
    bud --pull=never --isolation chroot --network host --format docker "${layers[@]}" \
    "${host_cache[@]}" \
    --build-arg BUILD_JOBS="$JOBS" --build-arg REVISION="$revision" \
    --build-arg CREATED="$(date -u +%Y-%m-%dT%H:%M:%SZ)" \
    -f docker/Dockerfile -t "$IMAGE" . 2>&1 | stamp >"$LOGS/build.log"; then
  tail -n 60 "$LOGS/build.log" >&2
  fail "image build failed or took over ${BUILD_TIMEOUT}s (full log: $LOGS/build.log)"
fi
grep -E '^\[ *[0-9]+s\] (\[[0-9]/[0-9]\] )?(STEP [0-9]+/[0-9]+: (FROM|RUN|COPY)|COMMIT)' "$LOGS/build.log" |
  cut -c1-110 | sed 's/^/  /'
say "build finished at $((SECONDS - PHASE_START))s"

# ------------------------------------------------------------------------------------------
phase run "starting the container"
PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# Explicit ulimits: podman's default nproc/nofile exceed the hard limits here, and raising a
# hard limit needs CAP_SYS_RESOURCE, which this sandbox withholds.
nofile=$(ulimit -Hn); [[ $nofile == unlimited || $nofile -gt 65536 ]] && nofile=65536
nproc=$(ulimit -Hu); [[ $nproc == unlimited || $nproc -gt 4096 ]] && nproc=4096
RUN_FLAGS=(
  --network host          # no bridge/CNI setup; the server binds 127.0.0.1:$PORT only
  --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc"
  --log-driver k8s-file   # `podman logs` without journald
  --read-only --cap-drop all --security-opt no-new-privileges   # how it should run in prod
)
# The server's output (its stderr comes back on podman's stderr), less podman's own log lines.
container_log() { "${PODMAN[@]}" logs "$CTR" 2>&1 | grep -v '^time="' || true; }
METRICS_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
limit 120 "podman run" "${PODMAN[@]}" run -d --name "$CTR" "${RUN_FLAGS[@]}" \
  -e TENSORD_ADDRESS="127.0.0.1:$PORT" -e TENSORD_METRICS_ADDRESS="127.0.0.1:$METRICS_PORT" \
  "$IMAGE" >/dev/null 2>"$LOGS/run.log"
say "container $CTR serving on 127.0.0.1:$PORT, metrics on 127.0.0.1:$METRICS_PORT"

# No systemd here to time the image's HEALTHCHECK (podman logs errors saying so), so run it:
# `podman healthcheck run` executes the image's own check, `tensordctl --timeout 3 health`.
wait_healthy() {
  local name=$1 healthy=0
  for _ in $(seq 1 30); do
    if [[ $("${PODMAN[@]}" inspect --format '{{.State.Running}}' "$name" 2>/dev/null) != true ]]; then
      "${PODMAN[@]}" logs "$name" >&2 || true
      fail "the container $name exited before it became healthy"
    fi
    if timeout 20 "${PODMAN[@]}" healthcheck run "$name" >/dev/null 2>&1; then
      healthy=1
      break
    fi
    sleep 1
  done
  ((healthy)) || { "${PODMAN[@]}" logs "$name" >&2 || true; fail "health check of $name did not pass within 30 tries"; }
}
wait_healthy "$CTR"
say "healthy: $(timeout 20 "${PODMAN[@]}" exec "$CTR" tensordctl health 2>&1)"
server_log=$(container_log)
echo "$server_log" | sed 's/^/  server: /'
# The image's ENV names only variables tensord reads (the entrypoint warns otherwise).
if grep -q "tensord-entrypoint: warning" <<<"$server_log"; then
  fail "the image sets a TENSORD_* variable tensord does not read"
fi

# ------------------------------------------------------------------------------------------
phase client "Python client from the host (client/python)"
PYTHONPATH=$ROOT/client/python limit 300 "docker/smoke_client.py" \
  /usr/bin/python3 docker/smoke_client.py --address "127.0.0.1:$PORT"
# The image serves Prometheus metrics; the client's calls must show in them.
scrape=$(timeout 20 python3 -c 'import sys, urllib.request
print(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' \
  "http://127.0.0.1:$METRICS_PORT/metrics") || fail "no metrics at 127.0.0.1:$METRICS_PORT/metrics"
grep -Eq '^tensord_rpcs_total\{method="Execute",code="OK"\} [1-9]' <<<"$scrape" ||
  fail "the metrics do not count the client's Execute calls: $(grep '^tensord_rpcs' <<<"$scrape")"
say "metrics: $(grep -c '^tensord_' <<<"$scrape") tensord series, $(grep '^tensord_rpcs_total{method="Execute",code="OK"}' <<<"$scrape")"

# ------------------------------------------------------------------------------------------
phase checks "non-root process, no compiler, misspelt TLS variable refused"
top=$(timeout 30 "${PODMAN[@]}" top "$CTR" user huser pid args 2>&1) || fail "podman top: $top"
echo "$top" | sed 's/^/  /'
pid=$("${PODMAN[@]}" inspect --format '{{.State.Pid}}' "$CTR")
uid=$(awk '/^Uid:/ { print $2 }' "/proc/$pid/status")
[[ $uid == 10001 ]] || fail "the server process (host pid $pid) runs as uid $uid, not 10001"
in_uid=$(timeout 30 "${PODMAN[@]}" exec "$CTR" id -u)
[[ $in_uid == 10001 ]] || fail "id -u inside the container says $in_uid"
say "server process uid $uid (host pid $pid); id -u inside: $in_uid"

# --no-healthcheck: a one-shot command needs no health timer (nor podman's systemd errors).
PROBE_FLAGS=(--rm --no-healthcheck --ulimit "nofile=$nofile:$nofile" --ulimit "nproc=$nproc:$nproc"
             --log-driver k8s-file)
compilers=$(timeout 60 "${PODMAN[@]}" run "${PROBE_FLAGS[@]}" --name "$CTR-probe" --network none \
  --entrypoint /bin/sh "$IMAGE" -c '
    for c in cc gcc g++ c++ cpp clang clang++ ld as; do command -v "$c"; done
    ls /usr/bin /usr/local/bin | grep -E "^(x86_64|aarch64)-linux-gnu-(gcc|g\+\+)" || true
    find / -xdev \( -name cc1 -o -name cc1plus \) 2>/dev/null || true' 2>"$LOGS/probe.log") ||
  fail "probe for compilers failed: $compilers $(cat "$LOGS/probe.log")"
[[ -z $compilers ]] || fail "the runtime image holds a toolchain: $compilers"
say "no compiler, assembler or linker in the runtime image"

tls_rc=0
tls_out=$(timeout 60 "${PODMAN[@]}" run "${PROBE_FLAGS[@]}" --name "$CTR-tls" --network host \
  -e TENSORD_ADDRESS=127.0.0.1:0 -e TENSORD_TLS_CERT_FILE=/run/secrets/tls.crt "$IMAGE" 2>&1) ||
  tls_rc=$?
if [[ $tls_rc != 78 ]] || ! grep -q "refusing to serve" <<<"$tls_out"; then
  fail "TENSORD_TLS_CERT_FILE (tensord reads TENSORD_TLS_CERT): want exit 78 and a refusal, got $tls_rc: $tls_out"
fi
say "TENSORD_TLS_CERT_FILE, a variable tensord does not read: refused (exit 78)"

# ------------------------------------------------------------------------------------------
phase tls "a second container with TLS and bearer tokens from TENSORD_* variables"
# Throw-away certificates and a token made now; the container user (uid 10001, the same uid
# on the host: no user namespace) must be able to read them through the read-only mount.
SECRETS=$WORK/secrets
limit 60 "make-test-certs.sh" sh scripts/make-test-certs.sh "$SECRETS" >/dev/null
token=$(head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '# token tenant\n%s smoke\n' "$token" >"$SECRETS/tokens"
chown -R 10001:10001 "$SECRETS"
TLS_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
# The image's HEALTHCHECK speaks plaintext; with TLS on, the check is run with the CA instead.
limit 120 "podman run (TLS)" "${PODMAN[@]}" run -d --name "$CTR-secure" "${RUN_FLAGS[@]}" \
  --no-healthcheck -v "$SECRETS:/run/secrets:ro" \
  -e TENSORD_ADDRESS="127.0.0.1:$TLS_PORT" -e TENSORD_METRICS_ADDRESS= \
  -e TENSORD_TLS_CERT=/run/secrets/server.pem -e TENSORD_TLS_KEY=/run/secrets/server.key \
  -e TENSORD_AUTH_TOKENS=/run/secrets/tokens "$IMAGE" >/dev/null 2>>"$LOGS/run.log"
tls_health=""
for _ in $(seq 1 30); do
  tls_health=$(timeout 20 "${PODMAN[@]}" exec "$CTR-secure" tensordctl --address "localhost:$TLS_PORT" \
    --tls-ca /run/secrets/ca.pem --timeout 3 health 2>&1) && break
  tls_health=""
  sleep 1
done
[[ -n $tls_health ]] || { "${PODMAN[@]}" logs "$CTR-secure" >&2 || true; fail "the TLS container did not become healthy"; }
say "TLS container healthy: $tls_health"
"${PODMAN[@]}" logs "$CTR-secure" 2>&1 | grep -v '^time="' | sed 's/^/  server: /'
PYTHONPATH=$ROOT/client/python limit 300 "docker/smoke_client.py over TLS with a token" \
  /usr/bin/python3 docker/smoke_client.py --address "localhost:$TLS_PORT" \
  --tls-ca "$SECRETS/ca.pem" --token "$token"
limit 60 "podman stop (TLS)" "${PODMAN[@]}" stop -t 20 "$CTR-secure" >/dev/null 2>>"$LOGS/run.log"
tls_code=$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$CTR-secure")
[[ $tls_code == 0 ]] || fail "the TLS server exited with $tls_code after SIGTERM"
limit 60 "podman rm (TLS)" "${PODMAN[@]}" rm "$CTR-secure" >/dev/null 2>>"$LOGS/run.log"

# ------------------------------------------------------------------------------------------
phase stop "SIGTERM and a clean exit"
limit 60 "podman stop" "${PODMAN[@]}" stop -t 20 "$CTR" >/dev/null 2>>"$LOGS/run.log"
code=$("${PODMAN[@]}" inspect --format '{{.State.ExitCode}}' "$CTR")
logs=$(container_log)
echo "$logs" | tail -n 1 | sed 's/^/  server: /'
[[ $code == 0 ]] || fail "the server exited with $code after SIGTERM"
grep -q "SIGTERM, shutting down" <<<"$logs" || fail "the server did not log its SIGTERM shutdown"
limit 60 "podman rm" "${PODMAN[@]}" rm "$CTR" >/dev/null 2>>"$LOGS/run.log"

# ------------------------------------------------------------------------------------------
phase cuda "the CUDA variant (docker/Dockerfile.cuda) on the image above"
# The host's build with the CUDA backend, and the toolkit's libraries: where either is
# missing (a machine without the toolkit) the variant is not built, and this says why.
CUDA_IMAGE=localhost/tensord:check-cuda
cuda_ctx=$WORK/cuda-context
cuda_rc=0
docker/cuda-context.sh "${TENSORD_BUILD_DIR:-build}" "$cuda_ctx" >"$LOGS/cuda-context.log" 2>&1 ||
  cuda_rc=$?
if ((cuda_rc == 3)); then
  say "not built: $(tail -n 1 "$LOGS/cuda-context.log")"
else
  ((cuda_rc == 0)) || fail "docker/cuda-context.sh: $(cat "$LOGS/cuda-context.log")"
  sed 's/^/  /' "$LOGS/cuda-context.log"
  limit 60 "dockerfilelint found issues in docker/Dockerfile.cuda" \
    "$NPM_TOOLS/node_modules/.bin/dockerfilelint" docker/Dockerfile.cuda
  limit 900 "building docker/Dockerfile.cuda (log: $LOGS/build-cuda.log)" \
    "$(command -v buildah)" "${STORE_FLAGS[@]}" bud --pull=never --isolation chroot --format docker \
    --build-arg BASE_IMAGE="$IMAGE" -f docker/Dockerfile.cuda -t "$CUDA_IMAGE" "$cuda_ctx" \
    >"$LOGS/build-cuda.log" 2>&1
  # Every library the binaries and the CUDA libraries load is in the image; without a GPU the
  # server, asked for cuda:0, says it has the CUDA backend and no such device.
  probe=$(timeout 180 "${PODMAN[@]}" run "${PROBE_FLAGS[@]}" --name "$CTR-probe" --network none \
    --entrypoint /bin/sh "$CUDA_IMAGE" -c '
      ldd /usr/local/bin/tensord /usr/local/bin/tensordctl /usr/local/lib/tensord-cuda/*.so* |
        grep "not found" | sed "s/^/missing: /"
      tensord --address 127.0.0.1:0 --devices cuda:0 2>&1 | tail -n 1' 2>"$LOGS/probe.log") ||
    fail "probe of the CUDA image failed: $probe $(cat "$LOGS/probe.log")"
  ! grep -q "^missing: " <<<"$probe" || fail "the CUDA image lacks libraries: $probe"
  grep -q "backends in this build: .*cuda" <<<"$probe" ||
    fail "the CUDA image's server has no CUDA backend: $probe"
  say "CUDA image: every library found; $(tail -n 1 <<<"$probe")"
  # It serves without a GPU, as the image it extends does.
  CUDA_PORT=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  limit 120 "podman run (CUDA)" "${PODMAN[@]}" run -d --name "$CTR-cuda" "${RUN_FLAGS[@]}" \
    -e TENSORD_ADDRESS="127.0.0.1:$CUDA_PORT" -e TENSORD_METRICS_ADDRESS= \
    "$CUDA_IMAGE" >/dev/null 2>>"$LOGS/run.log"
  wait_healthy "$CTR-cuda"
  devices=$(timeout 20 "${PODMAN[@]}" exec "$CTR-cuda" tensordctl devices 2>&1) ||
    fail "tensordctl devices in the CUDA container: $devices"
  grep -q "^cpu " <<<"$devices" || fail "the CUDA container lists no cpu device: $devices"
  say "CUDA container healthy without a GPU, devices: $(awk 'NR > 1 {print $1}' <<<"$devices" | paste -sd' ')"
  limit 60 "podman stop (CUDA)" "${PODMAN[@]}" stop -t 20 "$CTR-cuda" >/dev/null 2>>"$LOGS/run.log"
  limit 60 "podman rm (CUDA)" "${PODMAN[@]}" rm "$CTR-cuda" >/dev/null 2>>"$LOGS/run.log"
  cuda_size=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$CUDA_IMAGE")
  say "image $CUDA_IMAGE: $((cuda_size / 1024 / 1024)) MiB"
fi

phase summary "image size and phase times"
size=$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE")
say "image $IMAGE: $((size / 1024 / 1024)) MiB ($size bytes)"
"${PODMAN[@]}" image inspect --format '{{range $k, $v := .Labels}}{{$k}}={{$v}}{{"\n"}}{{end}}' "$IMAGE" |
  grep '^org.opencontainers' | sed 's/^/  /'
for t in "${TIMES[@]}"; do say "phase $t"; done
say "PASS in $((SECONDS - START))s"
