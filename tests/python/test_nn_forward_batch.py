"""A module call sends its forward's ops as one Execute (tensord.batch.forward_batch): the same
values, gradients and errors as one op at a time, in one round trip, with intermediates sent
discarded; whatever needs an output before the call returns sends the calls so far first."""
import contextlib
import threading

import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn
import tensord.nn.functional as F
from conftest import record_calls


@pytest.fixture
def executes(nsess, monkeypatch):
    """The ExecuteRequests the session sends, as (calls' ops, calls' discard flags)."""
    return record_calls(monkeypatch, nsess, lambda method, request: (
        [c.op for c in request.calls], [c.discard for c in request.calls])
        if method == "Execute" else None)


@contextlib.contextmanager
def one_op_at_a_time():
    previous = nn.set_forward_batching(False)
    try:
        yield
    finally:
        nn.set_forward_batching(previous)


def mlp_pair(seed=0):
    torch.manual_seed(seed)
    tmod = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8),
                               torch.nn.Tanh(), torch.nn.Linear(8, 3)).double()
    dmod = nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(),
                         nn.Linear(8, 3)).double()
    dmod.load_state_dict(tmod.state_dict())
    return tmod, dmod


def test_a_forward_is_one_execute_with_the_values_and_gradients_of_one_op_at_a_time(
        nsess, executes):
    tmod, dmod = mlp_pair()
    x = np.random.default_rng(0).standard_normal((5, 6))
    executes.clear()  # what building the model sent
    out = dmod(x)
    assert not out.is_lazy
    assert len(executes) == 1
    ops, discard = executes[0]
    assert ops == ["linear", "relu", "linear", "tanh", "linear"]
    assert discard == [True, True, True, True, False]  # only the output is kept
    loss = (out ** 2.0).mean()
    loss.backward()
    batched = [p.grad.numpy() for p in dmod.parameters()]

    dmod.zero_grad()
    executes.clear()
    with one_op_at_a_time():
        out1 = dmod(x)
    assert len(executes) == 5
    np.testing.assert_array_equal(out1.numpy(), out.numpy())
    (out1 ** 2.0).mean().backward()
    for b, p in zip(batched, dmod.parameters()):
        np.testing.assert_array_equal(b, p.grad.numpy())

    tout = tmod(torch.from_numpy(x))
    (tout ** 2).mean().backward()
    np.testing.assert_allclose(out.numpy(), tout.detach().numpy(), rtol=1e-12, atol=1e-12)
    for b, (name, tp) in zip(batched, tmod.named_parameters()):
        np.testing.assert_allclose(b, tp.grad.numpy(), rtol=1e-10, atol=1e-12, err_msg=name)


class ShapeReader(nn.Module):
    """Reads an intermediate's shape and value mid-forward, as models do."""

    def __init__(self):
        super().__init__()
        self.first = nn.Linear(4, 6)
        self.second = nn.Linear(6, 2)

    def forward(self, x):
        h = F.relu(self.first(x))
        rows = h.shape[0]  # sends the calls so far
        self.peak = float(h.max())  # a value: h is a resolved tensor now
        return self.second(h).reshape(rows, 1, 2)


def test_a_shape_or_value_read_mid_forward_sends_the_calls_so_far(nsess, executes):
    mod = ShapeReader().double()
    x = np.random.default_rng(1).standard_normal((3, 4))
    executes.clear()
    out = mod(x)
    assert out.shape == (3, 1, 2)
    assert [ops for ops, _ in executes][0] == ["linear", "relu"]
    assert ["linear", "reshape"] in [ops for ops, _ in executes]
    with one_op_at_a_time():
        expected = mod(x)
        peak = mod.peak
    np.testing.assert_array_equal(out.numpy(), expected.numpy())
    assert mod.peak == peak


