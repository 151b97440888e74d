"""The conformance suite in bf16 and f16: every op that takes f32 also takes the two 2-byte
float dtypes (ListOps lists them), stored in 2 bytes and computed in f32. Each f32 case of the
table runs again with its float inputs (and Python float scalars) rounded to the 2-byte dtype,
sent as that dtype, and is compared with PyTorch computing in float64 on the same rounded
values, its float results rounded once to the 2-byte dtype: what tensord promises (compute in
f32, round once), with a reference that does not depend on the CPU. PyTorch's own bf16/f16
kernels are no reference: which one runs depends on the CPU's features (AVX-512 BF16 or not),
and they accumulate differently from machine to machine.

Tolerances, from the dtype's epsilon (eps = 2^-7 for bf16, 2^-10 for f16; an op's looser f32
tolerance, which grows with its reduction length, wins where it has one):
  forward   rtol 1.25 eps, atol eps / 8: tensord's f32 result and the exact one, each rounded
            once, can straddle one rounding boundary: one ulp, at most eps relative.
  gradients rtol 6 eps, atol 2 eps (bf16), 20 eps and 2 eps (f16): gradients of 2-byte leaves
            flow through 2-byte intermediates (each backward op rounds, as in PyTorch's own
            bf16 autograd), a few roundings deep, while the reference rounds only at the end.
A case's "dtype" attribute naming f32 (creation ops, to_dtype, sum's dtype) names the 2-byte
dtype instead, so those ops create and convert to it.
Outputs must have the 2-byte dtype where PyTorch's float32 result is float (bf16 tensors
download as float32, f16 as numpy float16); integer and bool results must match exactly.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

import tensord
from tensord import dtypes
from opcheck import (Case, Spec, arr, as_tuple, compare, describe, exact_grads,
                     exact_reference, matched_grads, narrow, run_or_expect_error, to_torch,
                     upload_inputs)

LOW = ("bf16", "f16")
EPS = {"bf16": 2.0 ** -7, "f16": 2.0 ** -10}
FORWARD_TOL = {dt: (1.25 * e, e / 8) for dt, e in EPS.items()}
GRAD_TOL = {"bf16": (6 * EPS["bf16"], 2 * EPS["bf16"]), "f16": (20 * EPS["f16"], 2 * EPS["f16"])}
TORCH_LOW = {"bf16": torch.bfloat16, "f16": torch.float16}


def round_to(x, dt: str):
    """Values of a float32 array (or Python float) rounded to `dt`, kept in float32 (a Python
    float stays a float)."""
    if isinstance(x, float):
        return float(round_to(np.array(x, np.float32), dt))
    return torch.from_numpy(np.array(x, np.float32, copy=True)).to(TORCH_LOW[dt]).float().numpy()


def expected(exact, typed, dt: str):
    """An exact (float64) result rounded once: to `dt` where PyTorch's typed result `typed` is
    float32 (the computation the server runs in `dt`), returned as the server's client returns
    it (bf16: float32 values; f16: numpy float16); to `typed`'s dtype otherwise."""
    if isinstance(typed, torch.Tensor) and typed.dtype == torch.float32:
        low = exact.detach().to(TORCH_LOW[dt])
        return low.float() if dt == "bf16" else low
    return narrow(exact, typed)


def widest(a: tuple, b: tuple) -> tuple:
    return (max(a[0], b[0]), max(a[1], b[1]))


def low_inputs(case: Case, dt: str) -> list:
    """The case's inputs with float32 arrays and Python floats rounded to `dt`."""
    out = []
    for x in case.inputs:
        if isinstance(x, np.ndarray) and x.dtype == np.float32:
            out.append(round_to(x, dt))
        elif isinstance(x, float):
            out.append(round_to(x, dt))
        else:
            out.append(x)
    return out


