"""Conformance table: elementwise ops. Arithmetic, comparison, logic and where; unary math
(rounding, exp/log, trigonometric and hyperbolic functions, erf, erfc, erfinv, the isnan family);
remainder, fmod, atan2, hypot, the bitwise ops and lerp."""
import numpy as np
import torch

from opcheck import (ALL, FI, NP, B, Case, F, I, Spec, arr, binary_shapes, rshape, scalar,
                     unary_shapes)


def _wrap(x, like):
    """A Python scalar as a 0-d tensor that promotes against `like` exactly as PyTorch's
    wrapped scalar does, without rounding its value (a float scalar keeps double precision when
    the result is f64)."""
    if not isinstance(x, (bool, int, float)):
        return x
    other = like.dtype if isinstance(like, torch.Tensor) else None
    if isinstance(x, bool):
        return torch.tensor(x)
    if isinstance(x, int):
        same_kind = other is not None and other != torch.bool
        return torch.tensor(x, dtype=other if same_kind else torch.int64)
    if other is not None and other.is_floating_point:
        return torch.tensor(x, dtype=other)
    return torch.tensor(x, dtype=torch.get_default_dtype())


def ts(*xs):
    """Wraps the Python scalars among xs (see _wrap); returns one value or a tuple."""
    tensors = [x for x in xs if isinstance(x, torch.Tensor)]
    like = None
    if tensors:
        like = tensors[0]
        for t in tensors[1:]:
            like = torch.empty((), dtype=torch.result_type(like, t))
    out = tuple(_wrap(x, like) for x in xs)
    return out[0] if len(out) == 1 else out


# ---- binary ----------------------------------------------------------------------------------
def binary(ref, dtypes, grad="d", ka="normal", kb="normal", scalars=True, variants=(),
           extra=None, **tol):
    """ref(a, b) on torch tensors / Python scalars; variants: (attrs, ref) applied to two
    shape pairs; extra(rng, dt) -> more cases."""
    def gen(rng, dt):
        cases = [Case([arr(rng, sa, dt, ka), arr(rng, sb, dt, kb)], ref, label=f"{sa}x{sb}")
                 for sa, sb in binary_shapes(rng)]
        if scalars:
            cases.append(Case([arr(rng, rshape(rng, 2), dt, ka), scalar(rng, dt, kb)], ref,
                              label="tensor-scalar"))
            cases.append(Case([scalar(rng, dt, ka), arr(rng, rshape(rng, 2), dt, kb)], ref,
                              label="scalar-tensor"))
        for attrs, vref in variants:
            for sa, sb in binary_shapes(rng)[:3]:
                cases.append(Case([arr(rng, sa, dt, ka), arr(rng, sb, dt, kb)], vref, attrs))
        if extra:
            cases += extra(rng, dt)
        return cases
    return Spec(gen, dtypes, grad, **tol)


def promotion_cases(ref, ka="normal", kb="normal"):
    """PyTorch type promotion: a 0-d tensor of another dtype and category, int tensors with
    float scalars, mixed-dtype tensors."""
    def extra(rng, dt):
        s = rshape(rng, 2)
        cases = []
        if dt == "f32":
            cases.append(Case([arr(rng, s, "f32", ka), arr(rng, (), "f64", kb)], ref,
                              label="f32 tensor, f64 0-d"))
            cases.append(Case([arr(rng, s, "f32", ka), arr(rng, s, "f64", kb)], ref,
                              label="f32, f64"))
            cases.append(Case([arr(rng, s, "i32", ka), arr(rng, s, "f32", kb)], ref,
                              label="i32, f32"))
        if dt in I:
            cases.append(Case([arr(rng, s, dt, ka), 1.5], ref, label="int tensor, float scalar"))
            cases.append(Case([arr(rng, s, "i32", ka), arr(rng, s, "i64", kb)], ref,
                              label="i32, i64"))
        if dt == "bool":
            cases.append(Case([arr(rng, s, dt), 2], ref, label="bool tensor, int scalar"))
            cases.append(Case([arr(rng, s, dt), -1.5], ref, label="bool tensor, float scalar"))
            cases.append(Case([arr(rng, s, dt), arr(rng, s, "i32", kb)], ref,
                              label="bool, i32"))
        return cases
    return extra


