"""The conformance suite in u8, i8 and i16: ops that take i32 also take the three narrow integer
dtypes (ListOps lists them; not as indices, see REFUSED), stored in 1 or 2 bytes and computed in
i32, wrapping as PyTorch's integer kernels wrap. Each i32 case of the table runs again with its
i32 inputs converted to the narrow dtype and is compared with PyTorch computing on tensors of
that dtype (torch.uint8, int8, int16): integer kernels are exact and do not depend on the CPU,
so integer and bool results must match exactly, output dtypes (PyTorch's promotion) included;
float results (exp of a u8 tensor, a mean with dtype=f32) are compared as in opcheck.py, with
the op's f32 tolerance against float64 rounded once.

How an i32 case becomes a narrow one:
  - Its i32 arrays become the narrow dtype. Their values (-5..5, or tie-free values around 0)
    fit i8 and i16; for u8 an array with negative values is shifted up by its minimum, which
    keeps the order of its values and their distinctness. Arrays of other dtypes stay (the i64
    operand of a promotion case, float weights), and so do index operands (INDEX_INPUTS), which
    torch takes as i32/i64 only; a narrow index must be refused (optable_narrow adds those).
  - Python numbers stay in the dtype's range: negative ones become positive for u8, where torch
    would convert them to the tensor's dtype (a clamp min of -2 is 254 in a u8 clamp). A value
    attribute changed so (clamp's min) has its reference rebuilt from the attributes
    (ATTR_REFS). arange keeps its negative starts: torch computes the sequence and wraps it
    into u8, as tensord (computing in i32) must.
  - A "dtype" attribute naming i32 (creation ops, to_dtype) names the narrow dtype instead, and
    PyTorch's int32 results of such a case are converted to it (wrapping, as torch's .to()).
Index and class operands of embedding, one_hot and the class-target losses (REFUSED) must be
i32/i64: their table cases with that operand in a narrow dtype must fail with DTYPE_MISMATCH.
Where torch 1.13 has no kernel for an op in a narrow dtype (TORCH_NO_KERNEL, (op, dtype) -> why;
none so far), the reference is torch computing in int32 with its int32 results wrapped to the
narrow dtype: what tensord promises (compute in i32, store narrow). Ops with their own runner
(assign, randint, the collectives) have one in RUNNERS.
optable_narrow.py adds cases the i32 table cannot give: values over the whole range (wrapping
add, mul, pow; u8 values above 127 that a signed kernel would misorder), mixed narrow operands
(u8 with i8 promotes to i16), conversions into the narrow dtypes and refused narrow indices.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import torch

import tensord
from tensord import dtypes
from opcheck import Case, Spec, as_tuple, run_case

NARROW = ("u8", "i8", "i16")
NP_NARROW = {"u8": np.dtype(np.uint8), "i8": np.dtype(np.int8), "i16": np.dtype(np.int16)}
TORCH_NARROW = {"u8": torch.uint8, "i8": torch.int8, "i16": torch.int16}

# Input positions that are indices: they keep their i32/i64 dtype.
INDEX_INPUTS = {"index_select": (1,), "gather": (1,), "scatter": (1,), "scatter_add": (1,),
                "index_add": (1,)}
# Ops with an index operand that must refuse u8/i8/i16 (DTYPE_MISMATCH), listed or not (ListOps
# lists no narrow dtype for them): op -> (why, dtype of the table cases, position of the index).
REFUSED = {
    "embedding": ("indices are i32/i64; torch.nn.functional.embedding takes Long or Int", "i32", 0),
    "one_hot": ("class indices are i32/i64; torch's one_hot takes Long only", "i32", 0),
    # torch 1.13 also takes u8 class targets here (legacy Byte targets), refusing i8 and i16
    "cross_entropy": ("class targets are i32/i64; torch takes Long (and legacy Byte)", "f32", 1),
    "nll_loss": ("class targets are i32/i64; torch takes Long (and legacy Byte)", "f32", 1),
}
# (op, dtype) -> why torch 1.13 cannot be the reference in that dtype; see the module doc.
TORCH_NO_KERNEL: dict = {}
# Value attributes a narrow case may change (see the module doc), and the references rebuilt
# from changed attributes.
VALUE_ATTRS = ("min", "max", "value", "alpha")
ATTR_REFS = {
    "clamp": lambda a: (lambda x: torch.clamp(x, min=a.get("min"), max=a.get("max"))),
    "pad": lambda a: (lambda x: torch.nn.functional.pad(x, a["pad"], value=a.get("value", 0))),
}


def narrow_array(x: np.ndarray, dt: str) -> np.ndarray:
    """An i32 array of a table case in `dt` (see the module doc)."""
    info = np.iinfo(NP_NARROW[dt])
    v = x.astype(np.int64)
    if v.size and v.min() < info.min:
        v = np.asarray(v - v.min() + info.min)
    assert v.size == 0 or v.max() <= info.max, f"values up to {v.max()} do not fit {dt}"
    return v.astype(NP_NARROW[dt])


def narrow_scalar(x, dt: str):
    """A Python number of a table case kept in `dt`'s range (bools and non-numbers unchanged)."""
    if isinstance(x, bool) or not isinstance(x, (int, float)):
        return x
    if dt == "u8" and x < 0:
        x = -x
    if isinstance(x, int):
        info = np.iinfo(NP_NARROW[dt])
        assert info.min <= x <= info.max, f"{x} does not fit {dt}"
    return x


