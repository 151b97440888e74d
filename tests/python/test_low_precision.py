"""bf16 and f16 through the Python client: dtype names and objects, uploads (rounded to nearest
even) and downloads (bf16 as exact float32, f16 as numpy float16), casts, ListOps, gradients,
and ops compared with the exact result (PyTorch in float64 on the same rounded inputs) rounded
once to bfloat16/float16, at bounds derived from the dtype's epsilon and the reduction length.
"""
import numpy as np
import pytest
import torch
import torch.nn.functional as TF

import tensord
from tensord import dtypes

TOL = {"bf16": (2e-2, 2e-2), "f16": (2e-3, 2e-3)}  # gradients, a few 2-byte roundings deep
TORCH = {"bf16": torch.bfloat16, "f16": torch.float16}
EPS = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10}  # one ulp relative, at most
EPS32 = 2.0 ** -24  # one f32 rounding, relative


def test_dtype_objects_and_names():
    assert tensord.bfloat16 == "bf16" and tensord.bfloat16 == "bfloat16"
    assert tensord.bfloat16 == torch.bfloat16 and tensord.bfloat16 != "f16"
    assert str(tensord.bfloat16) == "bf16"
    for spelling in ("bf16", "bfloat16", "torch.bfloat16", torch.bfloat16, tensord.bfloat16):
        assert dtypes.name(spelling) == "bf16"
    for spelling in ("f16", "float16", "half", np.float16, torch.float16):
        assert dtypes.name(spelling) == "f16"
    assert tensord.float16 == np.dtype(np.float16)


def test_bf16_bits_match_torch():
    rng = np.random.default_rng(3)
    x = np.concatenate([rng.standard_normal(50000).astype(np.float32) * 1e3,
                        np.array([0.0, -0.0, np.inf, -np.inf, 3.4e38, 1e-40], np.float32)])
    want = torch.from_numpy(x).to(torch.bfloat16).view(torch.int16).numpy().view(np.uint16)
    np.testing.assert_array_equal(dtypes.float32_to_bf16_bits(x), want)
    np.testing.assert_array_equal(dtypes.bf16_bits_to_float32(want),
                                  torch.from_numpy(want.view(np.int16)).view(torch.bfloat16)
                                  .float().numpy())
    assert np.isnan(dtypes.bf16_bits_to_float32(dtypes.float32_to_bf16_bits([np.nan]))).all()


def test_upload_download_and_casts(sess):
    values = np.array([[1.0, 0.1, -3.0], [1e5, 2.0 ** -10, 65519.0]])
    b = sess.tensor(values, dtype="bf16")
    assert b.dtype == "bf16" and b.dtype == tensord.bfloat16 and b.nbytes == 12
    got = b.numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, torch.tensor(values).to(torch.bfloat16).float().numpy())
    assert "dtype=bf16" in repr(b)
    halves = np.array([[1.0, 0.1, -3.0], [6e4, 2.0 ** -24, 65519.0]]).astype(np.float16)
    h = sess.tensor(halves)
    assert h.dtype == np.float16 and h.numpy().dtype == np.float16
    np.testing.assert_array_equal(h.numpy(), halves)
    with sess.autodiff():
        again = sess.tensor(b, requires_grad=True)  # a copy of a bf16 tensor stays bf16
        assert again.dtype == "bf16" and again.requires_grad
        np.testing.assert_array_equal(again.numpy(), got)
    f = sess.tensor(values.astype(np.float32))
    for spelling in ("bf16", tensord.bfloat16, torch.bfloat16):
        c = sess.op("to_dtype", f, dtype=spelling)
        assert c.dtype == "bf16"
        np.testing.assert_array_equal(c.numpy(), got)
    assert f.to("f16").dtype == np.float16
    assert b.to("f16").to("f32").dtype == np.float32
    # Inline literals of numpy float16 travel as f16.
    s = sess.op("add", h, np.ones(3, np.float16))
    assert s.dtype == np.float16


# Optimizer steps write their inputs in place, which the f32 copies of a 2-byte call cannot.
F32_ONLY_IN_PLACE = {"sgd", "adam", "adamw"}