def _add_ref(alpha=None):
    def ref(a, b):
        return torch.add(*ts(a, b)) if alpha is None else torch.add(*ts(a, b), alpha=alpha)
    return ref


def _sub_ref(alpha=None):
    def ref(a, b):
        return torch.sub(*ts(a, b)) if alpha is None else torch.sub(*ts(a, b), alpha=alpha)
    return ref


def _arith(name, refmaker, alpha, dtypes):
    def gen(rng, dt):
        base = binary(refmaker(), dtypes, extra=promotion_cases(refmaker())).gen(rng, dt)
        if dt == "bool":
            return base
        a = 2 if dt in I else alpha
        for sa, sb in binary_shapes(rng)[:3]:
            base.append(Case([arr(rng, sa, dt), arr(rng, sb, dt)], refmaker(a), {"alpha": a},
                             label="alpha"))
        return base
    return Spec(gen, dtypes, "d")


def _div():
    def gen(rng, dt):
        ref = lambda a, b: torch.div(*ts(a, b))
        cases = binary(ref, FI, kb="nonzero", extra=promotion_cases(ref, kb="nonzero")).gen(rng,
                                                                                           dt)
        if dt == "bool":
            return cases
        for mode in ("trunc", "floor"):
            mref = lambda a, b, m=mode: torch.div(*ts(a, b), rounding_mode=m)
            for sa, sb in binary_shapes(rng)[:4]:
                cases.append(Case([arr(rng, sa, dt, "wide" if dt in F else "normal"),
                                   arr(rng, sb, dt, "nonzero")], mref, {"rounding_mode": mode},
                                  label=mode))
            cases.append(Case([arr(rng, (3, 2), dt), scalar(rng, dt, "nonzero") or 2], mref,
                              {"rounding_mode": mode}, label=f"{mode} scalar"))
        return cases
    return Spec(gen, FI + B, "d")


def _pow():
    def gen(rng, dt):
        if dt in I:
            return _int_pow(rng, dt)
        ref = lambda a, b: torch.pow(*ts(a, b)) if isinstance(b, torch.Tensor) else torch.pow(a, b)
        cases = [Case([arr(rng, sa, dt, "pos"), arr(rng, sb, dt)], ref, label=f"{sa}x{sb}")
                 for sa, sb in binary_shapes(rng)]
        for e in (2.0, 3, 0.5, -1.5):
            kind = "normal" if float(e).is_integer() else "pos"
            cases.append(Case([arr(rng, rshape(rng, 2), dt, kind), e], ref, label=f"x**{e}"))
        cases.append(Case([2.0, arr(rng, rshape(rng, 2), dt)], ref, label="2**x"))
        if dt == "f32":
            cases.append(Case([arr(rng, (3,), "f32", "pos"), arr(rng, (), "f64")], ref,
                              label="f32 tensor, f64 0-d"))
        return cases
    return Spec(gen, FI, "d", tol32=(2e-5, 1e-5))


def _int_pow(rng, dt):
    """Integer powers (PyTorch refuses negative integer exponents)."""
    ref = lambda a, b: torch.pow(a, b)
    s = rshape(rng, 2)
    return [Case([arr(rng, s, dt), rng.integers(0, 4, size=s).astype(NP[dt])], ref,
                 label="int ** int"),
            Case([arr(rng, s, dt), rng.integers(0, 4, size=s[1:]).astype(NP[dt])], ref,
                 label="broadcast"),
            Case([arr(rng, s, dt), 3], ref, label="x**3"),
            Case([2, rng.integers(0, 5, size=s).astype(NP[dt])], ref, label="2**x"),
            Case([arr(rng, s, dt, "pos"), 0.5], ref, label="int ** 0.5")]


def _compare(fn):
    ref = lambda a, b: fn(*ts(a, b))
    return binary(ref, ALL, "n", ka="intlike", kb="intlike", extra=promotion_cases(ref))


def _logical(fn):
    return binary(lambda a, b: fn(*ts(a, b)), ALL, "n", ka="intlike", kb="intlike")