def run_low_case(sess, name: str, spec: Spec, case: Case, dt: str, rng) -> None:
    """One f32 table case run in `dt` (see the module doc)."""
    if case.attrs.get("dtype") == "f32":
        case = dataclasses.replace(case, attrs={**case.attrs, "dtype": dt})
    low_idx = [i for i, x in enumerate(case.inputs)
               if isinstance(x, np.ndarray) and x.dtype == np.float32]
    if not low_idx and case.attrs.get("dtype") != dt:
        return  # no f32 tensor and no f32 dtype in this case: nothing becomes 2-byte
    what = f"{name}[{dt}] {describe(case)}"
    inputs = low_inputs(case, dt)
    float_idx = [i for i, x in enumerate(inputs)
                 if isinstance(x, np.ndarray) and x.dtype.kind == "f"]
    grad_idx = list(case.grad_inputs) if case.grad_inputs is not None else float_idx
    grad_idx = [i for i in grad_idx if i in float_idx]
    ctx = sess.autodiff() if grad_idx else None
    try:
        server_in, leaves = upload_inputs(sess, inputs, grad_idx, ctx,
                                          dtype_of=lambda i: dt if i in low_idx else None)
        for i in low_idx:
            assert dtypes.name(server_in[i].dtype) == dt, \
                f"{what}: input {i} uploaded as {server_in[i].dtype}"
        outs = run_or_expect_error(sess, name, server_in, case, what)
        if outs is None:
            return
        got = [o.numpy() for o in outs]
        t_in = [to_torch(x, requires_grad=i in grad_idx) for i, x in enumerate(inputs)]
        t_outs = as_tuple(case.ref(*t_in))  # dtypes and requires-grad flags only
        x_in, x_outs = exact_reference(case.ref, inputs, grad_idx)
        assert len(outs) == len(t_outs), f"{what}: {len(outs)} outputs, torch has {len(t_outs)}"
        fwd_tol = widest(FORWARD_TOL[dt], case.tol or spec.tol32)
        for k, (o, g, w, x) in enumerate(zip(outs, got, t_outs, x_outs)):
            if isinstance(w, torch.Tensor) and w.dtype == torch.float32:
                assert dtypes.name(o.dtype) == dt, f"{what}: output {k} is {o.dtype}, expected {dt}"
            compare(g, expected(x, w, dt), fwd_tol, f"{what} output {k}")
        if not leaves or spec.grad == "n" or not case.grads:
            return
        roots = [(o, w, x) for o, w, x in zip(outs, t_outs, x_outs)
                 if w.dtype.is_floating_point and w.requires_grad]
        if not roots:
            return
        seeds = [round_to(arr(rng, w.shape, "f32"), dt) if w.dtype == torch.float32
                 else arr(rng, w.shape, "f64") for _, w, _ in roots]
        server_seeds = [sess.tensor(s, dtype=dt if dtypes.name(o.dtype) == dt else None)
                        for s, (o, _, _) in zip(seeds, roots)]
        try:
            grads = ctx.backward([o for o, _, _ in roots], seed=server_seeds)
        except tensord.TensordError as exc:
            if exc.reason == "UNSUPPORTED_ON_BACKEND":
                raise  # a device without a kernel a backward rule needs
            raise AssertionError(f"{what}: backward failed: {exc}") from None
        t_grads = exact_grads([x for _, _, x in roots], [x_in[i] for i in leaves], seeds)
        grad_tol = widest(GRAD_TOL[dt], case.tol or spec.tol32)
        for i, got_grad, tg in matched_grads(leaves, grads, t_grads, what):
            if i in low_idx:
                assert dtypes.name(got_grad.dtype) == dt, \
                    f"{what}: gradient of input {i} is {got_grad.dtype}, expected {dt}"
            compare(got_grad.numpy(), expected(tg, t_in[i], dt), grad_tol,
                    f"{what} grad of input {i}")
    finally:
        if ctx is not None:
            ctx.close()


# ---- ops whose table entry has its own runner ------------------------------------------------
def _run_assign(sess, name, spec, dt, rng):
    """assign writes in place into a 2-byte target, rounding a float32 value; a 2-byte value
    widens exactly into a float32 target."""
    target = sess.tensor(arr(rng, (2, 3), "f32"), dtype=dt)
    value = arr(rng, (3,), "f32")
    sess.op("assign", target, value)
    assert dtypes.name(target.dtype) == dt
    np.testing.assert_array_equal(np.asarray(target.numpy(), np.float32),
                                  np.broadcast_to(round_to(value, dt), (2, 3)))
    wide = sess.tensor(arr(rng, (3,), "f32"))
    low_value = sess.tensor(value, dtype=dt)
    sess.op("assign", wide, low_value)
    np.testing.assert_array_equal(wide.numpy(), round_to(value, dt))


def _run_random(kind):
    def run(sess, name, spec, dt, rng):
        attrs = {"shape": [100, 100], "dtype": dt, "seed": 5}
        if kind == "randint":
            attrs.update(low=-3, high=5)
        t = sess.op(name, **attrs)
        assert dtypes.name(t.dtype) == dt and t.shape == (100, 100)
        g = np.asarray(t.numpy(), np.float64)
        # The 2-byte values are the f32 draw of the same seed, rounded.
        f32 = sess.op(name, **{**attrs, "dtype": "f32"}).numpy()
        np.testing.assert_array_equal(g, round_to(f32, dt))
        if kind == "rand":
            assert g.min() >= 0 and g.max() <= 1  # rounding may reach 1.0
        elif kind == "randn":
            assert abs(g.mean()) < 0.05 and abs(g.std() - 1) < 0.05
        else:
            assert set(np.unique(g)) == set(range(-3, 5))
    return run


def _run_dropout(sess, name, spec, dt, rng):
    x = round_to(arr(rng, (200, 50), "f32", "pos"), dt)
    with sess.autodiff() as ctx:
        leaf = sess.tensor(x, requires_grad=True, dtype=dt)
        y = sess.op(name, leaf, p=0.3, seed=77)
        assert dtypes.name(y.dtype) == dt
        got = np.asarray(y.numpy(), np.float32)
        kept = got != 0
        assert abs((1 - kept.mean()) - 0.3) < 0.03
        np.testing.assert_array_equal(got[kept], round_to(x[kept] / np.float32(0.7), dt))
        grads = ctx.backward(y, seed=sess.tensor(np.ones(x.shape, np.float32), dtype=dt))
        np.testing.assert_array_equal(np.asarray(grads[leaf].numpy(), np.float32),
                                      round_to(kept / np.float32(0.7), dt))


RUNNERS = {"assign": _run_assign, "rand": _run_random("rand"), "randn": _run_random("randn"),
           "randint": _run_random("randint"), "dropout": _run_dropout}


def run_low(sess, name: str, spec: Spec, dt: str, rng) -> None:
    """Every f32 case of `spec` in `dt`."""
    if spec.run is not None:
        runner = RUNNERS.get(name)
        assert runner is not None, f"{name}: a table entry with its own runner needs a " \
                                   "bf16/f16 runner in opcheck_low.RUNNERS"
        runner(sess, name, spec, dt, rng)
        return
    for case in spec.gen(rng, "f32"):
        assert case.check is None, f"{name}: value checks are written for f32 outputs; give " \
                                   "the op a runner in opcheck_low.RUNNERS"
        run_low_case(sess, name, spec, case, dt, rng)
