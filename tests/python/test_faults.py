"""Faults on purpose, from the Python client.

- The server process is killed (SIGKILL) in the middle of a streamed put, a long batch and a
  backward over a long graph: the call fails with UNAVAILABLE within a bound (it never hangs;
  no call here has a deadline that could hide a hang). The server restarted on the same port
  serves new sessions through the same client, and the old session is SESSION_NOT_FOUND.
- A batch past its deadline fails with DEADLINE_EXCEEDED and the server rolls it back (the
  session is exactly as before), also while other clients keep the server busy.

Work is sized from a measured call, so the calls last seconds on a fast machine and longer on
a slow or loaded one; no bound below depends on the machine's speed.
"""
import math
import threading
import time

import grpc
import numpy as np
import pytest

import tensord
from tensord._pb import service_pb2, tensor_pb2

from conftest import ServerProcess, server_binary

# A killed server's clients see their connection reset at once (≈ milliseconds here); the
# bound is generous for a loaded CI machine and still far below "hangs".
KILL_BOUND_S = 10.0


@pytest.fixture
def victim(tmp_path):
    proc = ServerProcess(server_binary(), tmp_path / "tensord.log")
    proc.start()
    yield proc
    proc.stop()


def _per_call_s(sess, op, *operands):
    """Seconds one call of `op` takes here (best of three, after a warm-up)."""
    sess.op(op, *operands).release()
    best = math.inf
    for _ in range(3):
        start = time.monotonic()
        sess.op(op, *operands).release()
        best = min(best, time.monotonic() - start)
    return best


def _kill_mid_call(server, call, under_way):
    """Runs call() in a thread, SIGKILLs the server once under_way() returns, and returns the
    TensordError the call raised and how long after the kill it came back."""
    outcome = {}

    def run():
        try:
            call()
        except tensord.TensordError as exc:
            outcome["error"] = exc
        outcome["at"] = time.monotonic()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    under_way()
    assert thread.is_alive(), "the call ended before the server was killed: size it up"
    killed = time.monotonic()
    server.proc.kill()
    server.proc.wait()
    thread.join(KILL_BOUND_S)
    assert not thread.is_alive(), f"the call still hangs {KILL_BOUND_S} s after the kill"
    assert "error" in outcome, "the call succeeded although the server was killed"
    return outcome["error"], outcome["at"] - killed


def _until_served(fn, seconds=30.0):
    """fn() once the client's channel has reconnected (calls made while the channel backs off
    from its failed reconnects are UNAVAILABLE)."""
    end = time.monotonic() + seconds
    while True:
        try:
            return fn()
        except tensord.TensordError as exc:
            if exc.code != grpc.StatusCode.UNAVAILABLE or time.monotonic() > end:
                raise
            time.sleep(0.1)


def _put_paced(client, sess, in_flight):
    """A 256 MiB put whose chunks are paced so that the stream lasts seconds: the kill lands
    in the middle of it on any machine (the client library would send them as fast as it can,
    which on loopback may finish first)."""
    header = service_pb2.PutHeader(session_id=sess.id, dtype=tensor_pb2.DTYPE_F32,
                                   shape=[64 << 20])
    chunk = bytes(1 << 20)

    def requests():
        yield service_pb2.PutTensorRequest(header=header)
        for k in range(256):
            yield service_pb2.PutTensorRequest(chunk=chunk)
            if k == 2:
                in_flight.set()
            time.sleep(0.02)

    client._call("PutTensor", requests())


