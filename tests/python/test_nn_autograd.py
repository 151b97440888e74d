"""PyTorch-style autograd over the server's contexts: loss.backward() fills (and accumulates)
.grad, zero_grad, seeds and retain_graph, tensord.no_grad / enable_grad, detach and
requires_grad_, and the two autodiff errors surfacing typed, unchanged in code and metadata,
with a sentence for PyTorch users."""
import threading

import grpc
import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn


def session_state(sess):
    info = sess.info()
    return ([(t.handle, tuple(t.shape)) for t in info.tensors], info.memory_used_bytes,
            [(c.context_id, c.state, c.tape_nodes) for c in info.contexts])


def _pair(seed=0):
    torch.manual_seed(seed)
    tmod = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(), torch.nn.Linear(4, 2))
    dmod = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    tmod.double()
    dmod.load_state_dict(tmod.state_dict())
    return tmod, dmod


def _grads_equal(tmod, dmod, tol=1e-12):
    for (name, tp), dp in zip(tmod.named_parameters(), dmod.parameters()):
        np.testing.assert_allclose(dp.grad.numpy(), tp.grad.numpy(), rtol=tol, atol=tol,
                                   err_msg=name)


def test_backward_fills_and_accumulates_grad_like_torch(nsess):
    tmod, dmod = _pair()
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal((5, 3)) for _ in range(2)]
    assert all(p.grad is None for p in dmod.parameters())
    for x in xs:  # two backwards without zero_grad: the gradients add up
        (tmod(torch.from_numpy(x)) ** 2).mean().backward()
        loss = (dmod(x) ** 2.0).mean()
        assert loss.requires_grad and not loss.is_leaf
        assert loss.backward() is None
        _grads_equal(tmod, dmod)
    tmod.zero_grad(set_to_none=False)
    dmod.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in dmod.parameters())
    (tmod(torch.from_numpy(xs[0])).sum()).backward()
    dmod(xs[0]).sum().backward()
    _grads_equal(tmod, dmod)
    dmod.zero_grad()
    assert all(p.grad is None for p in dmod.parameters())
    # The tape does not grow over the steps: each backward frees what it used.
    assert nsess.grad_context().info().tape_nodes == 0


def test_seed_retain_graph_and_input_leaves(nsess):
    tmod, dmod = _pair(1)
    x = np.random.default_rng(1).standard_normal((4, 3))
    g = np.random.default_rng(2).standard_normal((4, 2))
    tx = torch.from_numpy(x).requires_grad_()
    xd = nsess.tensor(x, requires_grad=True)
    tout, dout = tmod(tx), dmod(xd)
    tout.backward(torch.from_numpy(g), retain_graph=True)
    dout.backward(g, retain_graph=True)
    tout.backward(torch.from_numpy(g))
    dout.backward(nsess.tensor(g))
    _grads_equal(tmod, dmod)
    np.testing.assert_allclose(xd.grad.numpy(), tx.grad.numpy(), rtol=1e-12, atol=1e-12)
    with pytest.raises(tensord.GraphFreed):
        dout.backward(g)
    # backward of several roots at once (torch.autograd.backward)
    dmod.zero_grad()
    a, b = dmod(x).sum(), (dmod(x) ** 2.0).sum()
    tensord.autograd.backward([a, b])
    tmod.zero_grad()
    torch.autograd.backward([tmod(torch.from_numpy(x)).sum(), (tmod(torch.from_numpy(x)) ** 2)
                             .sum()])
    _grads_equal(tmod, dmod)


def test_no_grad_enable_grad_and_their_scope(nsess):
    model = nn.Linear(3, 2)
    ctx = nsess.grad_context()
    tape = ctx.info().tape_nodes
    assert tensord.is_grad_enabled()
    with tensord.no_grad():
        assert not tensord.is_grad_enabled()
        y = model(np.ones((2, 3), np.float32))
        assert not y.requires_grad
        with tensord.enable_grad():
            assert model(np.ones((1, 3), np.float32)).requires_grad
        assert not tensord.is_grad_enabled()
        seen = []
        worker = threading.Thread(target=lambda: seen.append(tensord.is_grad_enabled()))
        worker.start()
        worker.join()
        assert seen == [True]  # the grad mode is per thread, as PyTorch's
    assert tensord.is_grad_enabled()

    @tensord.no_grad()
    def evaluate(x):
        return model(x)

    assert not evaluate(np.ones((2, 3), np.float32)).requires_grad
    previous = tensord.set_grad_enabled(False)
    assert not tensord.is_grad_enabled()
    tensord.set_grad_enabled(True)
    with tensord.set_grad_enabled(False):
        assert not model(np.ones((1, 3), np.float32)).requires_grad
    assert tensord.is_grad_enabled() and previous is not None
    # Only the enable_grad forward recorded (2 nodes: linear's matmul and add, or one).
    assert ctx.info().tape_nodes - tape <= 2
    with pytest.raises(tensord.BackwardRootNotTracked) as err:
        y.sum().backward()
    assert "does not require grad" in err.value.message
    assert isinstance(err.value, tensord.TensordClientError)


