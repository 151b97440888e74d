"""A Python number operand keeps its precision: on f64 tensors an op with a number operand
computes in f64, forward and gradient, on every path (PyTorch, f64, as the oracle). A number
narrowed to f32 anywhere shows as a relative error near 1e-8; f64 leaves about 1e-16. On the
CPU and on the accelerator device."""
import os

import numpy as np
import pytest
import torch

GPU_DEVICE = os.environ.get("TENSORD_TEST_GPU_DEVICE", "opencl:0")


@pytest.fixture(params=["cpu", "gpu"])
def sess(request, client):
    """A session on the CPU, and one on the accelerator device where the server has one."""
    device = "cpu" if request.param == "cpu" else GPU_DEVICE
    if device not in [d["name"] for d in client.devices()]:
        if os.environ.get("TENSORD_REQUIRE_GPU"):
            pytest.fail(f"the server has no device {device}")
        pytest.skip(f"the server has no device {device}")
    with client.session(device=device) as s:
        yield s

# Numbers that f32 cannot hold exactly.
NUMBERS = [0.4, 1.0 / 3.0, -2.7]

# (op, torch function of (tensor, number) or (number, tensor), where the number goes, and
# whether the op is differentiable in the tensor).
BINARY = [
    ("add", torch.add), ("sub", torch.sub), ("mul", torch.mul), ("div", torch.div),
    ("pow", torch.pow), ("atan2", torch.atan2), ("hypot", torch.hypot),
    ("fmod", torch.fmod), ("remainder", torch.remainder), ("maximum", torch.maximum),
    ("minimum", torch.minimum),
]
# Ops that PyTorch takes with the number first (as the reflected Python operators do).
NUMBER_FIRST = ["add", "sub", "mul", "div", "pow"]
RTOL = 1e-13


def as_torch_number(fn, op, number_first, number):
    # torch's functions take a Python number as the second operand only; the first one it
    # takes as a 0-d f64 tensor, whose dtype a f64 tensor keeps.
    n = torch.tensor(number, dtype=torch.float64)
    if number_first:
        return lambda t: fn(n, t)
    if op in ("atan2", "hypot", "maximum", "minimum"):
        return lambda t: fn(t, n)
    return lambda t: fn(t, number)


def check(sess, ctx, op, operands, index, torch_fn, xn):
    """op(operands) with the tensor at `index` against torch_fn(x), value and gradient."""
    x = sess.tensor(xn, requires_grad=True)
    args = list(operands)
    args[index] = x
    y = sess.op(op, *args)
    tx = torch.tensor(xn, requires_grad=True)
    ty = torch_fn(tx)
    np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL, atol=0,
                               err_msg=f"{op} forward")
    seed = np.linspace(0.5, 1.5, xn.size).reshape(xn.shape)
    grads = ctx.backward(y, seed=seed)
    ty.backward(torch.tensor(seed))
    np.testing.assert_allclose(grads[x].numpy(), tx.grad.numpy(), rtol=RTOL, atol=1e-300,
                               err_msg=f"{op} gradient")


@pytest.mark.parametrize("number", NUMBERS)
@pytest.mark.parametrize("op,fn", BINARY, ids=[b[0] for b in BINARY])
def test_binary_op_with_a_number_keeps_f64(sess, op, fn, number):
    xn = np.array([0.3, 1.7, 2.9, 5.1])  # positive: pow's base, away from fmod's jumps
    with sess.autodiff() as ctx:
        check(sess, ctx, op, [None, number], 0, as_torch_number(fn, op, False, number), xn)
        if op in NUMBER_FIRST:
            base = abs(number)  # pow(number, x) needs a positive base
            check(sess, ctx, op, [base, None], 1, as_torch_number(fn, op, True, base), xn)


@pytest.mark.parametrize("number", NUMBERS)
def test_lerp_weight_number_keeps_f64(sess, number):
    an, bn = np.array([0.3, -1.1, 2.5]), np.array([1.9, 0.7, -3.3])
    with sess.autodiff() as ctx:
        a = sess.tensor(an, requires_grad=True)
        b = sess.tensor(bn, requires_grad=True)
        y = sess.op("lerp", a, b, number)
        ta = torch.tensor(an, requires_grad=True)
        tb = torch.tensor(bn, requires_grad=True)
        ty = torch.lerp(ta, tb, number)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL)
        grads = ctx.backward(sess.op("sum", y))
        ty.sum().backward()
        np.testing.assert_allclose(grads[a].numpy(), ta.grad.numpy(), rtol=RTOL)
        np.testing.assert_allclose(grads[b].numpy(), tb.grad.numpy(), rtol=RTOL)


@pytest.mark.parametrize("number", NUMBERS)
def test_where_with_a_number_keeps_f64(sess, number):
    xn = np.array([0.3, -1.1, 2.5, 4.25])
    cond = np.array([True, False, True, False])
    with sess.autodiff() as ctx:
        x = sess.tensor(xn, requires_grad=True)
        y = sess.op("where", cond, x, number)
        tx = torch.tensor(xn, requires_grad=True)
        ty = torch.where(torch.tensor(cond), tx, torch.tensor(number, dtype=torch.float64))
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL)
        grads = ctx.backward(sess.op("sum", sess.op("mul", y, number)))
        (ty * number).sum().backward()
        np.testing.assert_allclose(grads[x].numpy(), tx.grad.numpy(), rtol=RTOL)


@pytest.mark.parametrize("number", NUMBERS)
def test_add_with_alpha_and_comparisons_keep_f64(sess, number):
    xn = np.array([0.3, -1.1, 2.5, number])
    with sess.autodiff() as ctx:
        x = sess.tensor(xn, requires_grad=True)
        y = sess.op("add", x, x, alpha=number)
        tx = torch.tensor(xn, requires_grad=True)
        ty = torch.add(tx, tx, alpha=number)
        np.testing.assert_allclose(y.numpy(), ty.detach().numpy(), rtol=RTOL)
        grads = ctx.backward(sess.op("sum", y))
        ty.sum().backward()
        np.testing.assert_allclose(grads[x].numpy(), tx.grad.numpy(), rtol=RTOL)
    # A number compared with an f64 tensor is compared in f64: only the element equal to it
    # in f64 is equal (in f32 the neighbours of an f32-rounded number would differ).
    x = sess.tensor(np.array([number, np.nextafter(number, 10.0), np.float32(number)]))
    np.testing.assert_array_equal(sess.op("eq", x, number).numpy(), [True, False, False])
