"""Fixtures: a real tensord server process on a free loopback port, a client and sessions.

The server binary is $TENSORD_BIN or <repo>/build/tensord. The client is the checkout's
client/python, or with TENSORD_INSTALLED_CLIENT=<dir> the tensord package installed under <dir>
(a venv holding the wheel, scripts/check-package.sh).
"""
import os
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALLED_CLIENT = os.environ.get("TENSORD_INSTALLED_CLIENT")
if not INSTALLED_CLIENT:
    sys.path.insert(0, str(REPO / "client" / "python"))

import tensord  # noqa: E402  (generates the protobuf modules on first import)

if INSTALLED_CLIENT and not Path(tensord.__file__).resolve().is_relative_to(
        Path(INSTALLED_CLIENT).resolve()):
    raise RuntimeError(f"TENSORD_INSTALLED_CLIENT={INSTALLED_CLIENT}, but tensord was imported "
                       f"from {tensord.__file__}")


def server_binary() -> Path:
    return Path(os.environ.get("TENSORD_BIN") or REPO / "build" / "tensord")


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_serving(address: str, proc, timeout: float) -> tuple:
    """Polls `address`'s health check until it answers SERVING (True), `proc` exits or the
    timeout passes (False); also returns the last error seen. A fresh channel per probe: one
    whose first connect was refused (nothing listening yet) waits out gRPC's reconnect
    backoff, seconds in all."""
    last = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            with tensord.connect(address) as probe:
                if probe.health(timeout=1.0) == "SERVING":
                    return True, last
        except tensord.TensordError as exc:
            last = str(exc)
        time.sleep(0.05)
    return False, last


class ServerProcess:
    def __init__(self, binary: Path, log_path: Path, extra_args=()):
        self.binary = binary
        self.log_path = log_path
        self.extra_args = list(extra_args)
        self.proc = None
        self.address = None

    def start(self, attempts: int = 5, timeout: float = 60.0, port: int | None = None) -> str:
        """Starts the server on `port` (a restart keeps its address) or on a free port."""
        last = ""
        for _ in range(attempts):
            address = f"127.0.0.1:{port or _free_port()}"
            log = open(self.log_path, "ab")
            self.proc = subprocess.Popen(
                [str(self.binary), f"--address={address}", *self.extra_args],
                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
            log.close()
            serving, last = wait_serving(address, self.proc, timeout)
            if serving:
                self.address = address
                return address
            self.stop()  # exited (e.g. the port was taken meanwhile): try another port
        raise RuntimeError(f"tensord server {self.binary} did not become healthy ({last}); "
                           f"log:\n{self.log_tail()}")

    def log_tail(self, n: int = 4000) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


@contextmanager
def client_of_own_server(tmp_path_factory, name: str, args=()):
    """A client of a server started with `args` for one module's tests; stopped afterwards."""
    proc = ServerProcess(server_binary(), tmp_path_factory.mktemp(name) / "tensord.log", args)
    proc.start()
    client = tensord.connect(proc.address)
    try:
        yield client
    finally:
        client.close()
        proc.stop()


@pytest.fixture(scope="module")
def unfused(tmp_path_factory):
    """A client of a server started with --fusion=off (programs compiled as written), for the
    fusion tests of one module to compare against."""
    with client_of_own_server(tmp_path_factory, "unfused", ["--fusion=off"]) as client:
        yield client


@pytest.fixture
def gpu_device(client):
    """The accelerator device tests name (TENSORD_TEST_GPU_DEVICE, default opencl:0): a test
    using it skips on a server without it, or fails where TENSORD_REQUIRE_GPU is set (CI)."""
    device = os.environ.get("TENSORD_TEST_GPU_DEVICE", "opencl:0")
    names = [d["name"] for d in client.devices()]
    if device not in names:
        if os.environ.get("TENSORD_REQUIRE_GPU"):
            pytest.fail(f"the server has no device {device} (devices: {names})")
        pytest.skip(f"the server has no device {device}")
    return device


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    binary = server_binary()
    if not binary.is_file():
        pytest.fail(f"tensord server binary not found at {binary}: build it "
                    "(scripts/build.sh) or set TENSORD_BIN")
    proc = ServerProcess(binary, tmp_path_factory.mktemp("server") / "tensord.log")
    proc.start()
    yield proc
    alive = proc.proc is not None and proc.proc.poll() is None
    proc.stop()
    assert alive, f"the tensord server died during the tests; log:\n{proc.log_tail()}"


@pytest.fixture(scope="session")
def address(server):
    return server.address


@pytest.fixture(scope="session")
def client(address):
    c = tensord.connect(address)
    yield c
    c.close()


@pytest.fixture
def sess(client):
    s = client.session()
    yield s
    if not s.closed:
        try:
            s.close()
        except tensord.TensordError:
            pass


@pytest.fixture
def nsess(sess):
    """A session that is also tensord.nn's default one (tensord.default_session)."""
    with tensord.default_session(sess):
        yield sess


def record_calls(monkeypatch, sess, what=lambda method, request: method) -> list:
    """What `what(method, request)` says of each unary RPC `sess` makes from now on (its
    method by default), in order; a call it answers None for is left out."""
    sent = []
    real_call = sess._call

    def recording(method, request):
        seen = what(method, request)
        if seen is not None:
            sent.append(seen)
        return real_call(method, request)

    monkeypatch.setattr(sess, "_call", recording)
    return sent


@pytest.fixture(scope="session")
def catalog(client):
    """{op name: op dict} as the server lists it."""
    return {o["name"]: o for o in client.ops()}