def test_list_ops_names_both_wherever_f32_is(catalog):
    for name in F32_ONLY_IN_PLACE:
        assert "f32" in catalog[name]["dtypes"] and "bf16" not in catalog[name]["dtypes"], name
    for name, op in catalog.items():
        if name in F32_ONLY_IN_PLACE:
            continue
        assert ("bf16" in op["dtypes"]) == ("f32" in op["dtypes"]), name
        assert ("f16" in op["dtypes"]) == ("f32" in op["dtypes"]), name
    assert "bf16" not in catalog["bitwise_and"]["dtypes"]


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_ops_against_the_exact_result_rounded_once(dt, sess):
    """Each op on 2-byte inputs against PyTorch in float64 on the same rounded values, rounded
    once to the 2-byte dtype (what tensord promises: compute in f32, round once). Not against
    PyTorch's own bf16/f16 kernels: which one runs depends on the CPU (with AVX-512 BF16 oneDNN's,
    elsewhere a fallback that accumulates differently, 0.165 off on a conv2d here), so such a
    test passes or fails by machine.

    Bound, for an op reducing over k terms: |got - ref| <= eps * |ref| + k * eps32 * m, where
    eps is the 2-byte dtype's (one ulp: the server's f32 result and the exact one, each rounded
    once, may straddle a rounding boundary), eps32 = 2^-24 bounds each of the k f32 roundings of
    the server's accumulation, and m is the largest sum of term magnitudes (the op on |inputs|)."""
    rng = np.random.default_rng(7)
    low = TORCH[dt]
    eps = EPS[dt]

    def put(shape):
        x = torch.from_numpy(rng.standard_normal(shape).astype(np.float32)).to(low)
        return x.double(), sess.tensor(x.float().numpy(), dtype=dt)

    def once(t):
        """The exact result rounded once to the 2-byte dtype, back in float64."""
        return t.to(low).double()

    def check(got, fn, *args, k=1, what, **kw):
        """`got` against fn(*args) in float64, rounded once; fn on |args| bounds the terms."""
        assert dtypes.name(got.dtype) == dt, what
        want = once(fn(*args, **kw)).numpy()
        terms = fn(*(a.abs() for a in args), **kw).abs().max().item() if args else 0.0
        g = np.asarray(got.numpy(), np.float64)
        assert g.shape == want.shape, what
        bound = eps * np.abs(want) + k * EPS32 * terms
        worst = np.max(np.abs(g - want) - bound, initial=-np.inf)
        assert worst <= 0, f"{what}: {np.max(np.abs(g - want))} off, over the bound by {worst}"

    a, ta = put((8, 16))
    b, tb = put((16, 5))
    bias, tbias = put((5,))
    check(ta @ tb, torch.matmul, a, b, k=16, what="matmul")
    check(sess.op("linear", ta, sess.op("transpose", tb, dim0=0, dim1=1), tbias),
          TF.linear, a, b.T.contiguous(), bias, k=17, what="linear")
    check(sess.op("relu", ta), torch.relu, a, what="relu")
    check(sess.op("sigmoid", ta), torch.sigmoid, a, what="sigmoid")
    check(sess.op("exp", ta), torch.exp, a, what="exp")
    # Two ops, each rounding its result once: the square is rounded before the add.
    check(ta * ta + ta, lambda x: once(x * x) + x, a, what="mul, add")
    check(sess.op("sum", ta, dim=[1]), torch.sum, a, dim=1, k=16, what="sum")
    check(sess.op("mean", ta), torch.mean, a, k=128, what="mean")
    check(sess.op("amax", ta, dim=[0]), torch.amax, a, dim=0, what="amax")
    check(sess.op("softmax", ta, dim=1), torch.softmax, a, dim=1, k=16, what="softmax")
    x, tx = put((2, 3, 6, 6))
    w, tw = put((4, 3, 3, 3))
    check(sess.op("conv2d", tx, tw, padding=1), TF.conv2d, x, w, padding=1, k=27, what="conv2d")


@pytest.mark.parametrize("dt", ["bf16", "f16"])
def test_gradients_in_the_leaf_dtype(dt, sess):
    rng = np.random.default_rng(11)
    xv = rng.standard_normal((4, 3)).astype(np.float32)
    wv = rng.standard_normal((3, 2)).astype(np.float32)
    with sess.autodiff() as ctx:
        x = sess.tensor(xv, dtype=dt, requires_grad=True)
        w = sess.tensor(wv, requires_grad=True)  # f32 leaf, cast down inside the graph
        y = sess.op("sum", sess.op("relu", x @ w.to(dt)))
        assert dtypes.name(y.dtype) == dt
        grads = ctx.backward(y)
        assert dtypes.name(grads[x].dtype) == dt and grads[w].dtype == np.float32
        gx, gw = grads[x].numpy(), grads[w].numpy()  # gradients live as long as the context
    # The reference in float64 on the same rounded values (not PyTorch's CPU-dependent kernels).
    tx = torch.from_numpy(xv).to(TORCH[dt]).double().requires_grad_()
    tw = torch.from_numpy(wv).double().requires_grad_()
    torch.relu(tx @ tw.to(TORCH[dt]).double()).sum().backward()
    rtol, atol = TOL[dt]
    np.testing.assert_allclose(np.asarray(gx, np.float64), tx.grad.numpy(), rtol=rtol, atol=atol)
    np.testing.assert_allclose(gw, tw.grad.numpy(), rtol=rtol, atol=atol)
