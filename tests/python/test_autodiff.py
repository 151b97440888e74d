"""Autodiff through the client: backward, no_grad updates, checkpointing, retain_graph, and
the two failures tensord exists to carry back, with their metadata."""
import grpc
import numpy as np
import pytest
import torch

import tensord


def session_state(sess):
    info = sess.info()
    return ([(t.handle, tuple(t.shape), t.requires_grad) for t in info.tensors],
            info.memory_used_bytes, [(c.context_id, c.state, c.tape_nodes) for c in info.contexts])


def mlp_loss(sess, x, w1, w2):
    return sess.op("mean", sess.op("square", sess.op("relu", x @ w1) @ w2))


@pytest.mark.parametrize("checkpointing", ["none", "balanced"])
def test_backward_matches_torch(sess, checkpointing):
    rng = np.random.default_rng(5)
    xn, w1n, w2n = (rng.standard_normal(s) for s in ((8, 4), (4, 6), (6, 1)))
    with sess.autodiff(checkpointing=checkpointing) as ctx:
        w1 = sess.tensor(w1n, requires_grad=True, ctx=ctx)
        w2 = sess.tensor(w2n, requires_grad=True, ctx=ctx)
        assert w1.requires_grad and w1.is_leaf and w1.context_id == ctx.id
        loss = mlp_loss(sess, sess.tensor(xn), w1, w2)
        grads = ctx.backward(loss)
        assert set(grads) == {w1, w2}
        tw1 = torch.tensor(w1n, requires_grad=True)
        tw2 = torch.tensor(w2n, requires_grad=True)
        tl = torch.relu(torch.tensor(xn) @ tw1).matmul(tw2).square().mean()
        tl.backward()
        assert loss.item() == pytest.approx(tl.item(), rel=1e-12)
        np.testing.assert_allclose(grads[w1].numpy(), tw1.grad.numpy(), rtol=1e-10)
        np.testing.assert_allclose(grads[w2].numpy(), tw2.grad.numpy(), rtol=1e-10)
        assert not grads[w1].requires_grad


def test_training_loop_with_no_grad_updates_keeps_tape_flat(sess):
    rng = np.random.default_rng(6)
    xn = rng.standard_normal((16, 3))
    yn = xn @ np.array([[1.0], [-2.0], [0.5]])
    with sess.autodiff() as ctx:
        w = sess.tensor(np.zeros((3, 1)), requires_grad=True)
        x, y = sess.tensor(xn), sess.tensor(yn)
        tapes = []
        for _ in range(60):
            loss = sess.op("mse_loss", x @ w, y)
            grads = ctx.backward(loss)
            with sess.no_grad():
                sess.op("assign", w, w - 0.2 * grads[w])
            tapes.append(ctx.info().tape_nodes)
        assert loss.item() < 1e-4
        assert tapes[-1] == tapes[5], f"tape grows across iterations: {tapes}"
        np.testing.assert_allclose(w.numpy().ravel(), [1.0, -2.0, 0.5], atol=1e-2)


def test_seed_retain_graph_and_graph_freed(sess):
    with sess.autodiff() as ctx:
        x = sess.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
        y = x * x
        with pytest.raises(tensord.BackwardRootNotScalar):
            ctx.backward(y)
        g = ctx.backward(y, seed=np.array([1.0, 0.5, 0.0]), retain_graph=True)
        np.testing.assert_allclose(g[x].numpy(), [2.0, 2.0, 0.0])
        g = ctx.backward(y, seed=np.ones(3))
        np.testing.assert_allclose(g[x].numpy(), [2.0, 4.0, 6.0])
        with pytest.raises(tensord.GraphFreed):
            ctx.backward(y, seed=np.ones(3))


def test_zero_grad_ops_give_zero_gradient(sess):
    with sess.autodiff() as ctx:
        x = sess.tensor(np.array([0.3, -1.7]), requires_grad=True)
        g = ctx.backward(sess.op("sum", sess.op("floor", x)))
        np.testing.assert_array_equal(g[x].numpy(), [0.0, 0.0])


def test_requires_grad_creation_op(sess):
    with sess.autodiff() as ctx:
        w = sess.op("randn", shape=[3, 2], seed=3, requires_grad=True)
        assert w.requires_grad and w.is_leaf and w.context_id == ctx.id
        g = ctx.backward(sess.op("sum", w))
        np.testing.assert_array_equal(g[w].numpy(), np.ones((3, 2), np.float32))