def narrow_ref(ref, dt: str, cast_i32: bool, via_i32: bool):
    """`ref` with narrow inputs widened to int32 (via_i32) and int32 results wrapped to `dt`
    (cast_i32 or via_i32)."""
    if ref is None or not (cast_i32 or via_i32):
        return ref
    tdt = TORCH_NARROW[dt]

    def f(*args):
        if via_i32:
            args = [a.to(torch.int32) if isinstance(a, torch.Tensor) and a.dtype == tdt else a
                    for a in args]
        return tuple(o.to(tdt) if isinstance(o, torch.Tensor) and o.dtype == torch.int32 else o
                     for o in as_tuple(ref(*args)))
    return f


def narrow_case(name: str, case: Case, dt: str) -> Case:
    """An i32 table case in `dt` (see the module doc)."""
    keep = INDEX_INPUTS.get(name, ())
    inputs = []
    for i, x in enumerate(case.inputs):
        if isinstance(x, np.ndarray) and x.dtype == np.int32 and i not in keep:
            inputs.append(narrow_array(x, dt))
        else:
            inputs.append(x if i in keep else narrow_scalar(x, dt))
    attrs = dict(case.attrs)
    renamed = attrs.get("dtype") == "i32"
    if renamed:
        attrs["dtype"] = dt
    changed = {k for k in VALUE_ATTRS if k in attrs and narrow_scalar(attrs[k], dt) != attrs[k]}
    ref = case.ref
    if changed:
        assert name in ATTR_REFS, f"{name}[{dt}]: attributes {sorted(changed)} are out of range; " \
                                  "give the op a reference built from them in ATTR_REFS"
        attrs.update({k: narrow_scalar(attrs[k], dt) for k in changed})
        ref = ATTR_REFS[name](attrs)
    ref = narrow_ref(ref, dt, renamed, (name, dt) in TORCH_NO_KERNEL)
    return dataclasses.replace(case, inputs=inputs, ref=ref, attrs=attrs)


# ---- ops whose table entry has its own runner ------------------------------------------------
def _run_assign(sess, name, spec, dt, rng):
    """assign writes in place: narrow into narrow (broadcast), i32 into a narrow target
    (wrapping, as torch's copy_), narrow into an i32 target (exactly); views share storage."""
    info = np.iinfo(NP_NARROW[dt])
    for ts_, vs in (((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 3), ()), ((), ())):
        t = sess.tensor(rng.integers(info.min, info.max + 1, ts_).astype(NP_NARROW[dt]))
        value = rng.integers(info.min, info.max + 1, vs).astype(NP_NARROW[dt])
        sess.op("assign", t, value)
        assert dtypes.name(t.dtype) == dt
        np.testing.assert_array_equal(t.numpy(), np.broadcast_to(value, ts_),
                                      err_msg=f"assign[{dt}] {ts_} <- {vs}")
    t = sess.tensor(np.zeros((2, 4), NP_NARROW[dt]))
    wide = np.array([[-40000, -129, -1, 0], [127, 128, 255, 70000]], np.int32)
    sess.op("assign", t, wide)
    want = torch.from_numpy(wide).to(TORCH_NARROW[dt]).numpy()
    np.testing.assert_array_equal(t.numpy(), want, err_msg=f"assign[{dt}] <- i32 (wraps)")
    target = sess.tensor(np.zeros((2, 4), np.int32))
    sess.op("assign", target, want)
    np.testing.assert_array_equal(target.numpy(), want.astype(np.int32),
                                  err_msg=f"assign i32 <- {dt}")
    base = sess.tensor(np.zeros((2, 3), NP_NARROW[dt]))
    view = sess.op("reshape", base, shape=[6])
    value = rng.integers(0, 100, (2, 3)).astype(NP_NARROW[dt])
    sess.op("assign", base, value)
    np.testing.assert_array_equal(view.numpy(), value.reshape(6))


