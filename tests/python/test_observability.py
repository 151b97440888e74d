"""tensord as an operator sees it: a real Prometheus (Debian's) scrapes the server after a known
workload and its HTTP API must return the values that workload produced; promtool lints the
exposition; the server's log holds one JSON line per RPC with the request id a client's error
carries."""
import json
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import grpc
import numpy as np
import pytest

import tensord
from tensord._pb import service_pb2

from conftest import ServerProcess, server_binary


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _http_get(url: str, timeout: float = 10.0) -> str:
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read().decode()


@pytest.fixture(scope="module")
def observed(tmp_path_factory):
    """A server with /metrics on a free port, logging JSON at info level."""
    tmp = tmp_path_factory.mktemp("observed")
    metrics_port = _free_port()
    proc = ServerProcess(server_binary(), tmp / "tensord.log",
                         [f"--metrics-address=127.0.0.1:{metrics_port}", "--log-format=json",
                          "--log-level=info"])
    proc.start()
    yield proc, metrics_port
    proc.stop()


def _refused_release(client, session_id: str, handle: int) -> tensord.TensordError:
    """Releases a handle the session never had through the raw stub; returns the error."""
    try:
        client.stub.Release(service_pb2.ReleaseRequest(session_id=session_id, handles=[handle]))
    except grpc.RpcError as e:
        return tensord.errors.from_rpc_error(e)
    raise AssertionError("releasing an unknown handle succeeded")


def _workload(client):
    """5 adds, one refused release and an autodiff tensor used after its context closed: the
    figures Prometheus must find."""
    s = client.session()
    x = s.tensor(np.arange(4, dtype=np.float32))
    keep = [x + x for _ in range(5)]
    assert _refused_release(client, s.id, 987654).reason == "TENSOR_NOT_FOUND"
    ctx = s.autodiff()
    w = s.tensor(np.ones(2), requires_grad=True, ctx=ctx)
    ctx.close()
    with pytest.raises(tensord.TensordError) as closed:
        w * 2.0
    assert closed.value.reason == "AUTODIFF_CONTEXT_NOT_ENABLED", closed.value
    return s, keep + [w]


def _query(prom: str, expr: str):
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    body = json.loads(_http_get(url))
    assert body["status"] == "success", body
    return body["data"]["result"]