def _where():
    def gen(rng, dt):
        ref = lambda c, a, b: torch.where(c, *ts(a, b))
        cases = []
        for sa, sb in binary_shapes(rng):
            sc = sa if len(sa) >= len(sb) else sb
            cases.append(Case([arr(rng, sc, "bool"), arr(rng, sa, dt), arr(rng, sb, dt)], ref,
                              label=f"{sc},{sa},{sb}"))
        s = rshape(rng, 3)
        cases.append(Case([arr(rng, s[1:], "bool"), arr(rng, s, dt), arr(rng, (1,), dt)], ref,
                          label="cond broadcast"))
        cases.append(Case([arr(rng, s, "bool"), arr(rng, s, dt), scalar(rng, dt)], ref,
                          label="scalar other"))
        return cases
    return Spec(gen, ALL, "d")


B_I = I + ("bool",)


def _lerp():
    def gen(rng, dt):
        cases = []
        for sa, sb, sw in (((2, 3), (2, 3), (2, 3)), ((2, 3), (3,), (2, 1)), ((), (2,), ())):
            cases.append(Case([arr(rng, sa, dt), arr(rng, sb, dt), arr(rng, sw, dt, "prob")],
                              torch.lerp, label=f"{sa},{sb},{sw}"))
        cases.append(Case([arr(rng, (3,), dt), arr(rng, (3,), dt), 0.3],
                          lambda a, b, w: torch.lerp(a, b, w), label="scalar weight"))
        return cases
    return Spec(gen, F, "d")


# ---- unary -----------------------------------------------------------------------------------
def unary(ref, dtypes=F, grad="d", kind="normal", variants=(), extra=None, **tol):
    """variants: [(attrs, ref)] or a function dt -> such a list."""
    def gen(rng, dt):
        cases = [Case([arr(rng, s, dt, kind)], ref, label=str(s)) for s in unary_shapes(rng)]
        for attrs, vref in (variants(dt) if callable(variants) else variants):
            for s in [rshape(rng, 2), (), (0, 2)]:
                cases.append(Case([arr(rng, s, dt, kind)], vref, attrs, label=str(attrs)))
        if extra:
            cases += extra(rng, dt)
        return cases
    return Spec(gen, dtypes, grad, **tol)


def _special(rng, dt):
    if dt not in F:
        return []
    x = arr(rng, (10,), dt)
    x[[1, 4]] = np.nan
    x[2], x[7] = np.inf, -np.inf
    return [Case([x], None, label="nan/inf")]


def _special_unary(fn):
    def extra(rng, dt):
        return [Case(c.inputs, fn, label=c.label) for c in _special(rng, dt)]
    return unary(fn, ALL, "n", extra=extra)


def _round():
    # round jumps at the halves, so only PyTorch's (zero) gradient applies there.
    halves = lambda rng, dt: [Case([np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4999], NP[dt])],
                                   torch.round, label="half to even", numeric=False)]
    return unary(torch.round, FI, "z", kind="wide", extra=lambda rng, dt: halves(rng, dt)
                 if dt in F else [],
                 variants=lambda dt: [({"decimals": 2}, lambda x: torch.round(x, decimals=2))]
                 if dt in F else [])


def _clamp():
    def gen(rng, dt):
        lo, hi = (-2, 3) if dt in I else (-0.5, 0.75)
        variants = [({"min": lo, "max": hi}, lambda x: torch.clamp(x, min=lo, max=hi)),
                    ({"min": lo}, lambda x: torch.clamp(x, min=lo)),
                    ({"max": hi}, lambda x: torch.clamp(x, max=hi))]
        cases = []
        for attrs, ref in variants:
            for s in unary_shapes(rng)[:6]:
                cases.append(Case([arr(rng, s, dt, "wide")], ref, attrs, label=str(attrs)))
        return cases
    return Spec(gen, FI, "d")


