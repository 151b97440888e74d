"""Session.op(..., fetch=True): the outputs' values come back inline with the Execute, so
reading them needs no GetTensor; the kept values are dropped by any call that may write a
tensor of the session; a batch fetches too; past the server's inline limit the call runs again
without fetch."""
import re
from pathlib import Path

import numpy as np
import pytest

import tensord
from conftest import REPO, client_of_own_server
from tensord.op_calls import WRITING_OPS


class CountingStub:
    """The client's stub, counting the calls of each RPC method."""

    def __init__(self, stub):
        self._stub = stub
        self.counts = {}

    def __getattr__(self, name):
        method = getattr(self._stub, name)

        def counted(*args, **kwargs):
            self.counts[name] = self.counts.get(name, 0) + 1
            return method(*args, **kwargs)
        return counted

    def reset(self):
        self.counts = {}

    def __getitem__(self, name):
        return self.counts.get(name, 0)


@pytest.fixture
def rpcs(sess, monkeypatch):
    sess.client.list_ops_raw()  # the catalog's ListOps, before counting starts
    stub = CountingStub(sess.client.stub)
    monkeypatch.setattr(sess.client, "stub", stub)
    return stub


def sample(rng, dtype, shape=(3, 4)):
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(np.dtype(dtype), np.integer):
        return rng.integers(-100, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_, "bf16"])
def test_fetched_value_equals_download(sess, rpcs, dtype):
    rng = np.random.default_rng(3)
    x = sample(rng, np.float32 if dtype == "bf16" else dtype)
    a = sess.tensor(x, dtype="bf16") if dtype == "bf16" else sess.tensor(x)
    op, args = ("logical_not", ()) if dtype == np.bool_ else ("mul", (3,))
    expected = sess.op(op, a, *args).numpy()
    rpcs.reset()
    t = sess.op(op, a, *args, fetch=True)
    got = t.numpy()
    assert rpcs.counts == {"Execute": 1}  # one round trip, no GetTensor
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    assert t.shape == expected.shape and t.handle > 0  # still an ordinary handle
    # Each read is a new writable array: writing one changes neither the next nor the tensor.
    got[...] = 0
    np.testing.assert_array_equal(t.numpy(), expected)
    assert rpcs["GetTensor"] == 0
    # The handle works as an operand and downloads as before.
    np.testing.assert_array_equal(sess.op("reshape", t, shape=[12]).numpy(),
                                  expected.reshape(12))


def test_fetched_scalar_reads_without_rpc(sess, rpcs):
    a = sess.tensor(np.arange(6, dtype=np.float64))
    rpcs.reset()
    s = sess.op("sum", a, fetch=True)
    assert s.item() == 15.0 and float(s) == 15.0 and int(s) == 15 and bool(s)
    assert s.tolist() == 15.0 and np.asarray(s) == 15.0
    assert rpcs.counts == {"Execute": 1}


def test_fetched_torch_bf16_bits(sess, rpcs):
    torch = pytest.importorskip("torch")
    src = torch.tensor([1.0, -2.5, 3.140625], dtype=torch.bfloat16)
    a = sess.tensor(src)
    expected = sess.op("neg", a).torch()
    rpcs.reset()
    got = sess.op("neg", a, fetch=True).torch()
    assert rpcs.counts == {"Execute": 1}
    assert got.dtype == torch.bfloat16 and torch.equal(got, expected)


def test_multi_output_ops(sess, rpcs):
    x = np.array([[3.0, 1.0, 2.0], [0.5, 4.0, -1.0]], np.float32)
    a = sess.tensor(x)
    rpcs.reset()
    values, indices = sess.op("max", a, dim=1, fetch=True)
    s_values, s_indices = sess.op("sort", a, dim=1, fetch=True)
    np.testing.assert_array_equal(values.numpy(), x.max(axis=1))
    np.testing.assert_array_equal(indices.numpy(), x.argmax(axis=1))
    np.testing.assert_array_equal(s_values.numpy(), np.sort(x, axis=1))
    np.testing.assert_array_equal(s_indices.numpy(), np.argsort(x, axis=1))
    assert indices.dtype == np.int64
    assert rpcs.counts == {"Execute": 2}