class NoGradInside(nn.Module):
    """Switches no_grad mid-forward and splits a tensor into an unknown number of parts."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        h = self.lin(x)
        with tensord.no_grad():
            scale = h.abs().mean() + 1.0  # a call of another no_grad state: a new batch
        # An output count the client cannot know: sent on its own.
        parts = h.session.op("split", h, split_size=2, dim=1)
        return (parts[0] * parts[1]).sum() / scale


def test_calls_that_cannot_join_the_batch_run_after_it(nsess, executes):
    torch.manual_seed(3)
    mod = NoGradInside().double()
    x = np.random.default_rng(2).standard_normal((5, 4))
    executes.clear()
    loss = mod(x)
    loss.backward()
    grads = [p.grad.numpy() for p in mod.parameters()]
    assert len(executes) >= 3
    mod.zero_grad()
    with one_op_at_a_time():
        loss1 = mod(x)
        loss1.backward()
    assert float(loss) == float(loss1)
    for g, p in zip(grads, mod.parameters()):
        np.testing.assert_array_equal(g, p.grad.numpy())


class Raises(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 3)

    def forward(self, x):
        self.kept = self.lin(x)
        raise ValueError("the model's own error")


def test_a_forward_that_raises_runs_the_calls_it_made(nsess, executes):
    mod = Raises().double()
    x = np.ones((2, 4))
    with pytest.raises(ValueError, match="the model's own error"):
        mod(x)
    assert not mod.kept.is_lazy
    np.testing.assert_allclose(mod.kept.numpy(), x @ mod.lin.weight.numpy().T +
                               mod.lin.bias.numpy())


def test_an_error_is_raised_by_the_module_call_and_the_session_goes_on(nsess, executes):
    mod = nn.Sequential(nn.Linear(4, 3), nn.ReLU(), nn.Linear(5, 2)).double()  # 3 vs 5
    x = np.ones((2, 4))
    with pytest.raises(tensord.TensordError) as batched:
        mod(x)
    with one_op_at_a_time(), pytest.raises(tensord.TensordError) as single:
        mod(x)
    assert batched.value.reason == single.value.reason
    assert batched.value.metadata.get("op") == single.value.metadata.get("op") == "linear"
    assert batched.value.metadata.get("call_index") == "2"  # its place in the forward
    before = len(nsess.info().tensors)
    good = nn.Linear(4, 2).double()
    assert good(x).shape == (2, 2)
    assert len(nsess.info().tensors) <= before + 3  # nothing of the failed forward was kept


class WritesWhileRecording(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        h = self.lin(x).tanh()
        # An in-place write to a leaf, recorded: not marked for autodiff.
        x.session.op("assign", self.lin.bias, h.sum(dim=0))
        return h


def test_the_autodiff_errors_keep_their_type_hint_and_atomicity(nsess):
    mod = WritesWhileRecording().double()
    x = nsess.tensor(np.ones((2, 3)))
    tape = nsess.grad_context().info().tape_nodes
    with pytest.raises(tensord.OperationNotMarkedForAutodiff) as err:
        mod(x)
    assert err.value.metadata["op"] == "assign" and err.value.metadata["call_index"] == "3"
    assert "PyTorch users" in err.value.message
    assert nsess.grad_context().info().tape_nodes == tape  # the calls before it rolled back
    nsess.grad_context().close()
    with pytest.raises(tensord.AutodiffContextNotEnabled) as err:
        mod.lin(x)
    assert err.value.metadata["op"] == "linear"
    assert "PyTorch users" in err.value.message


def test_a_module_call_inside_a_block_joins_it(nsess, executes):
    mod = nn.Sequential(nn.Linear(3, 3), nn.Tanh()).double()
    x = np.ones((2, 3))
    executes.clear()
    with nsess.batch():
        out = mod(x)
        assert out.is_lazy
        y = out * 2.0
    assert len(executes) == 1
    np.testing.assert_allclose(y.numpy(), 2 * np.tanh(x @ mod[0].weight.numpy().T +
                                                      mod[0].bias.numpy()))


def test_one_op_at_a_time_when_asked(nsess, executes):
    mod = nn.Sequential(nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 1)).double()
    executes.clear()
    with one_op_at_a_time():
        mod(np.ones((2, 3)))
    assert [ops for ops, _ in executes] == [["linear"], ["tanh"], ["linear"]]
    assert nn.set_forward_batching(True) is True


def test_threads_of_one_session_batch_their_module_calls_apart(nsess):
    mods = [nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2)).double() for _ in range(2)]
    rng = np.random.default_rng(4)
    xs = [rng.standard_normal((3, 4)) for _ in range(2)]
    with tensord.no_grad():
        expected = [m(x).numpy() for m, x in zip(mods, xs)]
    failures = []

    def run(k):
        try:
            with tensord.no_grad():
                for _ in range(30):
                    out = mods[k](xs[k])
                    np.testing.assert_array_equal(out.numpy(), expected[k])
        except Exception as exc:  # noqa: BLE001 (reported by the test below)
            failures.append(exc)

    threads = [threading.Thread(target=run, args=(k,)) for k in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


class LongForward(nn.Module):
    def __init__(self, steps, literal=None):
        super().__init__()
        self.steps, self.literal = steps, literal

    def forward(self, x):
        h = x
        for _ in range(self.steps):
            h = h + (1.0 if self.literal is None else self.literal)
        return h


def test_a_long_forward_is_sent_in_parts_within_the_server_limits(nsess, executes):
    x = nsess.tensor(np.zeros(4))
    out = LongForward(2500)(x)
    np.testing.assert_array_equal(out.numpy(), np.full(4, 2500.0))
    assert [len(ops) for ops, _ in executes] == [1000, 1000, 500]
    executes.clear()
    literal = np.ones(100_000)  # 800 KB inline in each call
    y = nsess.tensor(np.zeros(100_000))
    out = LongForward(5, literal)(y)
    np.testing.assert_array_equal(out.numpy(), np.full(100_000, 5.0))
    assert [len(ops) for ops, _ in executes] == [2, 2, 1]


def test_a_pending_output_shows_what_it_is(nsess):
    class Printing(nn.Module):
        def forward(self, x):
            h = x * 2.0
            self.shown = repr(h)
            return h + 1.0

    mod = Printing()
    mod(nsess.tensor(np.zeros((2, 3))))
    assert "shape=(2, 3)" in mod.shown and "pending" not in mod.shown


def test_numpy_inputs_batch_in_the_session_of_the_parameters(client, monkeypatch):
    sess = client.session()
    try:
        mod = nn.Sequential(nn.Linear(3, 4, session=sess), nn.ReLU(),
                            nn.Linear(4, 2, session=sess)).double()
        sent = record_calls(monkeypatch, sess)
        assert tensord.defaults.get_session() is not sess
        out = mod(np.ones((2, 3)))
        assert sent == ["Execute"] and out.session is sess
    finally:
        sess.close()


class ReadsItsRunningMean(nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = nn.BatchNorm1d(3)

    def forward(self, x):
        out = self.bn(x)
        self.seen = self.bn.running_mean.numpy()  # written by the pending batch_norm call
        return out


def test_a_read_of_a_tensor_written_in_the_forward_sees_the_write(nsess):
    x = np.random.default_rng(9).standard_normal((4, 3)).astype(np.float32)
    mod = ReadsItsRunningMean()
    mod(x)
    batched = mod.seen
    assert np.all(batched != 0)  # 0.1 of the batch mean, not the zeros it started from
    with one_op_at_a_time():
        other = ReadsItsRunningMean()
        other(x)
    np.testing.assert_array_equal(batched, other.seen)
