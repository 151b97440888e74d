"""Fusion in Execute batches: inside `with sess.batch():`, a product whose output no Tensor
names any more, with the bias, activation or residual add after it, runs as one fused call
(one tape node) when the block is sent. Each case is checked against the same block on a
server started with --fusion=off (values and gradients) and against PyTorch."""

import numpy as np
import pytest
import torch

from fusion_compare import f32

F = torch.nn.functional
RTOL, ATOL = 2e-5, 2e-5  # oneDNN's post-op activations against the loop kernels, in f32


def mlp_block(sess, x, w1, b1, w2, b2, y):
    h = sess.op("relu", x @ w1 + b1)
    return sess.op("cross_entropy", h @ w2 + b2, y)


def conv_block(sess, x, w, b, r, y):
    h = sess.op("relu", sess.op("conv2d", x, w, b, padding=1) + r)
    return sess.op("cross_entropy", sess.op("flatten", h, start_dim=1), y)


def mlp_inputs(rng, dtype):
    return ([f32(rng, 16, 8).astype(dtype)],
            [f32(rng, 8, 6).astype(dtype), f32(rng, 6).astype(dtype),
             f32(rng, 6, 3).astype(dtype), f32(rng, 3).astype(dtype)],
            rng.integers(0, 3, 16))


def conv_inputs(rng, dtype):
    return ([f32(rng, 2, 3, 5, 5).astype(dtype)],
            [f32(rng, 4, 3, 3, 3).astype(dtype), f32(rng, 4).astype(dtype),
             f32(rng, 2, 4, 5, 5).astype(dtype)],
            rng.integers(0, 100, 2))


def train_block(client, block, data, params, labels):
    """The block, recorded, in a batch of one session: (loss, tape nodes after the batch,
    gradients of the parameters)."""
    with client.session() as sess, sess.autodiff() as ctx:
        xs = [sess.tensor(a) for a in data]
        ps = [sess.tensor(p, requires_grad=True) for p in params]
        with sess.batch():
            loss = block(sess, *xs, *ps, sess.tensor(labels))
        nodes = ctx.info().tape_nodes
        grads = ctx.backward(loss)
        return loss.numpy(), nodes, [grads[p].numpy() for p in ps]


def torch_block(block_name, data, params, labels):
    xs = [torch.tensor(a) for a in data]
    ps = [torch.tensor(p, requires_grad=True) for p in params]
    y = torch.tensor(labels)
    if block_name == "mlp":
        x, (w1, b1, w2, b2) = xs[0], ps
        loss = F.cross_entropy(torch.relu(x @ w1 + b1) @ w2 + b2, y)
    else:
        x, (w, b, r) = xs[0], ps
        h = torch.relu(F.conv2d(x, w, b, padding=1) + r)
        loss = F.cross_entropy(h.flatten(1), y)
    loss.backward()
    return loss.detach().numpy(), [p.grad.numpy() for p in ps]


CASES = {
    # name: (block, inputs, tape nodes fused, tape nodes as written)
    "mlp": (mlp_block, mlp_inputs, 4, 7),  # cross_entropy records two nodes
    "conv": (conv_block, conv_inputs, 4, 6),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_an_eager_block_fuses_and_agrees_with_the_unfused_server(client, unfused, name):
    block, make, fused_nodes, written_nodes = CASES[name]
    data, params, labels = make(np.random.default_rng(3), np.float32)
    loss, nodes, grads = train_block(client, block, data, params, labels)
    loss_u, nodes_u, grads_u = train_block(unfused, block, data, params, labels)
    assert (nodes, nodes_u) == (fused_nodes, written_nodes)
    np.testing.assert_allclose(loss, loss_u, rtol=RTOL, atol=ATOL)
    for g, gu in zip(grads, grads_u):
        np.testing.assert_allclose(g, gu, rtol=RTOL, atol=ATOL)
    loss_t, grads_t = torch_block(name, data, params, labels)
    np.testing.assert_allclose(loss, loss_t, rtol=RTOL, atol=ATOL)
    for g, gt in zip(grads, grads_t):
        np.testing.assert_allclose(g, gt, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(CASES))
def test_f64_blocks_run_as_written_and_match_torch(client, name):
    """No fused kernel takes f64 on the CPU: the calls run as written, bit for bit torch's
    arithmetic up to its rounding."""
    block, make, _, written_nodes = CASES[name]
    data, params, labels = make(np.random.default_rng(4), np.float64)
    loss, nodes, grads = train_block(client, block, data, params, labels)
    assert nodes == written_nodes
    loss_t, grads_t = torch_block(name, data, params, labels)
    np.testing.assert_allclose(loss, loss_t, rtol=1e-12)
    for g, gt in zip(grads, grads_t):
        np.testing.assert_allclose(g, gt, rtol=1e-10, atol=1e-12)


def test_a_product_the_block_keeps_is_not_fused(client):
    """An output a Tensor still names after the block is stored, so its call stays."""
    rng = np.random.default_rng(5)
    with client.session() as sess, sess.autodiff() as ctx:
        x = sess.tensor(f32(rng, 4, 3))
        w = sess.tensor(f32(rng, 3, 2), requires_grad=True)
        with sess.batch():
            product = x @ w
            y = sess.op("relu", product)
        assert ctx.info().tape_nodes == 2
        np.testing.assert_allclose(y.numpy(), np.maximum(product.numpy(), 0))