def _run_randint(sess, name, spec, dt, rng):
    """randint in a narrow dtype: values in [low, high), every value drawn, the seed
    deterministic, also for the dtype's whole range."""
    info = np.iinfo(NP_NARROW[dt])
    for low, high in ((0, 5) if dt == "u8" else (-3, 5), (int(info.min), int(info.max) + 1)):
        attrs = {"shape": [100, 100], "dtype": dt, "seed": int(rng.integers(1, 1 << 30)),
                 "low": low, "high": high}
        g = sess.op(name, **attrs).numpy()
        assert g.dtype == NP_NARROW[dt] and g.shape == (100, 100), (g.dtype, g.shape)
        assert int(g.min()) >= low and int(g.max()) < high, (low, high, g.min(), g.max())
        span = high - low
        if span <= 256:
            assert set(np.unique(g).tolist()) == set(range(low, high)), f"{name}[{dt}] {low}.."
        else:  # i16's range: 10000 draws reach within 1% of both ends
            assert g.min() < low + span // 100 and g.max() >= high - span // 100, (g.min(), g.max())
        np.testing.assert_array_equal(sess.op(name, **attrs).numpy(), g,
                                      err_msg=f"{name}[{dt}]: same seed, different values")
        other = sess.op(name, **{**attrs, "seed": attrs["seed"] + 1}).numpy()
        assert not np.array_equal(other, g), f"{name}[{dt}]: different seeds, same values"
    empty = sess.op(name, shape=[0, 3], dtype=dt, low=0, high=3, seed=1)
    assert empty.shape == (0, 3) and dtypes.name(empty.dtype) == dt


def _run_in_group(sess, name, spec, dt, rng):
    from optable_distributed import solo_group
    with solo_group(sess):
        for case in spec.gen(rng, "i32"):
            run_case(sess, name, spec, narrow_case(name, case, dt), dt, rng)


RUNNERS = {"assign": _run_assign, "randint": _run_randint,
           **{n: _run_in_group for n in ("all_reduce", "all_gather", "reduce_scatter",
                                         "broadcast", "reduce")}}


def run_refused(sess, name: str, spec: Spec, dt: str, rng) -> None:
    """The table cases of an op in REFUSED with their class/index operand in `dt`: refused."""
    why, src, pos = REFUSED[name]
    for case in spec.gen(rng, src):
        x = case.inputs[pos]
        if case.error is None and isinstance(x, np.ndarray) and x.dtype.kind == "i" and \
                np.array_equal(x.astype(NP_NARROW[dt]), x):  # (not ignore_index=-100 in u8)
            inputs = list(case.inputs)
            inputs[pos] = x.astype(NP_NARROW[dt])
            run_case(sess, name, spec, dataclasses.replace(
                case, inputs=inputs, ref=None, error=tensord.DtypeMismatch,
                label=f"{case.label} {dt} operand {pos} (refused: {why})"), dt, rng)


def run_narrow(sess, name: str, spec: Spec, dt: str, rng) -> None:
    """Every i32 case of `spec` in `dt`, then optable_narrow's cases for the op."""
    from optable_narrow import EXTRA
    if spec.run is not None:
        runner = RUNNERS.get(name)
        assert runner is not None, f"{name}: a table entry with its own runner needs a " \
                                   "u8/i8/i16 runner in opcheck_narrow.RUNNERS"
        runner(sess, name, spec, dt, rng)
        return
    for case in spec.gen(rng, "i32"):
        assert case.check is None, f"{name}: value checks are written for i32 outputs; give " \
                                   "the op a runner in opcheck_narrow.RUNNERS"
        run_case(sess, name, spec, narrow_case(name, case, dt), dt, rng)
    for case in EXTRA.get(name, lambda rng, dt: [])(rng, dt):
        run_case(sess, name, spec, case, dt, rng)

