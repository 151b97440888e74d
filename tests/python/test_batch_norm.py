"""batch_norm's in-place update of running_mean / running_var through the Python client,
against torch.nn.functional.batch_norm on the same buffers: a few training steps (also while
recording, with either checkpointing mode), evaluation leaving them alone, weight and bias
without running statistics, and a failing batch restoring them."""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tensord


def _data(rng, shape, dtype):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_training_steps_update_running_stats_like_torch(sess, dtype):
    rng = np.random.default_rng(1)
    c = 3
    rm0, rv0 = _data(rng, (c,), dtype), np.abs(_data(rng, (c,), dtype)) + 0.5
    rm, rv = sess.tensor(rm0), sess.tensor(rv0)
    t_rm, t_rv = torch.from_numpy(rm0.copy()), torch.from_numpy(rv0.copy())
    w, b = _data(rng, (c,), dtype), _data(rng, (c,), dtype)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for step, shape in enumerate([(4, c), (2, c, 5), (3, c, 2, 3)]):
        x = _data(rng, shape, dtype)
        momentum = 0.1 * (step + 1)
        y = sess.op("batch_norm", sess.tensor(x), rm, rv, sess.tensor(w), sess.tensor(b),
                    training=True, momentum=momentum)
        want = TF.batch_norm(torch.from_numpy(x), t_rm, t_rv, torch.from_numpy(w),
                             torch.from_numpy(b), training=True, momentum=momentum)
        np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=tol * 10, atol=tol * 10)
        np.testing.assert_allclose(rm.numpy(), t_rm.numpy(), rtol=tol, atol=tol)
        np.testing.assert_allclose(rv.numpy(), t_rv.numpy(), rtol=tol, atol=tol)
    # Evaluation normalizes with the running statistics and leaves them alone.
    x = _data(rng, (2, c, 4), dtype)
    before = rm.numpy().copy(), rv.numpy().copy()
    y = sess.op("batch_norm", sess.tensor(x), rm, rv, training=False)
    want = TF.batch_norm(torch.from_numpy(x), t_rm, t_rv, training=False)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=tol * 10, atol=tol * 10)
    np.testing.assert_array_equal(rm.numpy(), before[0])
    np.testing.assert_array_equal(rv.numpy(), before[1])


@pytest.mark.parametrize("checkpointing", ["none", "balanced"])
def test_recorded_training_updates_once_and_differentiates(sess, checkpointing):
    rng = np.random.default_rng(2)
    x0, w0, b0 = _data(rng, (4, 2, 3), np.float64), _data(rng, (2,), np.float64), \
        _data(rng, (2,), np.float64)
    rm, rv = sess.tensor(np.zeros(2)), sess.tensor(np.ones(2))
    t_rm, t_rv = torch.zeros(2, dtype=torch.float64), torch.ones(2, dtype=torch.float64)
    with sess.autodiff(checkpointing=checkpointing) as ctx:
        x = sess.tensor(x0, requires_grad=True, ctx=ctx)
        w = sess.tensor(w0, requires_grad=True, ctx=ctx)
        b = sess.tensor(b0, requires_grad=True, ctx=ctx)
        y = sess.op("batch_norm", x, rm, rv, w, b, training=True)
        loss = sess.op("sum", y * y)
        grads = ctx.backward(loss)
        # Gradients live as long as their context.
        got = {name: grads[leaf].numpy() for name, leaf in (("x", x), ("w", w), ("b", b))}
    tx, tw, tb = (torch.from_numpy(a).requires_grad_(True) for a in (x0, w0, b0))
    ty = TF.batch_norm(tx, t_rm, t_rv, tw, tb, training=True)
    (ty * ty).sum().backward()
    for name, t in (("x", tx), ("w", tw), ("b", tb)):
        np.testing.assert_allclose(got[name], t.grad.numpy(), rtol=1e-9, atol=1e-10)
    # Backward (and BALANCED's recomputation) did not update the statistics again.
    np.testing.assert_allclose(rm.numpy(), t_rm.numpy(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(rv.numpy(), t_rv.numpy(), rtol=1e-12, atol=1e-14)


def test_weight_without_running_stats(sess):
    rng = np.random.default_rng(3)
    x, w, b = _data(rng, (5, 2), np.float64), _data(rng, (2,), np.float64), \
        _data(rng, (2,), np.float64)
    none = np.zeros((0,), np.float64)
    y = sess.op("batch_norm", x, none, none, w, b, training=True)
    want = TF.batch_norm(torch.from_numpy(x), None, None, torch.from_numpy(w),
                         torch.from_numpy(b), training=True)
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-12, atol=1e-12)


def test_failed_batch_restores_running_stats(sess):
    rm0, rv0 = np.array([0.5, -0.5], np.float32), np.array([1.0, 2.0], np.float32)
    rm, rv = sess.tensor(rm0), sess.tensor(rv0)
    x = sess.tensor(np.arange(12, dtype=np.float32).reshape(3, 2, 2))
    with pytest.raises(tensord.ShapeMismatch):
        with sess.batch():
            sess.op("batch_norm", x, rm, rv, training=True)
            sess.op("matmul", x, np.ones((4, 4), np.float32))  # fails: the batch rolls back
    np.testing.assert_array_equal(rm.numpy(), rm0)
    np.testing.assert_array_equal(rv.numpy(), rv0)


def test_errors(sess):
    x = sess.tensor(np.ones((2, 3, 4), np.float32))
    with pytest.raises(tensord.BadOperand):
        sess.op("batch_norm", x, training=False)  # evaluation needs running statistics
    with pytest.raises(tensord.ShapeMismatch):
        sess.op("batch_norm", sess.tensor(np.ones((1, 3), np.float32)), training=True)
    with pytest.raises(tensord.ShapeMismatch):
        sess.op("batch_norm", x, np.zeros(2, np.float32), np.ones(2, np.float32), training=True)