def test_detach_stops_gradients(sess):
    with sess.autodiff() as ctx:
        x = sess.tensor(np.array([1.0, 2.0]), requires_grad=True)
        y = sess.op("sum", x * x.detach())
        g = ctx.backward(y)
        np.testing.assert_allclose(g[x].numpy(), [1.0, 2.0])


def test_assign_into_autodiff_tensor_outside_no_grad_fails(sess):
    with sess.autodiff() as ctx:
        w = sess.tensor(np.ones((2, 2), np.float32), requires_grad=True)
        loss = sess.op("sum", w * 2.0)
        state = session_state(sess)
        with pytest.raises(tensord.OperationNotMarkedForAutodiff) as err:
            sess.op("assign", w, np.zeros((2, 2), np.float32))
        e = err.value
        assert e.code == grpc.StatusCode.FAILED_PRECONDITION
        assert e.reason == "OPERATION_NOT_MARKED_FOR_AUTODIFF"
        assert e.metadata["op"] == "assign"
        assert e.metadata["call_index"] == "0" and e.metadata["input_index"] == "0"
        assert e.metadata["tensor_id"] == str(w.handle)
        assert e.metadata["context_id"] == str(ctx.id)
        assert "detach" in e.message or "no_grad" in e.message
        # nothing changed: no handle, no tape entry, the value intact
        assert session_state(sess) == state
        np.testing.assert_array_equal(w.numpy(), np.ones((2, 2)))
        # the backward that was recorded before still works, and no_grad allows the update
        g = ctx.backward(loss)
        with sess.no_grad():
            sess.op("assign", w, w - 0.5 * g[w])
        np.testing.assert_array_equal(w.numpy(), np.zeros((2, 2)))


def test_batch_failure_reports_call_index_for_seed_failure(sess):
    with sess.autodiff():
        w = sess.tensor(np.ones(3), requires_grad=True)
        state = session_state(sess)
        with pytest.raises(tensord.OperationNotMarkedForAutodiff) as err:
            with sess.batch():
                y = w * 3.0
                sess.op("assign", w, y)
        assert err.value.metadata["call_index"] == "1"
        assert session_state(sess) == state


def test_op_after_context_closed_fails(sess):
    ctx = sess.autodiff()
    w = sess.tensor(np.ones(3, np.float32), requires_grad=True, ctx=ctx)
    ctx.close()
    state = session_state(sess)
    with pytest.raises(tensord.AutodiffContextNotEnabled) as err:
        w * 2.0
    e = err.value
    assert e.code == grpc.StatusCode.FAILED_PRECONDITION
    assert e.reason == "AUTODIFF_CONTEXT_NOT_ENABLED"
    assert e.metadata["tensor_id"] == str(w.handle)
    assert e.metadata["context_id"] == str(ctx.id)
    assert e.metadata["context_state"] == "closed"
    assert session_state(sess) == state
    # still readable, and detach makes it usable
    np.testing.assert_array_equal(w.numpy(), np.ones(3))
    with pytest.raises(tensord.AutodiffContextNotEnabled):
        ctx.backward(w)


def test_requires_grad_in_inference_session_fails(client):
    with client.session(autodiff=False) as s:
        assert not s.autodiff_enabled
        state = session_state(s)
        with pytest.raises(tensord.AutodiffContextNotEnabled) as err:
            s.tensor(np.ones(2, np.float32), requires_grad=True)
        assert err.value.metadata["context_state"] == "disabled"
        assert err.value.code == grpc.StatusCode.FAILED_PRECONDITION
        with pytest.raises(tensord.AutodiffContextNotEnabled):
            s.autodiff()
        assert session_state(s) == state
        # plain compute still works
        np.testing.assert_array_equal((s.tensor(np.ones(2)) * 2.0).numpy(), [2.0, 2.0])


def test_seed_failures_do_not_disturb_other_sessions(client):
    with client.session() as a, client.session() as b:
        t = b.tensor(np.arange(3.0))
        with a.autodiff():
            w = a.tensor(np.ones(3), requires_grad=True)
            with pytest.raises(tensord.OperationNotMarkedForAutodiff):
                a.op("assign", w, np.zeros(3))
        np.testing.assert_array_equal((t + 1.0).numpy(), [1.0, 2.0, 3.0])
