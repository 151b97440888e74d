"""Replicas behind a real load balancer: three tensord servers behind Debian's nginx, configured
from deploy/nginx/tensord.conf (gRPC proxying, `hash $http_x_tensord_session consistent`).

Sessions opened through nginx stay on the replica that created them; when one replica is
killed, its sessions fail with a typed error (UNAVAILABLE, or SESSION_NOT_FOUND where nginx
passed the call to a replica that never held the session) and never succeed silently, while
the sessions of the other replicas carry on. Also: what metadata the client sends.
"""
import collections
import os
import pwd
import re
import signal
import string
import subprocess
import time
from pathlib import Path

import grpc
import numpy as np
import pytest

import tensord
from conftest import REPO, ServerProcess, _free_port, server_binary, wait_serving
from tensord._pb import service_pb2, service_pb2_grpc
from tensord.client import SESSION_METADATA_KEY

NGINX = Path("/usr/sbin/nginx")
TEMPLATE = REPO / "deploy" / "nginx" / "tensord.conf"
REPLICAS = 3
SESSIONS = 30
needs_nginx = pytest.mark.skipif(not NGINX.is_file(), reason=f"{NGINX} not installed")


@pytest.fixture(scope="module")
def replicas(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("replicas")
    procs = [ServerProcess(server_binary(), tmp / f"replica{i}.log", ["--log-level=warning"])
             for i in range(REPLICAS)]
    try:
        for p in procs:
            p.start()
        yield procs
    finally:
        for p in procs:
            p.stop()


class Nginx:
    """nginx in the foreground (`daemon off`), everything it writes under `tmp`, serving the
    rendered deploy/nginx/tensord.conf on a free loopback port."""

    def __init__(self, tmp: Path, upstreams: list[str]):
        self.tmp = tmp
        self.upstreams = upstreams
        self.proc = None
        self.address = None
        self.error_log = tmp / "error.log"
        self.access_log = tmp / "access.log"

    def render(self, port: int) -> Path:
        values = {"TENSORD_LISTEN": f"127.0.0.1:{port}"}
        values.update({f"TENSORD_REPLICA_{i}": a for i, a in enumerate(self.upstreams)})
        text = TEMPLATE.read_text()
        for name in values:
            assert "${" + name + "}" in text, f"{TEMPLATE} lacks ${{{name}}}"
        # safe_substitute leaves nginx's own $variables alone.
        site = self.tmp / "tensord.conf"
        site.write_text(string.Template(text).safe_substitute(values))
        # nginx runs its workers as `nobody` when started as root, and they could not reach
        # this directory; as another user the directive is ignored.
        user = f"user {pwd.getpwuid(os.geteuid()).pw_name};" if os.geteuid() == 0 else ""
        main = self.tmp / "nginx.conf"
        main.write_text(f"""
{user}
daemon off;
worker_processes 1;
pid {self.tmp}/nginx.pid;
error_log {self.error_log} notice;
events {{ worker_connections 256; }}
http {{
    log_format calls '$request_uri $status key=$http_x_tensord_session up=$upstream_addr';
    access_log {self.access_log} calls;
    client_body_temp_path {self.tmp}/client_body;
    proxy_temp_path {self.tmp}/proxy;
    fastcgi_temp_path {self.tmp}/fastcgi;
    uwsgi_temp_path {self.tmp}/uwsgi;
    scgi_temp_path {self.tmp}/scgi;
    include {site};
}}
""")
        return main

    def start(self, attempts: int = 5, timeout: float = 10.0) -> str:
        for _ in range(attempts):
            port = _free_port()
            conf = self.render(port)
            out = open(self.tmp / "nginx.out", "ab")
            # Its own process group: the workers go with the master in stop()'s last resort.
            self.proc = subprocess.Popen(
                [str(NGINX), "-p", str(self.tmp), "-e", str(self.error_log), "-c", str(conf)],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
            out.close()
            address = f"127.0.0.1:{port}"
            if wait_serving(address, self.proc, timeout)[0]:
                self.address = address
                return address
            self.stop()  # the port was taken meanwhile, or it never answered: try again
        raise RuntimeError(f"nginx did not serve tensord's health check; error log:\n"
                           f"{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.error_log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # fast shutdown, workers included
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # whatever of its group is left
        except ProcessLookupError:
            pass
        self.proc.wait()
        self.proc = None


@pytest.fixture(scope="module")
def balancer(replicas, tmp_path_factory):
    if not NGINX.is_file():
        pytest.skip(f"{NGINX} not installed")
    ng = Nginx(tmp_path_factory.mktemp("nginx"), [r.address for r in replicas])
    try:
        ng.start()
        yield ng
    finally:
        ng.stop()


def holders(replicas, session_id: str) -> list[int]:
    """The replicas that hold `session_id`, each asked directly (not through nginx)."""
    found = []
    for i, r in enumerate(replicas):
        if r.proc is None or r.proc.poll() is not None:
            continue
        with tensord.connect(r.address) as c:
            try:
                c._call("GetSessionInfo", service_pb2.GetSessionInfoRequest(session_id=session_id))
                found.append(i)
            except tensord.SessionNotFound:
                pass
    return found


def work(sess, k: int):
    """A put, a get and an op in session `sess`; returns the tensor put, checks the values."""
    x = np.arange(4, dtype=np.float32) + 10 * k
    t = sess.tensor(x)
    np.testing.assert_array_equal(t.numpy(), x)
    np.testing.assert_array_equal(sess.op("mul", t, 2.0).numpy(), 2 * x)
    return t, x


@needs_nginx
def test_sessions_stay_on_their_replica_and_fail_typed_when_it_dies(replicas, balancer):
    start = time.monotonic()
    client = tensord.connect(balancer.address)
    try:
        assert client.health() == "SERVING"
        assert client.health("tensord.v1.Tensord") == "SERVING"
        sessions = []
        for k in range(SESSIONS):
            s = client.session()
            t, x = work(s, k)
            sessions.append((s, t, x))
        # Each session lives on exactly one replica, and the one that served its calls.
        where = {}
        for s, _, _ in sessions:
            held = holders(replicas, s.id)
            assert len(held) == 1, f"session {s.id} held by replicas {held}"
            where[s.id] = held[0]
        per_replica = collections.Counter(where.values())
        assert len(per_replica) >= 2, f"all {SESSIONS} sessions on one replica: {per_replica}"

        victim = per_replica.most_common(1)[0][0]
        replicas[victim].proc.kill()  # SIGKILL: gone at once, as in a crash
        replicas[victim].proc.wait()

        outcomes = collections.Counter()
        for k, (s, t, x) in enumerate(sessions):
            if where[s.id] == victim:
                # A session of the dead replica: every call fails, typed; none succeeds.
                for call in (lambda: t.numpy(), lambda: s.op("add", t, 1.0),
                             lambda: s.tensor(x)):
                    with pytest.raises(tensord.TensordError) as err:
                        call()
                    e = err.value
                    if e.code == grpc.StatusCode.UNAVAILABLE:
                        outcomes["UNAVAILABLE"] += 1
                    else:
                        assert e.code == grpc.StatusCode.NOT_FOUND, e
                        assert e.reason == "SESSION_NOT_FOUND", e
                        assert isinstance(e, tensord.SessionNotFound)
                        outcomes["SESSION_NOT_FOUND"] += 1
            else:
                # The others carry on with their values.
                np.testing.assert_array_equal(t.numpy(), x)
                np.testing.assert_array_equal(s.op("add", t, 1.0).numpy(), x + 1)
                work(s, k)
                s.close()
        victims = per_replica[victim]
        assert sum(outcomes.values()) == 3 * victims
        # The balancer still answers for the replicas left.
        assert client.health() == "SERVING"
        print(f"\nsessions per replica {dict(per_replica)}; replica {victim} killed; its "
              f"{victims} sessions' calls answered {dict(outcomes)}; "
              f"{time.monotonic() - start:.1f} s")
    finally:
        client.close()


class _Recorder(grpc.UnaryUnaryClientInterceptor, grpc.UnaryStreamClientInterceptor,
                grpc.StreamUnaryClientInterceptor):
    """Records (method, metadata, request's session_id) of every call through the channel it
    wraps (a client-streaming call's requests are not looked at: session_id None)."""

    def __init__(self):
        self.calls = []

    def _record(self, details, request=None):
        self.calls.append((details.method.rsplit("/", 1)[-1], dict(details.metadata or ()),
                           getattr(request, "session_id", None)))

    def intercept_unary_unary(self, continuation, details, request):
        self._record(details, request)
        return continuation(details, request)

    def intercept_unary_stream(self, continuation, details, request):
        self._record(details, request)
        return continuation(details, request)

    def intercept_stream_unary(self, continuation, details, request_iterator):
        self._record(details)
        return continuation(details, request_iterator)


def test_every_call_of_a_session_carries_its_affinity_key(replicas):
    """x-tensord-session: one key per session, drawn before CreateSession and sent with it and
    with every later call of the session (streams too); none on calls of no session; the
    bearer token goes with every call as before."""
    rec = _Recorder()
    live = next(r for r in replicas if r.proc is not None and r.proc.poll() is None)
    with tensord.connect(live.address, token="not-checked") as c:
        c.stub = service_pb2_grpc.TensordStub(grpc.intercept_channel(c._channel, rec))
        c.devices()
        s1 = c.session()
        s2 = c.session()
        t = s1.tensor(np.arange(3, dtype=np.float32))
        np.testing.assert_array_equal((t + 1).numpy(), [1, 2, 3])
        s1.info()
        s1.keep_alive()
        with s1.autodiff():
            pass
        s2.tensor(np.ones(2)).numpy()
        s1.close()
        s2.close()
    assert s1.affinity_key != s2.affinity_key
    for s in (s1, s2):
        assert len(s.affinity_key) == 32 and int(s.affinity_key, 16) >= 0
    key_of = {s1.id: s1.affinity_key, s2.id: s2.affinity_key}
    methods = [m for m, _, _ in rec.calls]
    for needed in ("CreateSession", "PutTensor", "Execute", "GetTensor", "GetSessionInfo",
                   "KeepAlive", "OpenAutodiffContext", "CloseAutodiffContext", "CloseSession"):
        assert needed in methods, methods
    created = []
    for method, md, session_id in rec.calls:
        assert md.get("authorization") == "Bearer not-checked", method
        key = md.get(SESSION_METADATA_KEY)
        if method == "ListDevices":
            assert key is None
        elif method == "CreateSession":
            created.append(key)
        elif session_id is not None:
            assert key == key_of[session_id], (method, md)
        else:  # PutTensor
            assert key in created, (method, md)
    assert created == [s1.affinity_key, s2.affinity_key]


def test_the_kubernetes_nginx_config_balances_as_the_tested_one():
    """deploy/kubernetes/nginx.yaml repeats deploy/nginx/tensord.conf's balancing for the
    cluster (names that resolve, HTTP/2 spelled for newer nginx): the lines that decide where a
    call goes and what a client sees must be the same in both."""
    def lines(text):
        return {" ".join(line.split("#")[0].split()) for line in text.splitlines()} - {""}
    tested = lines(TEMPLATE.read_text())
    cluster = lines((REPO / "deploy" / "kubernetes" / "nginx.yaml").read_text())
    for line in ("hash $http_x_tensord_session consistent;", "keepalive 32;",
                 "client_max_body_size 0;", "grpc_pass grpc://tensord_backends;",
                 "grpc_next_upstream error timeout;", "grpc_next_upstream_tries 3;",
                 "grpc_connect_timeout 2s;", "grpc_read_timeout 600s;",
                 "grpc_send_timeout 600s;", "client_body_timeout 600s;",
                 "error_page 502 503 504 = @tensord_unavailable;",
                 "location @tensord_unavailable {", "add_header grpc-status 14 always;",
                 "return 204;"):
        assert line in tested, line
        assert line in cluster, line
    # One server line per replica of the serving StatefulSet (both variants).
    servers = sorted(line for line in cluster if line.startswith("server tensord-serving-"))
    assert all(line.endswith("resolve max_fails=1 fail_timeout=10s;") for line in servers)
    for manifest in ("serving.yaml", "serving-gpu.yaml"):
        text = (REPO / "deploy" / "kubernetes" / manifest).read_text()
        replicas = int(re.search(r"^  replicas: (\d+)$", text, re.M).group(1))
        assert servers == [f"server tensord-serving-{i}.tensord-serving.tensord.svc.cluster"
                           f".local:50051 resolve max_fails=1 fail_timeout=10s;"
                           for i in range(replicas)], (manifest, servers)
