"""Machinery of the op conformance suite: input generation, the Case/Spec table entries, and
running one case against the server and against PyTorch (forward values and gradients).

The reference does not depend on the CPU it runs on: PyTorch picks its kernels by the CPU's
features (vector width, FMA, AVX-512 BF16), so its float32 results differ from machine to
machine in the last bits, and more where it accumulates. Values and gradients are therefore
computed by PyTorch in float64 on the same inputs (float32 arrays widened exactly) and rounded
once to the dtype PyTorch's own typed call gives (float32 for a float32 op); that typed call
only says which dtypes and requires-grad flags the results must have.

Tolerances (stated here, overridable per op in the table):
  f64: rtol 1e-7, atol 1e-10 (forward and gradients)
  f32: rtol 1e-5, atol 1e-6 by default (about 80 ulp: an elementwise op is a few ulp from the
       rounded exact value); ops that accumulate (matmul, conv, reductions, norms, losses)
       state looser f32 tolerances in their table entry, growing with the reduction length.
Integer and bool results must match exactly; NaNs must be NaN in both.

f64 gradients are also checked numerically against the server's own forward (central
differences along a random direction, numeric_gradcheck), so one table row checks an op's
forward against PyTorch, its gradients against PyTorch's autograd and by finite differences.
"""
from __future__ import annotations

import contextlib
import dataclasses
from typing import Callable, Optional, Sequence

import numpy as np
import torch

import tensord

F = ("f32", "f64")
I = ("i32", "i64")
B = ("bool",)
FI = F + I
FB = F + B
ALL = F + I + B
NP = {"f32": np.float32, "f64": np.float64, "i32": np.int32, "i64": np.int64, "bool": np.bool_}
TORCH = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32, "i64": torch.int64,
         "bool": torch.bool}
TORCH_TO_NP = {torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64),
               torch.int32: np.dtype(np.int32), torch.int64: np.dtype(np.int64),
               torch.bool: np.dtype(np.bool_)}
DEFAULT_TOL = {"f64": (1e-7, 1e-10), "f32": (1e-5, 1e-6)}


def is_float(dt: str) -> bool:
    return dt in F


@dataclasses.dataclass
class Case:
    """One call: server inputs (numpy arrays / Python scalars), attributes, and the PyTorch
    reference applied to the same inputs as torch tensors / scalars."""
    inputs: list
    ref: Optional[Callable] = None
    attrs: dict = dataclasses.field(default_factory=dict)
    # Indices of float inputs that become requires-grad leaves (default: every float array).
    grad_inputs: Optional[Sequence[int]] = None
    # Replaces the torch comparison: check(server output arrays, case) (random ops).
    check: Optional[Callable] = None
    tol: Optional[tuple] = None  # (rtol, atol) override for this case
    label: str = ""
    # Compare gradients (False where torch's gradient is undefined at the sampled point).
    grads: bool = True
    # The call must fail with this TensordError subclass (where PyTorch raises too).
    error: Optional[type] = None
    # Also check the f64 gradients against the server's own forward by central differences
    # (False where the op is not differentiable along a random direction at the sampled
    # point, e.g. a max over deliberately tied values: the reason goes in `label`).
    numeric: bool = True


@dataclasses.dataclass
class Spec:
    """A table entry: how to generate cases for a dtype, the expected autodiff marking
    ("d", "z", "n") and the tolerances."""
    gen: Callable[[np.random.Generator, str], list]
    dtypes: tuple
    grad: str
    tol32: tuple = DEFAULT_TOL["f32"]
    tol64: tuple = DEFAULT_TOL["f64"]
    # Custom runner (assign): run(sess, name, spec, dtype, rng) replaces the generic one.
    run: Optional[Callable] = None

    def tol(self, result_dtype) -> tuple:
        """Tolerance for a result of this numpy dtype (int/bool results compare exactly)."""
        return self.tol32 if np.dtype(result_dtype) == np.float32 else self.tol64


# ---- input generation ------------------------------------------------------------------------
def rshape(rng, rank: int, lo: int = 1, hi: int = 4) -> tuple:
    return tuple(int(s) for s in rng.integers(lo, hi + 1, size=rank))