TABLE = {
    # arithmetic
    "add": _arith("add", _add_ref, 0.5, FI + B),
    "sub": _arith("sub", _sub_ref, -1.5, FI),
    "mul": binary(lambda a, b: torch.mul(*ts(a, b)), FI + B,
                  extra=promotion_cases(lambda a, b: torch.mul(*ts(a, b)))),
    "div": _div(),
    "pow": _pow(),
    "maximum": binary(lambda a, b: torch.maximum(*ts(a, b)), FI + B,
                      extra=promotion_cases(lambda a, b: torch.maximum(*ts(a, b)))),
    "minimum": binary(lambda a, b: torch.minimum(*ts(a, b)), FI + B,
                      extra=promotion_cases(lambda a, b: torch.minimum(*ts(a, b)))),
    # comparison and logic
    "eq": _compare(torch.eq),
    "ne": _compare(torch.ne),
    "lt": _compare(torch.lt),
    "le": _compare(torch.le),
    "gt": _compare(torch.gt),
    "ge": _compare(torch.ge),
    "logical_and": _logical(torch.logical_and),
    "logical_or": _logical(torch.logical_or),
    "logical_xor": _logical(torch.logical_xor),
    "logical_not": unary(torch.logical_not, ALL, "n", kind="intlike"),
    "where": _where(),
    # remainder, fmod, atan2, hypot, bitwise ops, lerp
    "remainder": binary(lambda a, b: torch.remainder(*ts(a, b)), FI, kb="nonzero"),
    "fmod": binary(lambda a, b: torch.fmod(*ts(a, b)), FI, kb="nonzero"),
    "atan2": binary(lambda a, b: torch.atan2(*ts(a, b)), ALL, kb="nonzero", scalars=False),
    "hypot": binary(lambda a, b: torch.hypot(*ts(a, b)), F, ka="nonzero", scalars=False),
    "bitwise_and": binary(lambda a, b: torch.bitwise_and(*ts(a, b)), B_I, "n"),
    "bitwise_or": binary(lambda a, b: torch.bitwise_or(*ts(a, b)), B_I, "n"),
    "bitwise_xor": binary(lambda a, b: torch.bitwise_xor(*ts(a, b)), B_I, "n"),
    "bitwise_not": unary(torch.bitwise_not, B_I, "n"),
    "lerp": _lerp(),
    # unary; float functions of int/bool inputs return the default float dtype, as in torch
    "neg": unary(torch.neg, FI),
    "abs": unary(torch.abs, FI, kind="nonzero"),
    "exp": unary(torch.exp, ALL),
    "log": unary(torch.log, ALL, kind="pos"),
    "sqrt": unary(torch.sqrt, ALL, kind="pos"),
    "rsqrt": unary(torch.rsqrt, ALL, kind="pos"),
    "square": unary(torch.square, FI),
    "reciprocal": unary(torch.reciprocal, ALL, kind="nonzero"),
    "sign": unary(torch.sign, ALL, "z", kind="nonzero"),
    "floor": unary(torch.floor, FI, "z", kind="wide"),
    "ceil": unary(torch.ceil, FI, "z", kind="wide"),
    "round": _round(),
    "trunc": unary(torch.trunc, FI, "z", kind="wide"),
    "frac": unary(torch.frac, F, "d", kind="wide"),
    "clamp": _clamp(),
    "isnan": _special_unary(torch.isnan),
    "isinf": _special_unary(torch.isinf),
    "isfinite": _special_unary(torch.isfinite),
    # unary transcendental
    "log1p": unary(torch.log1p, ALL, kind="pos"),
    "expm1": unary(torch.expm1, ALL),
    "log2": unary(torch.log2, ALL, kind="pos"),
    "log10": unary(torch.log10, ALL, kind="pos"),
    "exp2": unary(torch.exp2, ALL),
    "sin": unary(torch.sin, ALL),
    "cos": unary(torch.cos, ALL),
    "tan": unary(torch.tan, ALL, kind="unit"),
    "sinc": unary(torch.sinc, ALL, extra=lambda rng, dt: [
        Case([np.array([0, 1, -2, 3], NP[dt])], torch.sinc, label="zero and integers")]),
    "asin": unary(torch.asin, ALL, kind="unit"),
    "acos": unary(torch.acos, ALL, kind="unit"),
    "atan": unary(torch.atan, ALL),
    "sinh": unary(torch.sinh, ALL),
    "cosh": unary(torch.cosh, ALL),
    "asinh": unary(torch.asinh, ALL),
    "acosh": unary(torch.acosh, ALL, kind="gt1"),
    "atanh": unary(torch.atanh, ALL, kind="unit"),
    "erf": unary(torch.erf, ALL),
    "erfc": unary(torch.erfc, ALL),
    "erfinv": unary(torch.erfinv, ALL, kind="unit", tol32=(1e-4, 1e-5)),
}
