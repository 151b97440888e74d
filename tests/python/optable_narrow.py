"""Conformance cases for u8, i8 and i16 that the i32 table cannot give (opcheck_narrow.py
reruns the i32 cases): values over the dtype's whole range and at its ends (add, sub, mul, neg,
pow and the sums with a narrow dtype wrap as in torch; u8 values above 127 must order, compare
and divide unsigned), operands of two narrow dtypes or a narrow and another dtype (torch's
promotion: u8 with i8 gives i16, a 0-d or Python-number operand of the same category keeps the
tensor's dtype), conversions into the narrow dtypes (wrapping from wider integers, truncating
in-range floats), the ends of the range as values of full and masked_fill, and narrow index
operands, which torch refuses (DTYPE_MISMATCH). A 0-d operand that does not promote may hold a
value the result's dtype does not (i8 tensor, 0-d u8 200): torch converts it into that dtype,
wrapping, where the result is an integer or a comparison (maximum, eq), but converts it to float
directly in a true division, and so must tensord."""
import numpy as np
import torch

import tensord
from opcheck import NP, TORCH, Case, arr
from opcheck_narrow import NARROW, NP_NARROW, TORCH_NARROW
from optable_elementwise import ts


DTYPE = {**TORCH, **TORCH_NARROW}


def info(dt):
    return np.iinfo(NP_NARROW[dt])


def full(rng, shape, dt, nonzero=False):
    """Values over the whole range of a narrow dtype (or of some other dtype: see other())."""
    if dt not in NARROW:
        return other(rng, shape, dt)
    x = np.asarray(rng.integers(info(dt).min, int(info(dt).max) + 1, size=shape))
    if nonzero:
        x[x == 0] = 1
    return x.astype(NP_NARROW[dt])


def other(rng, shape, dt):
    """An operand of a non-narrow dtype: i32/i64 values beyond the narrow ranges."""
    if dt in ("i32", "i64"):
        return rng.integers(-300, 301, size=shape).astype(NP[dt])
    return arr(rng, shape, dt)


def edges(dt, nonzero=False):
    """The ends of the range and the values around 0 and the middle."""
    i = info(dt)
    vals = {int(i.min), int(i.min) + 1, -2, -1, 0, 1, 2, int(i.max) // 2, int(i.max) - 1,
            int(i.max)}
    return np.array(sorted(v for v in vals if i.min <= v <= i.max and (v or not nonzero)),
                    NP_NARROW[dt])


def distinct_full(rng, shape, dt):
    """Tie-free values over the whole range (u8 values above 127 included)."""
    n = int(np.prod(shape))
    return rng.choice(np.arange(info(dt).min, int(info(dt).max) + 1), n,
                      replace=False).reshape(shape).astype(NP_NARROW[dt])


OTHERS = NARROW + ("i32", "i64", "bool", "f32")


def binary(fn, nonzero=False, scalars=True, promote=OTHERS, **kw):
    """Whole-range operands, every pair of edge values, the largest Python int as either
    operand, and operands of every other dtype (dims of both, or a 0-d one)."""
    def ref(a, b):
        return fn(*ts(a, b), **kw)

    def gen(rng, dt):
        e = edges(dt)
        cases = [Case([full(rng, (4, 5), dt), full(rng, (4, 5), dt, nonzero)], ref, dict(kw),
                      label="whole range"),
                 Case([e[:, None], edges(dt, nonzero)[None, :]], ref, dict(kw), label="edges")]
        if scalars:
            top = int(info(dt).max)
            cases += [Case([full(rng, (3, 4), dt), top], ref, dict(kw), label=f"tensor, {top}"),
                      Case([top, full(rng, (3, 4), dt, nonzero)], ref, dict(kw),
                           label=f"{top}, tensor")]
        for o in promote:
            if o == dt:
                continue
            nz = nonzero and o not in ("bool", "f32")
            cases += [Case([full(rng, (3, 4), dt), full(rng, (3, 4), o, nz)], ref, dict(kw),
                           label=f"{dt}, {o}"),
                      # the whole range of dt, which o may not hold (see the module doc)
                      Case([full(rng, (3, 4), o), full(rng, (), dt, nonzero)], ref, dict(kw),
                           label=f"{o}, 0-d {dt}")]
            if o in NARROW and info(o).min <= info(dt).min and info(o).max >= info(dt).max:
                # a 0-d operand of a wider dtype of the same category, with values dt holds
                cases.append(Case([full(rng, (3, 4), dt), full(rng, (), dt, nonzero).astype(
                    NP_NARROW[o])], ref, dict(kw), label=f"{dt}, 0-d {o}"))
        if nonzero:
            cases = [c for c in cases if not _has_zero_divisor(c)]
        return cases
    return gen


