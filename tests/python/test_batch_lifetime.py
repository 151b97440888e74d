"""What keeps a tensor alive (issue 37): a batch or a program holds every tensor it names by
handle until it is sent (a program: until it is released), so a release queued by the garbage
collector never frees a handle an unsent batch names; an explicit release of such a tensor is
refused by the client; a failed or abandoned batch lets its temporaries go."""
import gc

import numpy as np
import pytest

import tensord
from conftest import ServerProcess, server_binary
from tensord import session as session_module

ROUNDS = 1000


def collect(i):
    """A collection inside a loop, as the runtime makes them: the young generations, where this
    round's garbage is, and a full one every 50th round (in a whole test run a full collection
    costs tens of milliseconds)."""
    gc.collect(2 if i % 50 == 0 else 1)


def tanh_loop(sess, rounds, collect_inside=False):
    """The issue's repro: the uploaded tensor's only reference dies inside the block. Returns
    the failures (round, reason), after checking every value that came back."""
    failures = []
    want = np.tanh(np.full(3, 2.0))
    for i in range(rounds):
        try:
            with sess.batch():
                t = sess.op("tanh", sess.tensor(np.ones(3)) * 2.0)
                if collect_inside:
                    collect(i)
            np.testing.assert_allclose(t.numpy(), want, rtol=1e-12, err_msg=f"round {i}")
        except tensord.TensordError as e:
            failures.append((i, e.reason))
    return failures


def memory_used(sess):
    gc.collect()
    return sess.info().memory_used_bytes  # info() sends the queued releases first


def test_issue_repro_runs_1000_times(sess):
    failures = tanh_loop(sess, ROUNDS)
    assert not failures, f"{len(failures)} of {ROUNDS} batches failed: {failures[:5]}"


@pytest.mark.parametrize("count", [1, 2])
def test_repro_with_eager_release_flushes_and_collections(sess, monkeypatch, count):
    monkeypatch.setattr(session_module, "RELEASE_BATCH_COUNT", count)
    base = memory_used(sess)
    failures = tanh_loop(sess, ROUNDS, collect_inside=True)
    assert not failures, f"{len(failures)} of {ROUNDS} batches failed: {failures[:5]}"
    assert memory_used(sess) == base, "every temporary was released once the batches ran"


def test_uploaded_literals_indexing_and_no_grad_batches(sess, monkeypatch):
    # Every array operand is uploaded first (a temporary of the batch), and every Execute
    # sends the releases queued so far.
    monkeypatch.setattr(session_module, "RELEASE_BATCH_COUNT", 1)
    monkeypatch.setattr(session_module, "LITERAL_LIMIT_BYTES", 0)
    rng = np.random.default_rng(5)
    base = memory_used(sess)
    with sess.autodiff():
        w = sess.tensor(rng.standard_normal((4, 3)), requires_grad=True)
        wn = w.numpy()
        for i in range(60):
            x = rng.standard_normal((5, 4))
            with sess.batch():
                y = sess.op("relu", sess.op("add", sess.tensor(x) @ w, np.zeros(3)))
                head = sess.tensor(x)[1:3, ::2]
                collect(i)
            np.testing.assert_allclose(y.numpy(), np.maximum(x @ wn, 0), rtol=1e-12)
            np.testing.assert_array_equal(head.numpy(), x[1:3, ::2])
            delta = rng.standard_normal((4, 3)) * 0.01
            with sess.no_grad(), sess.batch():
                sess.op("assign", w, sess.tensor(wn) - sess.tensor(delta))
                collect(i)
            wn = wn - delta
            np.testing.assert_array_equal(w.numpy(), wn)
        del w, y, head
    assert memory_used(sess) == base


def test_optimizer_steps_on_temporary_gradients(sess, monkeypatch):
    monkeypatch.setattr(session_module, "RELEASE_BATCH_COUNT", 1)
    rng = np.random.default_rng(6)
    wn = rng.standard_normal(4)
    buf = None
    with sess.autodiff():
        w = sess.tensor(wn, requires_grad=True)
        opt = tensord.optim.SGD([w], lr=0.1, momentum=0.9)
        for i in range(30):
            g = rng.standard_normal(4)
            opt.step({w: sess.tensor(g) * 1.0})  # the gradient's only reference is the dict
            collect(i)
            buf = g if buf is None else 0.9 * buf + g
            wn = wn - 0.1 * buf
            np.testing.assert_allclose(w.numpy(), wn, rtol=1e-12)


