"""TLS, mutual TLS and bearer tokens from the Python client, against real server processes.

Certificates are made for the run by scripts/make-test-certs.sh (openssl CLI) in a temporary
directory; nothing secret is committed.
"""
import json
import os
import signal
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


def _eventually(predicate, what, timeout=10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def _events(server, name):
    """The server's JSON log lines of event `name`, as dicts."""
    out = []
    for line in server.log().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue  # the start-up line and gRPC's own lines are not JSON
        if isinstance(record, dict) and record.get("event") == name:
            out.append(record)
    return out


def _replace(path, text):
    """Replaces a file the way a careful operator does: a new file renamed over the old."""
    tmp = path.with_suffix(".new")
    tmp.write_text(text)
    tmp.replace(path)


def _authenticated(server, ca, token):
    with tensord.connect(server.address, tls_ca=ca, token=token, timeout=10) as client:
        try:
            client.devices()
            return True
        except tensord.Unauthenticated as err:
            assert err.metadata["cause"] == "unknown"
            return False


TOKEN_CAROL = "py-carol-00112233445566778"


def test_sighup_reloads_the_token_file(pki, tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"{TOKEN_ALICE} alice\n")
    ca = str(pki / "ca.pem")
    # No file watch: only SIGHUP can make the server read the file again.
    server = SecureServer(tmp_path / "tensord.log",
                          [f"--tls-cert={pki / 'server.pem'}", f"--tls-key={pki / 'server.key'}",
                           f"--auth-tokens={tokens}", "--auth-tokens-poll-interval=0"],
                          tls_ca=ca).start()
    try:
        _replace(tokens, f"# alice removed, bob added\n{TOKEN_BOB} bob\n")
        assert _authenticated(server, ca, TOKEN_ALICE), "reloaded without a SIGHUP"
        server.proc.send_signal(signal.SIGHUP)
        _eventually(lambda: _events(server, "tokens_reloaded"), "the reload's log line")
        assert not _authenticated(server, ca, TOKEN_ALICE)
        assert _authenticated(server, ca, TOKEN_BOB)
        reloaded = _events(server, "tokens_reloaded")
        assert [(r["level"], r["path"], r["tokens"]) for r in reloaded] == \
            [("info", str(tokens), 1)]

        # A malformed file is refused, logged without its tokens, and bob's token stays.
        _replace(tokens, f"{TOKEN_CAROL} carol\nshort-token dave\n")
        server.proc.send_signal(signal.SIGHUP)
        _eventually(lambda: _events(server, "tokens_reload_failed"), "the failure's log line")
        [failed] = _events(server, "tokens_reload_failed")
        assert failed["level"] == "warning" and failed["path"] == str(tokens)
        assert "line 2" in failed["error"]
        assert _authenticated(server, ca, TOKEN_BOB)
        assert not _authenticated(server, ca, TOKEN_CAROL)
        assert server.proc.poll() is None, "SIGHUP must not end the server"
    finally:
        server.stop()
    log = server.log()
    for secret in (TOKEN_ALICE, TOKEN_BOB, TOKEN_CAROL, "short-token"):
        assert secret not in log
    assert server.proc.returncode == 0, log


def test_changed_token_file_is_reloaded_without_a_signal(pki, tmp_path):
    tokens = tmp_path / "tokens.txt"
    tokens.write_text(f"{TOKEN_ALICE} alice\n")
    ca = str(pki / "ca.pem")
    server = SecureServer(tmp_path / "tensord.log",
                          [f"--tls-cert={pki / 'server.pem'}", f"--tls-key={pki / 'server.key'}",
                           f"--auth-tokens={tokens}", "--auth-tokens-poll-interval=50ms"],
                          tls_ca=ca).start()
    try:
        _replace(tokens, f"{TOKEN_BOB} bob\n")
        _eventually(lambda: _authenticated(server, ca, TOKEN_BOB), "bob's new token")
        assert not _authenticated(server, ca, TOKEN_ALICE)
        # A deleted file is a failed reload, reported once; the tokens in use stay.
        tokens.unlink()
        _eventually(lambda: _events(server, "tokens_reload_failed"), "the failure's log line")
        assert _authenticated(server, ca, TOKEN_BOB)
        _replace(tokens, f"{TOKEN_CAROL} carol\n")
        _eventually(lambda: _authenticated(server, ca, TOKEN_CAROL), "carol's token")
    finally:
        server.stop()
    assert len(_events(server, "tokens_reload_failed")) == 1, server.log()


def test_tenants_from_certificates(pki, tmp_path):
    ca = str(pki / "ca.pem")

    def connect(cert, token=None):
        return tensord.connect(server.address, tls_ca=ca, tls_cert=str(pki / f"{cert}.pem"),
                               tls_key=str(pki / f"{cert}.key"), token=token, timeout=10)

    server = SecureServer(tmp_path / "tensord.log",
                          [f"--tls-cert={pki / 'server.pem'}", f"--tls-key={pki / 'server.key'}",
                           f"--tls-client-ca={ca}", "--tenant-from-cert=san-uri",
                           f"--auth-tokens={pki / 'tokens.txt'}"],
                          tls_ca=ca, tls_cert=str(pki / "client.pem"),
                          tls_key=str(pki / "client.key")).start()
    try:
        assert "mutual TLS, tenants from certificate san-uri, 2 bearer token(s)" in server.log()
        with connect("alice-uri", TOKEN_ALICE) as alice, alice.session() as sess:
            assert sess.tensor(np.array([1, 2], np.int32)).numpy().tolist() == [1, 2]
            with connect("bob-uri", TOKEN_BOB) as bob:
                with pytest.raises(tensord.SessionNotFound):
                    bob._call("GetSessionInfo",
                              service_pb2.GetSessionInfoRequest(session_id=sess.id))
        with connect("alice-uri", TOKEN_BOB) as mixed:
            with pytest.raises(tensord.PermissionDenied) as err:
                mixed.session()
        assert err.value.code == grpc.StatusCode.PERMISSION_DENIED
        metadata = {k: v for k, v in err.value.metadata.items() if k != "request_id"}
        assert metadata == {"token_tenant": "bob", "cert_tenant": "alice", "cert_field": "san-uri"}
        assert TOKEN_BOB not in str(err.value)
        with connect("client", TOKEN_ALICE) as no_tenant:
            with pytest.raises(tensord.Unauthenticated) as err:
                no_tenant.devices()
        assert err.value.metadata["cause"] == "certificate_no_tenant"
    finally:
        server.stop()


def test_tenant_from_cert_needs_mutual_tls(pki):
    common = [str(server_binary()), "--address=127.0.0.1:0", f"--tls-cert={pki / 'server.pem'}",
              f"--tls-key={pki / 'server.key'}"]
    run = subprocess.run([*common, "--tenant-from-cert=cn"], capture_output=True, text=True,
                         timeout=60)
    assert run.returncode == 1
    assert "--tls-client-ca" in run.stderr
    # The environment twin, and a value the flag does not know.
    run = subprocess.run(common, capture_output=True, text=True, timeout=60,
                         env={**os.environ, "TENSORD_TENANT_FROM_CERT": "subject"})
    assert run.returncode != 0
    assert "san-uri" in run.stderr


def test_sighup_without_a_token_file_keeps_serving(mtls_server, pki):
    mtls_server.proc.send_signal(signal.SIGHUP)
    _eventually(lambda: _events(mtls_server, "tokens_reload_skipped"), "the skipped reload's line")
    with tensord.connect(mtls_server.address, tls_ca=str(pki / "ca.pem"),
                         tls_cert=str(pki / "client.pem"), tls_key=str(pki / "client.key")) as c:
        assert c.health() == "SERVING"