@pytest.mark.parametrize("what", ["put", "batch", "backward"])
def test_kill_mid_call_gives_unavailable_and_a_restart_serves_new_sessions(victim, what):
    client = tensord.connect(victim.address)  # no deadline: a hang would show as one
    sess = client.session()
    probe = client.session()
    if what == "put":
        in_flight = threading.Event()

        def call():
            _put_paced(client, sess, in_flight)

        def under_way():
            assert in_flight.wait(KILL_BOUND_S)
            # The server charges the announced size when it reads the header.
            end = time.monotonic() + KILL_BOUND_S
            while sess.info().memory_used_bytes < (256 << 20):
                assert time.monotonic() < end, "the put never reached the server"
                time.sleep(0.01)
    elif what == "batch":
        a = sess.op("zeros", shape=[256, 32768])
        b = sess.op("zeros", shape=[32768, 256])
        calls = min(5000, max(20, math.ceil(8.0 / _per_call_s(sess, "matmul", a, b))))

        def call():
            with sess.batch():  # about 8 s of independent matmuls (small outputs)
                for _ in range(calls):
                    sess.op("matmul", a, b)

        def under_way():
            time.sleep(0.5)
    else:
        ctx = sess.autodiff()
        w = sess.op("zeros", shape=[2048, 2048], requires_grad=True, ctx=ctx)
        nodes = min(24, max(4, math.ceil(1.0 / _per_call_s(sess, "matmul", w, w))))
        start = time.monotonic()
        with sess.batch():  # a recorded chain y = y @ w of about a second
            y = w
            for _ in range(nodes):
                y = sess.op("matmul", y, w)
            loss = sess.op("sum", y)
        forward = time.monotonic() - start

        def call():
            ctx.backward(loss)  # two matmuls per node: about twice the forward

        def under_way():
            time.sleep(max(0.2, forward / 2))

    error, after_kill = _kill_mid_call(victim, call, under_way)
    assert error.code == grpc.StatusCode.UNAVAILABLE, error
    assert after_kill < KILL_BOUND_S
    print(f"{what}: UNAVAILABLE {after_kill * 1e3:.0f} ms after the kill")
    # Another session of the same client, idle at the time, learns it on its next call.
    with pytest.raises(tensord.TensordError) as idle:
        probe.info()
    assert idle.value.code == grpc.StatusCode.UNAVAILABLE

    victim.start(port=int(victim.address.rsplit(":", 1)[1]))
    fresh = _until_served(client.session)
    x = fresh.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    np.testing.assert_array_equal((x * 2.0).numpy(), np.arange(6).reshape(2, 3) * 2.0)
    # The restarted server knows nothing of the sessions before it.
    for old in (sess, probe):
        with pytest.raises(tensord.SessionNotFound) as lost:
            old.info()
        assert lost.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(tensord.SessionNotFound):
        sess.tensor(np.zeros(3, np.float32))
    fresh.close()
    client.close()


def test_deadline_rolls_the_batch_back_while_others_load_the_server(address):
    client = tensord.connect(address)
    sess = client.session()
    a = sess.op("zeros", shape=[256, 32768])
    b = sess.op("zeros", shape=[32768, 256])
    per_call = _per_call_s(sess, "matmul", a, b)
    calls = min(5000, max(20, math.ceil(8.0 / per_call)))  # ≥ 8 s unloaded
    before = sess.info()

    stop = threading.Event()
    loops = [0, 0, 0]
    errors = []

    def load(k):
        try:
            with tensord.connect(address) as c, c.session() as s:
                rng = np.random.default_rng(k)
                x = rng.standard_normal((256, 256)).astype(np.float32)
                while not stop.is_set():
                    t = s.tensor(x)
                    with s.batch():
                        y = s.op("sum", s.op("relu", t @ t))
                    np.testing.assert_allclose(y.numpy(), np.maximum(x @ x, 0).sum(), rtol=1e-3)
                    s.release(t, y)
                    loops[k] += 1
        except Exception as exc:  # reported by the test, not lost in the thread
            errors.append(exc)

    threads = [threading.Thread(target=load, args=(k,), daemon=True) for k in range(3)]
    for t in threads:
        t.start()
    try:
        end = time.monotonic() + 60
        while min(loops) == 0 and not errors and time.monotonic() < end:
            time.sleep(0.01)
        assert min(loops) > 0 and not errors, errors
        client.timeout = 0.05  # every call of this client from here: 50 ms
        start = time.monotonic()
        with pytest.raises(tensord.TensordError) as late:
            with sess.batch():
                for _ in range(calls):
                    sess.op("matmul", a, b)
        client.timeout = None
        assert late.value.code == grpc.StatusCode.DEADLINE_EXCEEDED, late.value
        # GetSessionInfo waits for the session's lock: it answers once the batch has stopped
        # and rolled back, far sooner than the ≥ 8 s the whole batch would take.
        after = sess.info()
        stopped = time.monotonic() - start
    finally:
        client.timeout = None
        stop.set()
        for t in threads:
            t.join(60)
    assert after == before, "no handle, memory or tape entry of the batch is left"
    print(f"deadline: rolled back and answered {stopped * 1e3:.0f} ms after the batch began "
          f"({calls} calls of {per_call * 1e3:.1f} ms unloaded; load loops {loops})")
    assert stopped < 5.0, f"the batch ran on for {stopped:.1f} s after its deadline"
    assert not errors, errors
    # The session works on.
    np.testing.assert_array_equal(sess.op("sum", a).numpy(), 0)
    sess.close()
    client.close()