def test_prometheus_scrapes_the_workload(observed, tmp_path):
    if shutil.which("prometheus") is None:
        pytest.fail("prometheus not installed: scripts/install-deps.sh test installs it")
    proc, metrics_port = observed
    client = tensord.connect(proc.address)
    session, _keep = _workload(client)

    prom_port = _free_port()
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global:\n  scrape_interval: 1s\n  scrape_timeout: 1s\n"
        "scrape_configs:\n  - job_name: tensord\n    static_configs:\n"
        f"      - targets: ['127.0.0.1:{metrics_port}']\n")
    prom_log = open(tmp_path / "prometheus.log", "wb")
    prom_proc = subprocess.Popen(
        ["prometheus", f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
         f"--web.listen-address=127.0.0.1:{prom_port}"],
        stdout=prom_log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    prom = f"http://127.0.0.1:{prom_port}"
    try:
        want = {
            'tensord_op_calls_total{op="add",device="cpu"}': 5,
            'tensord_rpcs_total{method="Execute",code="OK"}': 5,
            'tensord_rpc_errors_total{method="Release",reason="TENSOR_NOT_FOUND"}': 1,
            'tensord_rpc_errors_total{reason="AUTODIFF_CONTEXT_NOT_ENABLED"}': 1,
            'tensord_sessions{tenant="anonymous"}': 1,
            # x and five sums of 4 f32 each, w of 2 f64.
            'tensord_tensor_bytes{device="cpu",tenant="anonymous"}': 112,
            'tensord_autodiff_contexts_open': 0,
            'up{job="tensord"}': 1,
        }
        got = {}
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            assert prom_proc.poll() is None, (tmp_path / "prometheus.log").read_text()
            try:
                for expr in want:
                    result = _query(prom, f"sum({expr})")
                    got[expr] = float(result[0]["value"][1]) if result else None
            except OSError:
                pass  # Prometheus is not listening yet
            if got == want:
                break
            time.sleep(0.5)
        assert got == want, f"Prometheus saw {got}"
        # A latency histogram Prometheus can take quantiles of.
        p99 = _query(prom, 'histogram_quantile(0.99, sum by (le) '
                           '(tensord_rpc_duration_seconds_bucket{method="Execute"}))')
        assert p99 and 0 < float(p99[0]["value"][1]) < 60
    finally:
        prom_proc.terminate()
        try:
            prom_proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            prom_proc.kill()
            prom_proc.wait()
        prom_log.close()
    session.close()
    client.close()


def test_promtool_accepts_the_exposition(observed):
    if shutil.which("promtool") is None:
        pytest.fail("promtool not installed: scripts/install-deps.sh test installs prometheus")
    proc, metrics_port = observed
    text = _http_get(f"http://127.0.0.1:{metrics_port}/metrics")
    assert "tensord_build_info{" in text
    lint = subprocess.run(["promtool", "check", "metrics"], input=text.encode(),
                          capture_output=True, timeout=60)
    assert lint.returncode == 0 and not lint.stdout.strip() and not lint.stderr.strip(), (
        lint.stdout.decode() + lint.stderr.decode())


def test_an_errors_request_id_finds_its_log_line(observed):
    proc, _ = observed
    with tensord.connect(proc.address) as c:
        s = c.session()
        err = _refused_release(c, s.id, 123456789)
        assert len(err.request_id) == 32, err
        # A request id the caller chose is kept, echoed and logged.
        call = c.stub.KeepAlive.with_call(service_pb2.KeepAliveRequest(session_id=s.id),
                                          metadata=[("x-request-id", "job-17.step-3")])
        assert ("x-request-id", "job-17.step-3") in call[1].initial_metadata()
        s.close()
    deadline = time.monotonic() + 10
    lines = []
    while time.monotonic() < deadline:
        lines = [json.loads(line) for line in proc.log_path.read_text().splitlines()
                 if line.startswith("{")]
        ids = {rec.get("request_id") for rec in lines}
        if err.request_id in ids and "job-17.step-3" in ids:
            break
        time.sleep(0.1)
    failed = [rec for rec in lines if rec.get("request_id") == err.request_id]
    assert len(failed) == 1, lines[-5:]
    rec = failed[0]
    assert rec["event"] == "rpc" and rec["level"] == "warning"
    assert rec["reason"] == "TENSOR_NOT_FOUND" and rec["code"] == "NOT_FOUND"
    assert rec["session"] == s.id and rec["tenant"] == "anonymous"
    assert rec["duration_ms"] >= 0 and "error" in rec
    kept = [rec for rec in lines if rec.get("request_id") == "job-17.step-3"]
    assert len(kept) == 1 and kept[0]["method"] == "KeepAlive" and kept[0]["code"] == "OK"
    # Every line is one JSON object with a time stamp, a level and an event.
    assert all({"ts", "level", "event"} <= rec.keys() for rec in lines)
    assert any(rec["event"] == "server_started" for rec in lines)


def test_every_response_carries_the_servers_own_time(client, sess):
    """server-timing: the server's time for the call, in its trailing metadata, which the
    client reads back (last_server_time): within the round trip, for failed calls too, and
    per thread."""
    import threading
    a = sess.tensor(np.ones(4, np.float32))
    t0 = time.perf_counter()
    sess.op("add", a, a)
    round_trip = time.perf_counter() - t0
    server = client.last_server_time
    assert server is not None and 0 < server <= round_trip, (server, round_trip)
    with pytest.raises(tensord.TensordError):
        sess.op("matmul", a, sess.tensor(np.ones((3, 3), np.float32)))
    failed = client.last_server_time
    assert failed is not None and failed > 0
    seen = []
    worker = threading.Thread(target=lambda: seen.append(client.last_server_time))
    worker.start()
    worker.join()
    assert seen == [None], "another thread's last call is its own"
    raw = dict(client.stub.KeepAlive.with_call(
        service_pb2.KeepAliveRequest(session_id=sess.id))[1].trailing_metadata())
    assert raw["server-timing"].startswith("tensord;dur="), raw