def test_detach_and_requires_grad_(nsess):
    w = nn.Parameter(np.array([1.0, 2.0, 3.0]))
    assert w.requires_grad and w.is_leaf
    (w * w.detach()).sum().backward()
    np.testing.assert_array_equal(w.grad.numpy(), [1.0, 2.0, 3.0])
    assert not w.detach().requires_grad
    # A plain tensor becomes a leaf in place, keeping its value.
    x = nsess.tensor(np.array([0.5, -1.0]))
    assert x.requires_grad_() is x and x.requires_grad and x.is_leaf
    (x * 3.0).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0])
    with pytest.raises(RuntimeError, match="floating point"):
        nsess.tensor(np.array([1, 2])).requires_grad_()
    # Freezing: the frozen parameter gets no gradient and the optimizer leaves it alone.
    model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 1))
    model[0].weight.requires_grad = False
    frozen = model[0].weight.numpy()
    opt = tensord.optim.SGD(model.parameters(), lr=0.5)
    model(np.ones((3, 2), np.float32)).sum().backward()
    assert model[0].weight.grad is None and model[0].bias.grad is not None
    opt.step()
    np.testing.assert_array_equal(model[0].weight.numpy(), frozen)
    assert not model[0].weight.requires_grad
    with pytest.raises(RuntimeError, match="leaf"):
        model(np.ones((1, 2), np.float32)).requires_grad_(False)


def test_op_not_marked_for_autodiff_tells_a_pytorch_user_what_to_do(nsess):
    class InPlace(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight = nn.Parameter(np.ones(3))

        def forward(self, x):
            nsess.op("assign", self.weight, x)  # an in-place update while recording
            return self.weight * 2.0

    model = InPlace()
    before = session_state(nsess)
    with pytest.raises(tensord.OperationNotMarkedForAutodiff) as err:
        model(np.zeros(3))
    e = err.value
    assert e.code == grpc.StatusCode.FAILED_PRECONDITION
    assert e.reason == "OPERATION_NOT_MARKED_FOR_AUTODIFF"
    assert e.metadata["op"] == "assign" and e.metadata["tensor_id"] == str(model.weight.handle)
    assert e.metadata["context_id"] == str(nsess.grad_context().id)
    assert "PyTorch users" in e.message and "tensord.no_grad()" in e.message
    assert e.message.count("PyTorch users") == 1 and str(e).count("PyTorch users") == 1
    assert session_state(nsess) == before
    np.testing.assert_array_equal(model.weight.numpy(), np.ones(3))
    with tensord.no_grad():  # what the sentence says
        model(np.zeros(3))
    np.testing.assert_array_equal(model.weight.numpy(), np.zeros(3))


def test_closed_context_tells_a_pytorch_user_what_to_do(nsess):
    with nsess.autodiff() as ctx:
        model = nn.Linear(3, 2, dtype="f64")
        assert model.weight.context_id == ctx.id
        loss = model(np.ones((2, 3))).sum()
    opt = tensord.optim.SGD(model.parameters(), lr=0.1)
    values = [p.numpy() for p in model.parameters()]  # still readable
    before = session_state(nsess)
    for fail in (lambda: model(np.ones((2, 3))), loss.backward,
                 lambda: opt.step({p: np.ones(p.shape) for p in model.parameters()})):
        with pytest.raises(tensord.AutodiffContextNotEnabled) as err:
            fail()
        e = err.value
        assert e.code == grpc.StatusCode.FAILED_PRECONDITION
        assert e.metadata["context_state"] == "closed"
        assert e.metadata["context_id"] == str(ctx.id)
        assert "PyTorch users" in e.message and "requires_grad_()" in e.message
        assert session_state(nsess) == before
    # What the sentence says: the parameters join the session's open context again.
    params = list(model.parameters())
    assert model.requires_grad_() is model
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    live = nsess.grad_context()
    assert live.id != ctx.id and all(p.context_id == live.id for p in params)
    for p, v in zip(params, values):
        np.testing.assert_array_equal(p.numpy(), v)
    model(np.ones((2, 3))).sum().backward()
    np.testing.assert_allclose(model.weight.grad.numpy(), np.full((2, 3), 2.0))
    opt.step()
    np.testing.assert_allclose(model.weight.numpy(), values[0] - 0.2)


def test_inference_only_session(client):
    with client.session(autodiff=False) as s, tensord.default_session(s):
        model = nn.Sequential(nn.Linear(3, 2), nn.ReLU())
        assert not any(p.requires_grad for p in model.parameters())
        out = model(np.ones((4, 3), np.float32))
        assert out.shape == (4, 2)
        with pytest.raises(tensord.BackwardRootNotTracked):
            out.sum().backward()
        with pytest.raises(tensord.AutodiffContextNotEnabled) as err:
            s.tensor(np.ones(2)).requires_grad_()
        assert err.value.metadata["context_state"] == "disabled"
        assert "autodiff=False" in err.value.message


def test_forward_in_a_batch_and_backward_after(nsess):
    tmod, dmod = _pair(3)
    x = np.random.default_rng(4).standard_normal((6, 3))
    y = np.random.default_rng(5).integers(0, 2, 6)
    with nsess.batch():  # one round trip for the whole forward
        loss = nn.CrossEntropyLoss()(dmod(x), y)
        with pytest.raises(tensord.BatchPendingError):
            loss.backward()
    loss.backward()
    torch.nn.functional.cross_entropy(tmod(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    _grads_equal(tmod, dmod)


def test_backward_inside_a_compiled_function_is_refused_with_the_way_out(nsess):
    model = nn.Linear(2, 1)
    opt = tensord.optim.SGD(model.parameters(), lr=0.1)
    ctx = nsess.grad_context()

    def bad_step(x):
        loss = model(x).sum()
        loss.backward()
        return loss

    with pytest.raises(tensord.InvalidRequest, match="grad_context"):
        nsess.compile(bad_step, np.ones((3, 2), np.float32))

    def step(x):  # what the message says
        loss = model(x).sum()
        opt.step(ctx.backward(loss))
        return loss

    run = nsess.compile(step, np.ones((3, 2), np.float32))
    before = model.bias.numpy()
    run(np.ones((3, 2), np.float32))
    np.testing.assert_allclose(model.bias.numpy(), before - 0.3, rtol=1e-6)
    run.release()