def test_sugar_passes_fetch(sess, rpcs):
    a = sess.tensor(np.ones((2, 3), np.float32))
    rpcs.reset()
    assert a.sum(fetch=True).item() == 6.0
    assert sess.relu(a, fetch=True).numpy().tolist() == [[1.0] * 3] * 2
    assert rpcs.counts == {"Execute": 2}


def test_in_place_op_drops_kept_values(sess, rpcs):
    a = sess.tensor(np.ones(4, np.float32))
    t = sess.op("add", a, a, fetch=True)
    other = sess.op("mul", a, 5.0, fetch=True)
    # An op that writes nothing keeps them.
    sess.op("neg", a)
    rpcs.reset()
    assert t.numpy().tolist() == [2.0] * 4 and other.numpy().tolist() == [5.0] * 4
    assert rpcs["GetTensor"] == 0
    # assign writes t: every kept value of the session goes (a write reaches whatever shares
    # the target's storage), and the next reads download the current values.
    sess.op("assign", t, 7.0)
    rpcs.reset()
    assert t.numpy().tolist() == [7.0] * 4
    assert other.numpy().tolist() == [5.0] * 4
    assert rpcs["GetTensor"] == 2
    # Dropped for good: no later state brings an old value back.
    assert t.numpy().tolist() == [7.0] * 4 and rpcs["GetTensor"] == 3


def test_writes_through_batch_and_no_grad_drop_kept_values(sess):
    a = sess.tensor(np.zeros(3, np.float32))
    t = sess.op("add", a, 1.0, fetch=True)
    with sess.no_grad(), sess.batch():
        sess.op("neg", a)
        sess.op("assign", t, np.array([4.0, 5.0, 6.0], np.float32))
    assert t.numpy().tolist() == [4.0, 5.0, 6.0]


def test_optimizer_step_drops_kept_values(sess):
    w = sess.op("add", sess.tensor(np.ones(3, np.float32)), 0.0, fetch=True)
    grad = sess.tensor(np.full(3, 2.0, np.float32))
    buf = sess.tensor(np.zeros(3, np.float32))
    step = sess.tensor(np.zeros((), np.float32))
    before = w.numpy()
    sess.op("sgd", w, grad, buf, step, lr=0.5)
    assert before.tolist() == [1.0] * 3
    assert w.numpy().tolist() == [0.0] * 3


def test_fetch_of_an_in_place_op_is_its_result(sess, rpcs):
    a = sess.tensor(np.zeros(2, np.float32))
    rpcs.reset()
    out = sess.op("assign", a, 3.0, fetch=True)
    assert out.numpy().tolist() == [3.0, 3.0]
    assert rpcs.counts == {"Execute": 1}
    assert a.numpy().tolist() == [3.0, 3.0]


def test_new_handle_drops_kept_value(sess):
    t = sess.op("add", sess.tensor(np.ones(2, np.float32)), 1.0, fetch=True)
    other = sess.op("mul", sess.tensor(np.ones(2, np.float32)), 9.0)
    t._take_handle(other)  # what Parameter / requires_grad_ do to a Python object
    assert t.numpy().tolist() == [9.0, 9.0]


def test_released_and_closed(client):
    s = client.session()
    t = s.op("add", s.tensor(np.ones(2, np.float32)), 1.0, fetch=True)
    u = s.op("add", s.tensor(np.ones(2, np.float32)), 2.0, fetch=True)
    t.release()
    with pytest.raises(tensord.TensorNotFound):
        t.numpy()
    s.close()
    with pytest.raises(tensord.SessionNotFound):
        u.numpy()


def test_fetch_in_a_batch(sess, rpcs):
    a = sess.tensor(np.arange(4, dtype=np.float32))
    rpcs.reset()
    with sess.batch():
        t = sess.op("mul", a, 2.0, fetch=True)
        plain = sess.op("add", t, 1.0)
        values, indices = sess.op("max", sess.op("reshape", t, shape=[2, 2]), dim=1, fetch=True)
        assert t.is_lazy
    assert rpcs.counts == {"Execute": 1}
    assert t.numpy().tolist() == [0.0, 2.0, 4.0, 6.0]
    assert values.numpy().tolist() == [2.0, 6.0] and indices.numpy().tolist() == [1, 1]
    assert rpcs.counts == {"Execute": 1}
    assert plain.numpy().tolist() == [1.0, 3.0, 5.0, 7.0]  # not fetched: downloaded
    assert rpcs["GetTensor"] == 1