def arr(rng, shape, dt: str, kind: str = "normal") -> np.ndarray:
    """Random array of tensord dtype `dt`. kinds: normal, pos (0.5..2), unit (-0.9..0.9),
    gt1 (1.1..3), nonzero (|x| >= 0.25), prob (0.05..0.95), intlike (integers as floats, for
    ties), small (-0.5..0.5), wide (-3..3 for clamp/hardtanh), any int kinds for int dtypes."""
    shape = tuple(shape)
    if dt == "bool":
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if dt in I:
        if kind in ("pos", "nonzero", "gt1"):
            return rng.integers(1, 6, size=shape).astype(NP[dt])
        return rng.integers(-5, 6, size=shape).astype(NP[dt])
    if kind == "normal":
        x = rng.standard_normal(shape)
    elif kind == "pos":
        x = rng.uniform(0.5, 2.0, shape)
    elif kind == "unit":
        x = rng.uniform(-0.9, 0.9, shape)
    elif kind == "gt1":
        x = rng.uniform(1.1, 3.0, shape)
    elif kind == "nonzero":
        x = rng.uniform(0.25, 2.0, shape) * rng.choice([-1.0, 1.0], shape)
    elif kind == "prob":
        x = rng.uniform(0.05, 0.95, shape)
    elif kind == "intlike":
        x = rng.integers(-3, 4, size=shape).astype(np.float64)
    elif kind == "small":
        x = rng.uniform(-0.5, 0.5, shape)
    elif kind == "wide":
        x = rng.uniform(-3.0, 3.0, shape)
    else:
        raise ValueError(kind)
    return np.asarray(x, dtype=NP[dt])


def scalar(rng, dt: str, kind: str = "normal"):
    """A Python scalar of the dtype's kind."""
    if dt == "bool":
        return bool(rng.integers(0, 2))
    if dt in I:
        return int(rng.integers(1, 4))
    return float(np.round(arr(rng, (), "f64", kind), 3))


UNARY_FIXED = [(), (1,), (0,), (2, 0, 3)]


def unary_shapes(rng) -> list:
    return UNARY_FIXED + [rshape(rng, 1), rshape(rng, 2), rshape(rng, 3), (1, rshape(rng, 1)[0], 1)]


def binary_shapes(rng) -> list:
    s2 = rshape(rng, 2)
    a, b, c = (int(v) for v in rng.integers(2, 5, size=3))
    return [(s2, s2), ((a, b), (b,)), ((c, 1, b), (a, 1)), ((), (a, b)), ((a, b), ()),
            ((0, b), (1, b)), ((1,), (0,)), ((), ())]


# ---- torch side ------------------------------------------------------------------------------
def to_torch(x, requires_grad: bool = False):
    if isinstance(x, np.ndarray):
        t = torch.from_numpy(np.array(x, copy=True))
        if requires_grad:
            t.requires_grad_(True)
        return t
    return x


def as_tuple(x):
    return tuple(x) if isinstance(x, (tuple, list)) else (x,)


@contextlib.contextmanager
def default_dtype(dtype):
    saved = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(saved)


def widen(x):
    """A float32 array as float64 (exactly); anything else unchanged."""
    if isinstance(x, np.ndarray) and x.dtype == np.float32:
        return x.astype(np.float64)
    return x


def exact_reference(ref: Callable, inputs: list, grad_idx) -> tuple:
    """(torch inputs, outputs) of `ref` evaluated in float64 on `inputs` with every float32
    array widened exactly (tensors the reference makes itself default to float64 too): the
    CPU-independent reference (see the module doc)."""
    t_in = [to_torch(widen(x), requires_grad=i in grad_idx) for i, x in enumerate(inputs)]
    with default_dtype(torch.float64):
        return t_in, as_tuple(ref(*t_in))


def narrow(exact, like):
    """An exact result rounded once to the floating dtype of `like`, PyTorch's typed result."""
    if (isinstance(exact, torch.Tensor) and isinstance(like, torch.Tensor) and
            like.dtype.is_floating_point and exact.dtype != like.dtype):
        return exact.detach().to(like.dtype)
    return exact


def exact_grads(roots: list, leaves: list, seeds: list):
    """Gradients of the exact outputs `roots` for the exact `leaves`, seeded with `seeds`
    (numpy arrays, widened to each root's dtype)."""
    return torch.autograd.grad(roots, leaves,
                               grad_outputs=[torch.from_numpy(np.asarray(s)).to(r.dtype)
                                             for r, s in zip(roots, seeds)],
                               allow_unused=True)