def test_explicit_release_of_a_batched_operand_is_refused(sess):
    a = sess.tensor(np.arange(3.0))
    other = sess.tensor(np.ones(2))
    with sess.batch():
        b = sess.op("neg", sess.tensor(np.ones(1)))
        y = sess.op("add", b, a * 2.0)
        for release in (a.release, lambda: sess.release(a), lambda: sess.release(a.handle),
                        lambda: sess.release(other, a)):
            with pytest.raises(tensord.InvalidRequest) as err:
                release()
            e = err.value
            assert isinstance(e, tensord.TensordClientError)
            assert e.metadata == {"tensor_id": str(a.handle), "call_index": "1",
                                  "input_index": "0", "op": "mul", "origin": "client"}
            assert "after the block ends" in e.message
        assert not a._released and not other._released, "a refused release frees nothing"
        # A pending output is not a tensor yet: releasing it is BatchPendingError, both ways.
        with pytest.raises(tensord.BatchPendingError):
            y.release()
        with pytest.raises(tensord.BatchPendingError):
            sess.release(y)
        other.release()  # a tensor the batch does not name goes at once
    np.testing.assert_array_equal(y.numpy(), [-1.0, 1.0, 3.0])
    handle = a.handle
    a.release()  # once the batch was sent
    assert a._released
    handles = {t.handle for t in sess.info().tensors}
    assert handle not in handles and y.handle in handles


def test_programs_hold_what_they_name(sess, monkeypatch):
    monkeypatch.setattr(session_module, "RELEASE_BATCH_COUNT", 1)
    scale = np.array([1.0, -2.0, 0.5])
    base = memory_used(sess)

    def fn(x):
        # A constant uploaded while tracing: its only reference is the program's.
        c = sess.tensor(scale)
        gc.collect()
        keep = sess.tensor(np.ones(3))
        y = sess.op("tanh", x * c) + keep
        with pytest.raises(tensord.InvalidRequest) as err:
            keep.release()
        assert err.value.metadata["op"] == "add"
        assert "sess.compile is tracing" in err.value.message
        return y

    step = sess.compile(fn, np.zeros(3))
    rng = np.random.default_rng(7)
    for i in range(200):
        x = rng.standard_normal(3)
        sess.tensor(x).numpy()  # garbage whose release the next run sends
        collect(i)
        np.testing.assert_allclose(step(x), np.tanh(x * scale) + 1.0, rtol=1e-12)
    step.release()
    assert memory_used(sess) == base, "a released program lets its tensors go"


def test_a_failed_batch_lets_its_temporaries_go(sess, monkeypatch):
    monkeypatch.setattr(session_module, "RELEASE_BATCH_COUNT", 2)
    base = memory_used(sess)
    for i in range(100):
        with pytest.raises(tensord.ShapeMismatch) as err:
            with sess.batch():
                h = sess.op("tanh", sess.tensor(np.ones(3)) * 2.0)
                sess.op("matmul", h, sess.tensor(np.ones((2, 2))))
        assert err.value.metadata["call_index"] == "2"
        assert "origin" not in err.value.metadata  # the server refused the Execute
        with pytest.raises(tensord.BadOperand):
            h.numpy()
        if i % 3 == 0:  # an abandoned block sends nothing and lets its temporaries go too
            with pytest.raises(KeyError):
                with sess.batch():
                    sess.op("neg", sess.tensor(np.ones(2)))
                    raise KeyError("abandon")
        collect(i)
        with sess.batch():
            t = sess.op("tanh", sess.tensor(np.ones(3)) * 2.0)
        np.testing.assert_allclose(t.numpy(), np.tanh(np.full(3, 2.0)), rtol=1e-12)
    del t, h
    assert memory_used(sess) == base


@pytest.fixture(scope="module")
def shm_sess(tmp_path_factory):
    proc = ServerProcess(server_binary(), tmp_path_factory.mktemp("shm") / "tensord.log",
                         ["--shared-memory", "--shared-memory-key-prefix=/tensord-"])
    proc.start()
    with tensord.connect(proc.address) as c:
        s = c.session()
        yield s
        s.close()
    alive = proc.proc is not None and proc.proc.poll() is None
    proc.stop()
    assert alive, f"the server died; log:\n{proc.log_tail()}"


