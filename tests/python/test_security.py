"""TLS, mutual TLS and bearer tokens from the Python client, against real server processes.

Certificates are made for the run by scripts/make-test-certs.sh (openssl CLI) in a temporary
directory; nothing secret is committed.
"""
import subprocess
import time

import grpc
import numpy as np
import pytest

import tensord
from tensord._pb import service_pb2

from conftest import REPO, _free_port, server_binary

TOKEN_ALICE = "py-alice-0123456789abcdef"
TOKEN_BOB = "py-bob-fedcba9876543210"


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    d = tmp_path_factory.mktemp("pki")
    subprocess.run(["sh", str(REPO / "scripts" / "make-test-certs.sh"), str(d)], check=True,
                   stdout=subprocess.DEVNULL)
    (d / "tokens.txt").write_text(f"# tenants\n{TOKEN_ALICE} alice\n{TOKEN_BOB} bob\n")
    return d


class SecureServer:
    """A tensord process with security flags; ready once a TLS health check says SERVING."""

    def __init__(self, log_path, args, tls_ca=None, tls_cert=None, tls_key=None):
        self.log_path = log_path
        self.args = args
        self.client_tls = {"tls_ca": tls_ca, "tls_cert": tls_cert, "tls_key": tls_key}
        self.proc = None
        self.address = None

    def start(self, timeout=60.0):
        binary = server_binary()
        if not binary.is_file():
            pytest.fail(f"tensord server binary not found at {binary}: set TENSORD_BIN")
        port = _free_port()
        self.address = f"localhost:{port}"
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen([str(binary), f"--address=127.0.0.1:{port}", *self.args],
                                         stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + timeout
        # Probing before the port is bound would put the channel into gRPC's reconnect backoff
        # (seconds); the start-up line says when it is.
        while "listening on" not in self.log():
            assert self.proc.poll() is None, f"server exited:\n{self.log()}"
            assert time.monotonic() < deadline, f"server not listening:\n{self.log()}"
            time.sleep(0.02)
        with tensord.connect(self.address, **self.client_tls) as probe:
            while time.monotonic() < deadline:
                assert self.proc.poll() is None, f"server exited:\n{self.log()}"
                try:
                    if probe.health(timeout=1.0) == "SERVING":
                        return self
                except tensord.TensordError:
                    pass
                time.sleep(0.05)
        raise RuntimeError(f"server not ready:\n{self.log()}")

    def log(self):
        return self.log_path.read_text(errors="replace")

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(timeout=15)


@pytest.fixture(scope="module")
def tls_server(pki, tmp_path_factory):
    server = SecureServer(tmp_path_factory.mktemp("tls") / "tensord.log",
                          [f"--tls-cert={pki / 'server.pem'}", f"--tls-key={pki / 'server.key'}",
                           f"--auth-tokens={pki / 'tokens.txt'}"],
                          tls_ca=str(pki / "ca.pem")).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def mtls_server(pki, tmp_path_factory):
    server = SecureServer(tmp_path_factory.mktemp("mtls") / "tensord.log",
                          [f"--tls-cert={pki / 'server.pem'}", f"--tls-key={pki / 'server.key'}",
                           f"--tls-client-ca={pki / 'ca.pem'}"],
                          tls_ca=str(pki / "ca.pem"), tls_cert=str(pki / "client.pem"),
                          tls_key=str(pki / "client.key")).start()
    yield server
    server.stop()


def test_start_up_line_names_the_security(tls_server):
    assert "TLS, 2 bearer token(s)" in tls_server.log()
    assert "insecure" not in tls_server.log()


def test_tls_and_token_round_trip(tls_server, pki):
    # The CA as a path, and as bytes.
    for ca in (str(pki / "ca.pem"), (pki / "ca.pem").read_bytes()):
        with tensord.connect(tls_server.address, tls_ca=ca, token=TOKEN_ALICE) as client, \
                client.session() as sess:
            a = sess.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
            np.testing.assert_array_equal((a + a).numpy(),
                                          2 * np.arange(6, dtype=np.float32).reshape(2, 3))


def test_missing_and_wrong_tokens_raise_unauthenticated(tls_server, pki):
    ca = str(pki / "ca.pem")
    with tensord.connect(tls_server.address, tls_ca=ca) as client:
        assert client.health() == "SERVING"  # health needs no token
        with pytest.raises(tensord.Unauthenticated) as err:
            client.session()
        assert err.value.reason == "UNAUTHENTICATED"
        assert err.value.code == grpc.StatusCode.UNAUTHENTICATED
        assert err.value.metadata["cause"] == "missing"
        with pytest.raises(tensord.Unauthenticated):
            client.ops()
    wrong = "py-mallory-000000000000000"
    with tensord.connect(tls_server.address, tls_ca=ca, token=wrong) as client:
        with pytest.raises(tensord.Unauthenticated) as err:
            client.session()
        assert err.value.metadata["cause"] == "unknown"
        assert wrong not in str(err.value)


def test_plaintext_client_cannot_reach_a_tls_server(tls_server):
    with tensord.connect(tls_server.address, token=TOKEN_ALICE, timeout=10) as client:
        with pytest.raises(tensord.TensordError) as err:
            client.session()
        assert err.value.code == grpc.StatusCode.UNAVAILABLE
        assert err.value.reason == ""  # a transport failure, not a server answer


def test_tenants_do_not_see_each_others_sessions(tls_server, pki):
    ca = str(pki / "ca.pem")
    with tensord.connect(tls_server.address, tls_ca=ca, token=TOKEN_ALICE) as alice, \
            tensord.connect(tls_server.address, tls_ca=ca, token=TOKEN_BOB) as bob, \
            alice.session() as sess:
        x = sess.tensor(np.ones(3, np.float32))
        with pytest.raises(tensord.SessionNotFound) as theirs:
            bob._call("GetSessionInfo", service_pb2.GetSessionInfoRequest(session_id=sess.id))
        missing = "0" * 32
        with pytest.raises(tensord.SessionNotFound) as nobody:
            bob._call("GetSessionInfo", service_pb2.GetSessionInfoRequest(session_id=missing))
        assert theirs.value.message.replace(sess.id, "ID") == \
            nobody.value.message.replace(missing, "ID")
        with pytest.raises(tensord.SessionNotFound):
            bob._call("CloseSession", service_pb2.CloseSessionRequest(session_id=sess.id))
        with pytest.raises(tensord.SessionNotFound):
            bob._call("Release", service_pb2.ReleaseRequest(session_id=sess.id,
                                                            handles=[x.handle]))
        np.testing.assert_array_equal(x.numpy(), np.ones(3, np.float32))  # still alice's


def test_mutual_tls(mtls_server, pki):
    ca = str(pki / "ca.pem")
    with tensord.connect(mtls_server.address, tls_ca=ca, tls_cert=str(pki / "client.pem"),
                         tls_key=str(pki / "client.key")) as client, client.session() as sess:
        assert sess.tensor(np.array([5], np.int64)).numpy().tolist() == [5]
    with tensord.connect(mtls_server.address, tls_ca=ca, timeout=10) as client:
        with pytest.raises(tensord.TensordError) as err:
            client.session()
        assert err.value.code == grpc.StatusCode.UNAVAILABLE
    with tensord.connect(mtls_server.address, tls_ca=ca, tls_cert=str(pki / "rogue-client.pem"),
                         tls_key=str(pki / "rogue-client.key"), timeout=10) as client:
        with pytest.raises(tensord.TensordError) as err:
            client.session()
        assert err.value.code == grpc.StatusCode.UNAVAILABLE
    with pytest.raises(ValueError, match="both"):
        tensord.connect(mtls_server.address, tls_ca=ca, tls_cert=str(pki / "client.pem"))