def compare(got: np.ndarray, want: torch.Tensor, tol, what: str) -> None:
    want_np = want.detach().numpy() if isinstance(want, torch.Tensor) else np.asarray(want)
    assert got.shape == want_np.shape, f"{what}: shape {got.shape} != torch {want_np.shape}"
    assert got.dtype == want_np.dtype, f"{what}: dtype {got.dtype} != torch {want_np.dtype}"
    if got.dtype.kind in "biu":
        np.testing.assert_array_equal(got, want_np, err_msg=what)
    else:
        rtol, atol = tol
        np.testing.assert_allclose(got, want_np, rtol=rtol, atol=atol, equal_nan=True,
                                   err_msg=what)


# ---- the numerical gradient check ---------------------------------------------------------------
NUMERIC_STEP = 1e-6
NUMERIC_TOL = (1e-5, 1e-7)  # (rtol, atol) on the directional derivative


def numeric_gradcheck(sess, name: str, case: Case, leaves: dict, grads: dict, root_idx: list,
                      seeds: list, rng, what: str) -> None:
    """The server's f64 gradients against its own forward: along a random direction v (one
    per leaf), sum_k <seed_k, (f_k(x + h v) - f_k(x - h v)) / 2h> must equal
    sum_i <grad_i, v_i> (PyTorch's fast-mode gradcheck, two extra forwards per case). The
    comparison with PyTorch's autograd checks the rule; this checks it by finite differences
    too, so that an op needs no separate gradient test."""
    direction = {i: rng.standard_normal(case.inputs[i].shape) for i in leaves}
    analytic = sum(float(np.sum(grads[leaf].numpy() * direction[i]))
                   for i, leaf in leaves.items() if leaf in grads)
    scale = sum(float(np.sum(np.abs(grads[leaf].numpy() * direction[i])))
                for i, leaf in leaves.items() if leaf in grads)

    def forward(sign: float) -> list:
        inputs = [np.asarray(x + sign * NUMERIC_STEP * direction[i], dtype=x.dtype)
                  if i in direction else x for i, x in enumerate(case.inputs)]
        server_in = [sess.tensor(x) if isinstance(x, np.ndarray) else x for x in inputs]
        outs = as_tuple(sess.op(name, *server_in, **case.attrs))
        return [outs[k].numpy() for k in root_idx]
    plus, minus = forward(1.0), forward(-1.0)
    numeric = sum(float(np.sum(np.asarray(seed) * (p - m))) / (2 * NUMERIC_STEP)
                  for seed, p, m in zip(seeds, plus, minus))
    if not (np.isfinite(numeric) and np.isfinite(analytic)):
        return  # a case probing inf/NaN: the comparison with PyTorch has covered it
    rtol, atol = NUMERIC_TOL
    assert abs(numeric - analytic) <= atol + rtol * max(scale, abs(numeric)), \
        (f"{what}: f64 gradients disagree with central differences of the forward along a "
         f"random direction: analytic {analytic!r}, numeric {numeric!r}")


# ---- running a case --------------------------------------------------------------------------
def upload_inputs(sess, inputs, grad_idx, ctx, dtype_of=lambda i: None):
    """The case's inputs as the op takes them (arrays become server tensors, scalars pass
    through) and the autodiff leaves among them by input index; dtype_of(i) overrides the
    upload dtype of input i."""
    server_in, leaves = [], {}
    for i, x in enumerate(inputs):
        if not isinstance(x, np.ndarray):
            server_in.append(x)
            continue
        t = sess.tensor(x, requires_grad=i in grad_idx, ctx=ctx, dtype=dtype_of(i))
        if i in grad_idx:
            leaves[i] = t
        server_in.append(t)
    return server_in, leaves


def run_or_expect_error(sess, name: str, server_in, case: Case, what: str):
    """The op's outputs as a tuple, or None when the case expects an error and got it."""
    if case.error is not None:
        try:
            sess.op(name, *server_in, **case.attrs)
        except case.error:
            return None
        raise AssertionError(f"{what}: expected {case.error.__name__}")
    try:
        return as_tuple(sess.op(name, *server_in, **case.attrs))
    except tensord.TensordError as exc:
        # A device whose backend refuses the call: the device tests decide what that means.
        if exc.reason == "UNSUPPORTED_ON_BACKEND":
            raise
        raise AssertionError(f"{what}: server error {exc}") from None