def test_shared_memory_puts_inside_batches(shm_sess, monkeypatch):
    monkeypatch.setattr(session_module, "RELEASE_BATCH_COUNT", 1)
    base = memory_used(shm_sess)
    with shm_sess.shared_memory(1 << 12) as shm:
        for i in range(200):
            x = np.full(4, float(i))
            with shm_sess.batch():
                t = shm_sess.op("tanh", shm.put(x) * 0.01)
                collect(i)
            np.testing.assert_allclose(shm.get(t), np.tanh(x * 0.01), rtol=1e-12)
        del t
    assert memory_used(shm_sess) == base


def test_releases_the_server_did_not_take_are_sent_again(sess, monkeypatch):
    """A Release that fails as UNAVAILABLE (the server unreachable a moment) keeps its handles
    queued: the next flush frees them, where before they stayed held until the session closed."""
    import grpc
    before = memory_used(sess)
    real_call = sess._call
    failed = []
    down = [True]

    def flaky(method, request, *args, **kwargs):
        if method == "Release" and down[0]:
            failed.append(list(request.handles))
            raise tensord.TensordError("unreachable", code=grpc.StatusCode.UNAVAILABLE)
        return real_call(method, request, *args, **kwargs)

    monkeypatch.setattr(sess, "_call", flaky)
    t = sess.tensor(np.ones(1 << 16))
    handle = t.handle
    del t
    gc.collect()
    sess.flush_releases()  # the server is down: nothing is freed, nothing is forgotten
    assert failed == [[handle]]
    down[0] = False
    assert sess.info().memory_used_bytes == before  # the queued handle went on this flush


def record_requests(sess, monkeypatch):
    """The ExecuteRequests the session sends from now on."""
    sent = []
    send = sess._execute

    def recording(request):
        sent.append(request)
        return send(request)
    monkeypatch.setattr(sess, "_execute", recording)
    return sent


def test_outputs_no_tensor_names_are_discarded(sess, monkeypatch):
    """A call whose lazy outputs no Tensor refers to when the block ends is sent with discard:
    it gets no handle, so nothing is left to release; the calls reading it still see it."""
    sent = record_requests(sess, monkeypatch)
    x = sess.tensor(np.ones(3))
    base = len(sess.info().tensors)
    with sess.batch():
        h = x
        for _ in range(5):
            h = h + 1.0
        doubled = h * 2.0
        pair = [x * 3.0, x * 4.0]
        vals, idx = sess.op("max", sess.op("reshape", x, shape=[3, 1]), dim=1)
        del idx
    assert [c.discard for c in sent[-1].calls] == [True] * 4 + [False] * 4 + [True, False]
    np.testing.assert_allclose(h.numpy(), 6.0)
    np.testing.assert_allclose(doubled.numpy(), 12.0)
    np.testing.assert_allclose(pair[0].numpy(), 3.0)
    np.testing.assert_allclose(vals.numpy(), 1.0)
    # h, doubled, the pair and max's values; the reshape was discarded, max's indices released.
    assert len(sess.info().tensors) == base + 5


def test_gradients_flow_through_discarded_intermediates(sess, monkeypatch):
    sent = record_requests(sess, monkeypatch)
    with sess.autodiff() as ctx:
        w = sess.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
        with sess.batch():
            loss = ((w * w) * 2.0 + 1.0).sum()
        assert [c.discard for c in sent[-1].calls] == [True, True, True, False]
        grads = ctx.backward(loss)
        np.testing.assert_allclose(grads[w].numpy(), [4.0, 8.0, 12.0], rtol=1e-12)
        np.testing.assert_allclose(loss.numpy(), 2 * 14.0 + 3, rtol=1e-12)


def test_a_long_block_holds_few_intermediates(sess):
    """Discarded intermediates go after their last reader: a block of 200 adds of 4 MiB runs
    within a session quota that holds a handful of them."""
    small = sess.client.session(memory_quota_bytes=24 << 20)
    try:
        x = small.tensor(np.zeros(1 << 20, np.float32))
        with small.batch():
            h = x
            for _ in range(200):
                h = h + 1.0
        np.testing.assert_allclose(h.numpy()[:3], 200.0)
    finally:
        small.close()