def test_fetch_in_a_batch_sees_the_batch_writes(sess):
    # The server reads fetched values once the whole batch ran: an assign later in the same
    # batch is in them, as it is on the server.
    a = sess.tensor(np.zeros(2, np.float32))
    with sess.no_grad(), sess.batch():
        t = sess.op("add", a, 1.0, fetch=True)
        sess.op("assign", t, 8.0)
    assert t.numpy().tolist() == [8.0, 8.0]


def test_fetch_refused_in_a_traced_function(sess):
    def fn(x):
        return sess.op("mul", x, 2.0, fetch=True)

    with pytest.raises(tensord.InvalidRequest, match="fetch=True") as err:
        sess.compile(fn, np.ones(2, np.float32))
    assert err.value.metadata["field"] == "fetch"
    assert sess._batch is None


def test_no_op_has_a_fetch_attribute(catalog):
    # Session.op takes fetch= as its own keyword: an attribute of that name would be hidden.
    assert not [name for name, op in catalog.items()
                if any(a["name"] == "fetch" for a in op["attrs"])]


def test_writing_ops_cover_the_server_in_place_ops(catalog):
    assert WRITING_OPS <= set(catalog)
    # The server marks ops that write their inputs with OpDef::in_place or mutates_inputs;
    # a new one must join tensord.op_calls.WRITING_OPS, or a kept value could go stale.
    ops_dir = REPO / "server" / "ops"
    if not ops_dir.is_dir():
        pytest.skip("no server sources here")
    marks = {}
    for path in sorted(Path(ops_dir).glob("*.cc")):
        n = len(re.findall(r"\.(?:in_place = true|mutates_inputs = \{)", path.read_text()))
        if n:
            marks[path.name] = n
    assert marks == {"shape_device.cc": 1,          # assign
                     "optimizers.cc": 4,            # sgd; adam and adamw (AdamOp)
                     "nn_batch_group_norm.cc": 1}   # batch_norm's running statistics


# -- past the server's inline limit ------------------------------------------------------------
MESSAGE_BYTES = 2 << 20  # the server's minimum: fetches above 7/8 of it are refused


@pytest.fixture(scope="module")
def small_messages(tmp_path_factory):
    with client_of_own_server(tmp_path_factory, "small",
                              [f"--max-message-bytes={MESSAGE_BYTES}"]) as client:
        yield client


@pytest.fixture
def ssess(small_messages, monkeypatch):
    with small_messages.session() as s:
        small_messages.list_ops_raw()
        stub = CountingStub(small_messages.stub)
        monkeypatch.setattr(small_messages, "stub", stub)
        s.rpcs = stub
        yield s


def test_large_fetch_falls_back_to_download(ssess):
    n = MESSAGE_BYTES // 4  # 2 MiB of f32 output: over the inline limit
    a = ssess.tensor(np.ones(n, np.float32))
    ssess.rpcs.reset()
    t = ssess.op("mul", a, 3.0, fetch=True)
    # Refused (LIMIT_EXCEEDED, limit=fetch_bytes) and rolled back, then run without fetch.
    assert ssess.rpcs.counts == {"Execute": 2}
    got = t.numpy()
    assert ssess.rpcs["GetTensor"] == 1
    assert got.shape == (n,) and (got == 3.0).all()
    # The refused run left nothing behind: only a and t live in the session.
    assert sorted(x.handle for x in ssess.info().tensors) == sorted([a.handle, t.handle])
    # A small result still comes inline.
    ssess.rpcs.reset()
    assert ssess.op("sum", a, fetch=True).item() == n
    assert ssess.rpcs.counts == {"Execute": 1}


def test_large_fetch_in_a_batch_falls_back(ssess):
    n = MESSAGE_BYTES // 8
    a = ssess.tensor(np.zeros(n, np.float32))
    ssess.rpcs.reset()
    with ssess.no_grad(), ssess.batch():
        # Each is under the limit; together they pass it.
        t = ssess.op("add", a, 1.0, fetch=True)
        u = ssess.op("add", a, 2.0, fetch=True)
        ssess.op("assign", a, 5.0)  # runs once: the refused run was rolled back
    assert ssess.rpcs.counts == {"Execute": 2}
    assert (t.numpy() == 1.0).all() and (u.numpy() == 2.0).all()
    assert (a.numpy() == 5.0).all()
    assert ssess.rpcs["GetTensor"] == 3