def _has_zero_divisor(case):
    b = case.inputs[1]
    return isinstance(b, np.ndarray) and b.dtype != np.bool_ and not np.all(b)


def unary(fn, nonzero=False):
    def gen(rng, dt):
        return [Case([full(rng, (4, 5), dt, nonzero)], fn, label="whole range"),
                Case([edges(dt, nonzero)], fn, label="edges")]
    return gen


def _pow(rng, dt):
    exps = rng.integers(0, 8, size=(4, 5)).astype(NP_NARROW[dt])
    return [Case([full(rng, (4, 5), dt), exps], torch.pow, label="whole range ** 0..7"),
            Case([edges(dt), 3], torch.pow, label="edges ** 3"),
            Case([2, exps], lambda a, b: torch.pow(a, b), label="2 ** 0..7")]


def _clamp(rng, dt):
    lo, hi = (50, 200) if dt == "u8" else (int(info(dt).min) // 2, int(info(dt).max) // 2)
    return [Case([full(rng, (4, 5), dt)], lambda x, a=a: torch.clamp(x, **a), a, label=str(a))
            for a in ({"min": lo, "max": hi}, {"min": lo}, {"max": hi})]


def _reduce(fn, attr_sets, make=full):
    def gen(rng, dt):
        return [Case([make(rng, (3, 5), dt)],
                      lambda x, a=a: fn(x, **{k: DTYPE[v] if k == "dtype" else v
                                              for k, v in a.items()}),
                      dict(a), label=f"whole range {a}") for a in attr_sets]
    return gen


def _sum_i32(rng, dt):
    """A sum of i32 values with a narrow dtype: torch converts, then sums (and wraps)."""
    x = rng.integers(-40000, 40001, size=(3, 5)).astype(np.int32)
    return [Case([x], lambda t: torch.sum(t, dim=1, dtype=TORCH_NARROW[dt]),
                 {"dim": 1, "dtype": dt},
                 label="i32 summed as the narrow dtype")]


def _to_dtype(rng, dt):
    wide = np.array([-70000, -40000, -129, -128, -1, 0, 1, 127, 128, 255, 256, 40000])
    floats = {"u8": [0.0, 0.5, 1.9, 127.9, 200.2, 255.0], "i8": [-128.0, -3.7, -0.5, 0.9, 127.0],
              "i16": [-32768.0, -1000.6, -0.4, 0.7, 32767.0]}[dt]
    to = lambda t: t.to(TORCH_NARROW[dt])  # noqa: E731
    cases = [Case([wide.astype(np.int32)], to, {"dtype": dt}, label="i32 (wraps)"),
             Case([wide.astype(np.int64)], to, {"dtype": dt}, label="i64 (wraps)"),
             Case([np.array(floats, np.float32)], to, {"dtype": dt}, label="f32 (truncates)"),
             Case([np.array(floats, np.float64)], to, {"dtype": dt}, label="f64 (truncates)"),
             Case([arr(rng, (3, 4), "bool")], to, {"dtype": dt}, label="bool")]
    cases += [Case([full(rng, (3, 4), o)], to, {"dtype": dt}, label=f"{o} (wraps)")
              for o in NARROW if o != dt]
    return cases


def _where(rng, dt):
    ref = lambda c, a, b: torch.where(c, *ts(a, b))  # noqa: E731
    return [Case([arr(rng, (3, 4), "bool"), full(rng, (3, 4), dt), full(rng, (3, 4), o)], ref,
                 label=f"{dt}, {o}") for o in NARROW + ("i32", "f32")] + \
        [Case([arr(rng, (3, 4), "bool"), full(rng, (3, 4), dt), int(info(dt).max)], ref,
              label="max as a scalar")]


def _masked_fill(rng, dt):
    return [Case([full(rng, (3, 4), dt), arr(rng, (3, 4), "bool")],
                 lambda t, m, v=v: t.masked_fill(m, v), {"value": v}, label=f"value {v}")
            for v in (int(info(dt).min), int(info(dt).max))]


def _full(rng, dt):
    return [Case([], lambda v=v: torch.full((2, 3), v, dtype=TORCH_NARROW[dt]),
                 {"shape": [2, 3], "dtype": dt, "value": v}, label=f"value {v}")
            for v in (int(info(dt).min), int(info(dt).max))]


def _narrow_index(x_shape, idx_shape, src_shape=None):
    """A narrow index operand, refused (torch takes i32/i64 indices)."""
    def gen(rng, dt):
        inputs = [full(rng, x_shape, dt), rng.integers(0, 2, idx_shape).astype(NP_NARROW[dt])]
        if src_shape is not None:
            inputs.append(full(rng, src_shape, dt))
        return [Case(inputs, attrs={"dim": 0}, error=tensord.DtypeMismatch,
                     label=f"{dt} index (refused)")]
    return gen


def both(*gens):
    return lambda rng, dt: [c for g in gens for c in g(rng, dt)]


REDUCED = {"max": torch.max, "min": torch.min, "sort": torch.sort}
EXTRA = {
    **{name: binary(getattr(torch, name)) for name in
       ("mul", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge")},
    "add": both(binary(torch.add), binary(torch.add, scalars=False, promote=(), alpha=3)),
    # torch refuses bool operands of sub, and floats in the bitwise ops
    "sub": both(binary(torch.sub, promote=OTHERS[:-2] + ("f32",)),
                binary(torch.sub, scalars=False, promote=(), alpha=3)),
    "div": both(binary(torch.div, nonzero=True),
                *(binary(torch.div, nonzero=True, promote=(), rounding_mode=m)
                  for m in ("floor", "trunc"))),
    "remainder": binary(torch.remainder, nonzero=True, promote=()),
    "fmod": binary(torch.fmod, nonzero=True, promote=()),
    "bitwise_and": binary(torch.bitwise_and, promote=OTHERS[:-1]),
    "bitwise_or": binary(torch.bitwise_or, promote=()),
    "bitwise_xor": binary(torch.bitwise_xor, promote=()),
    "bitwise_not": unary(torch.bitwise_not),
    "neg": unary(torch.neg),
    "abs": unary(torch.abs),
    "square": unary(torch.square),
    "sign": unary(torch.sign),
    "pow": _pow,
    "clamp": _clamp,
    "where": _where,
    "masked_fill": _masked_fill,
    "full": _full,
    "to_dtype": _to_dtype,
    "sum": both(lambda rng, dt: _reduce(torch.sum, ({"dim": 1}, {"dim": 1, "dtype": dt}))(rng, dt),
                _sum_i32),
    "cumsum": lambda rng, dt: _reduce(torch.cumsum, ({"dim": 1}, {"dim": 1, "dtype": dt}))(rng, dt),
    "prod": _reduce(lambda x, dim: torch.prod(x, dim), ({"dim": 1},)),
    "mean": _reduce(torch.mean, ({"dim": 1, "dtype": "f32"},)),
    **{name: _reduce(lambda x, dim, f=f: tuple(f(x, dim)), ({"dim": 1},), distinct_full)
       for name, f in REDUCED.items()},
    **{name: _reduce(getattr(torch, name), ({"dim": 1},), distinct_full)
       for name in ("amax", "amin", "argmax", "argmin", "argsort")},
    "topk": _reduce(lambda x, k, dim: tuple(torch.topk(x, k, dim)), ({"k": 3, "dim": 1},),
                    distinct_full),
    "index_select": _narrow_index((4, 3), (2,)),
    "gather": _narrow_index((4, 3), (2, 3)),
    "scatter": _narrow_index((4, 3), (2, 3), (2, 3)),
    "scatter_add": _narrow_index((4, 3), (2, 3), (2, 3)),
    "index_add": _narrow_index((4, 3), (2,), (2, 3)),
}