def matched_grads(leaves: dict, grads: dict, t_grads, what: str):
    """(input index, server gradient, torch gradient) for each leaf torch has a gradient for;
    a leaf torch leaves unused must have no gradient or an all-zero one."""
    for (i, leaf), tg in zip(leaves.items(), t_grads):
        if tg is None:
            if leaf in grads:
                assert not np.any(grads[leaf].numpy()), \
                    f"{what}: nonzero gradient for unused input {i}"
            continue
        assert leaf in grads, f"{what}: no gradient for input {i}"
        yield i, grads[leaf], tg


def describe(case: Case) -> str:
    def d(x):
        if isinstance(x, np.ndarray):
            return f"{x.dtype}{list(x.shape)}"
        return repr(x)
    return f"{case.label or ''} inputs=({', '.join(d(x) for x in case.inputs)}) attrs={case.attrs}"


def run_case(sess, name: str, spec: Spec, case: Case, dt: str, rng,
             checkpointing: str = "none") -> None:
    what = f"{name}[{dt}] {describe(case)}"
    if checkpointing != "none":
        what += f" checkpointing={checkpointing}"
    float_inputs = [i for i, x in enumerate(case.inputs)
                    if isinstance(x, np.ndarray) and x.dtype.kind == "f"]
    grad_idx = list(case.grad_inputs) if case.grad_inputs is not None else float_inputs
    grad_idx = [i for i in grad_idx if i in float_inputs]
    ctx = sess.autodiff(checkpointing=checkpointing) if grad_idx else None
    try:
        server_in, leaves = upload_inputs(sess, case.inputs, grad_idx, ctx)
        outs = run_or_expect_error(sess, name, server_in, case, what)
        if outs is None:
            return
        got = [o.numpy() for o in outs]
        if case.check is not None:
            case.check(got, case)
            if spec.grad == "n":
                for o in outs:
                    assert not o.requires_grad, f"{what}: output of a non-differentiable op " \
                                                "is an autodiff tensor"
            return
        t_in = [to_torch(x, requires_grad=i in grad_idx) for i, x in enumerate(case.inputs)]
        t_outs = as_tuple(case.ref(*t_in))  # dtypes and requires-grad flags only
        x_in, x_outs = exact_reference(case.ref, case.inputs, grad_idx)
        assert len(outs) == len(t_outs), f"{what}: {len(outs)} outputs, torch has {len(t_outs)}"
        # A computation that ran in f32 anywhere (mixed f32/f64 operands) is held to the f32
        # tolerance, gradients of its f64 inputs included.
        mixed = any(isinstance(x, np.ndarray) and x.dtype == np.float32 for x in case.inputs) or \
            any(g.dtype == np.float32 for g in got)

        def tol_for(a):
            return case.tol or spec.tol(np.float32 if mixed else a.dtype)
        for k, (g, w, x) in enumerate(zip(got, t_outs, x_outs)):
            compare(g, narrow(x, w), tol_for(g), f"{what} output {k}")
        if not leaves:
            return
        if spec.grad == "n":
            for k, o in enumerate(outs):
                assert not o.requires_grad, f"{what}: output {k} of a non-differentiable op " \
                                            "is an autodiff tensor"
            return
        root_idx = [k for k, w in enumerate(t_outs) if w.dtype.is_floating_point and
                    w.requires_grad]
        roots = [(outs[k], x_outs[k]) for k in root_idx]
        for k, (o, w) in enumerate(zip(outs, t_outs)):
            if w.dtype.is_floating_point and w.requires_grad:
                assert o.requires_grad, f"{what}: float output {k} is not an autodiff tensor"
        if not roots or not case.grads:
            return
        seeds = [arr(rng, w.shape, "f32" if w.dtype == torch.float32 else "f64")
                 for w in t_outs if w.dtype.is_floating_point and w.requires_grad]
        try:
            grads = ctx.backward([o for o, _ in roots], seed=seeds)
        except tensord.TensordError as exc:
            if exc.reason == "UNSUPPORTED_ON_BACKEND":
                raise  # a device without a kernel a backward rule needs
            raise AssertionError(f"{what}: backward failed: {exc}") from None
        t_grads = exact_grads([x for _, x in roots], [x_in[i] for i in leaves], seeds)
        for i, got_grad, tg in matched_grads(leaves, grads, t_grads, what):
            g = got_grad.numpy()
            compare(g, narrow(tg, t_in[i]), tol_for(g), f"{what} grad of input {i}")
        if dt == "f64" and not mixed and case.numeric and checkpointing == "none":
            numeric_gradcheck(sess, name, case, leaves, grads, root_idx, seeds, rng, what)
    finally:
        if ctx is not None:
            ctx.close()
