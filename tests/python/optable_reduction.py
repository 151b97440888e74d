"""Conformance table: reductions (sum, mean, max, min, amax, amin, argmax, argmin, var, std,
logsumexp, all, any, prod, norm) and scans (cumsum, cumprod)."""
import numpy as np
import torch

import tensord

from opcheck import ALL, FI, NP, TORCH, Case, F, Spec, arr, rshape
from optable_specs import cases_spec, distinct


def all_dims(fn):
    """fn with dim=None (all dims) spelled as the explicit list torch accepts with keepdim."""
    def f(x, **kw):
        if kw.get("dim", 0) is None or ("dim" not in kw and kw):
            kw["dim"] = list(range(x.dim()))
        return fn(x, **kw)
    return f


def _kw(d=None, keepdim=None, **more):
    out = dict(more)
    if d is not None:
        out["dim"] = d
    if keepdim is not None:
        out["keepdim"] = keepdim
    return out


def reduction(fn, dtypes, grad="d", int_dim=False, lists=True, empty_ok=True, kind="normal",
              extra_attrs=(), **tol):
    """fn(x, **kwargs) with torch's dim/keepdim kwargs. int_dim: torch takes one int dim only."""
    def gen(rng, dt):
        s = rshape(rng, 3, 2, 4)
        make = (lambda shape: distinct(rng, shape, dt)) if kind == "distinct" else \
            (lambda shape: arr(rng, shape, dt, kind))
        dims = [None, 0, -1, 1] + ([[0, 2], [-1, 0]] if lists and not int_dim else [])
        cases = []
        for d in dims:
            for keep in (False, True):
                attrs = _kw(d, keep)
                cases.append(Case([make(s)], lambda x, a=attrs: fn(x, **a), attrs,
                                  label=f"dim={d} keepdim={keep}"))
        cases.append(Case([make(())], lambda x: fn(x), {}, label="0-d"))
        cases.append(Case([make(())], lambda x: fn(x, dim=0), {"dim": 0}, label="0-d dim=0"))
        cases.append(Case([make((1, 4))], lambda x: fn(x, dim=0), {"dim": 0}, label="size-1"))
        if empty_ok:
            cases.append(Case([make((0, 3))], lambda x: fn(x, dim=1), {"dim": 1},
                              label="empty kept"))
            cases.append(Case([make((0, 3))], lambda x: fn(x, dim=0), {"dim": 0},
                              label="empty reduced"))
            cases.append(Case([make((0, 3))], lambda x: fn(x), {}, label="empty all"))
        for attrs in extra_attrs:
            cases.append(Case([make(s)], lambda x, a=attrs: fn(x, **_torch_attrs(a)), attrs,
                              label=str(attrs)))
        return cases
    return Spec(gen, dtypes, grad, **tol)


def _torch_attrs(a):
    return {k: (TORCH[v] if k == "dtype" else v) for k, v in a.items()}


def _mean():
    """mean: float inputs; integer inputs need a float dtype attribute, as in torch."""
    spec = reduction(all_dims(torch.mean), F, tol32=(1e-5, 1e-6), extra_attrs=({"dtype": "f64"},))
    float_gen = spec.gen

    def gen(rng, dt):
        if dt in F:
            return float_gen(rng, dt)
        cases = []
        for c in float_gen(rng, dt):
            if "dtype" in c.attrs:
                continue
            attrs = {**c.attrs, "dtype": "f32"}
            cases.append(Case(c.inputs, lambda x, r=c.ref: r(x.to(torch.float32)), attrs,
                              label=c.label + " dtype=f32"))
        cases.append(Case([arr(rng, (2, 3), dt)], attrs={}, label="int without dtype",
                          error=tensord.DtypeMismatch))
        return cases
    spec.gen = gen
    spec.dtypes = FI
    return spec


def _minmax(fn):
    """max/min: without dim the value; with dim (values, indices)."""
    def gen(rng, dt):
        s = rshape(rng, 3, 2, 4)
        cases = [Case([distinct(rng, s, dt)], fn, label="all"),
                 Case([distinct(rng, (), dt)], fn, label="0-d")]
        for d in (0, -1, 1):
            for keep in (False, True):
                cases.append(Case([distinct(rng, s, dt)],
                                  lambda x, d=d, k=keep: tuple(fn(x, dim=d, keepdim=k)),
                                  {"dim": d, "keepdim": keep}, label=f"dim={d} keep={keep}"))
        cases.append(Case([distinct(rng, (0, 3), dt)], lambda x: tuple(fn(x, dim=1)),
                          {"dim": 1}, label="empty kept"))
        return cases
    return Spec(gen, FI, "d")


def _arg(fn):
    def gen(rng, dt):
        s = rshape(rng, 3, 2, 4)
        cases = [Case([distinct(rng, s, dt)], fn, label="all"),
                 Case([distinct(rng, (), dt)], fn, label="0-d")]
        for d in (0, -1, 1):
            for keep in (False, True):
                cases.append(Case([distinct(rng, s, dt)],
                                  lambda x, d=d, k=keep: fn(x, dim=d, keepdim=k),
                                  {"dim": d, "keepdim": keep}))
        ties = np.array([[1, 3, 3, 0], [2, 2, 2, 2]], NP[dt])  # first occurrence wins
        cases.append(Case([ties], lambda x: fn(x, dim=1), {"dim": 1}, label="ties"))
        return cases
    return Spec(gen, FI, "n")


def _varstd(fn):
    def gen(rng, dt):
        s = rshape(rng, 3, 2, 4)
        cases = []
        for d in (None, 0, -1, [0, 2]):
            for corr in (None, 0, 2):
                for keep in (False, True):
                    attrs = _kw(d, keep)
                    if corr is not None:
                        attrs["correction"] = corr
                    targs = dict(attrs)
                    cases.append(Case([arr(rng, s, dt)], lambda x, a=targs: all_dims(fn)(x, **a),
                                      attrs,
                                      label=str(attrs)))
        cases.append(Case([arr(rng, (1, 3), dt)], lambda x: fn(x, dim=0), {"dim": 0},
                          label="one sample (nan)", grads=False))
        return cases
    return Spec(gen, F, "d", tol32=(1e-4, 1e-5))


def _logsumexp():
    def fn(x, dim=None, keepdim=False):
        if dim is None:
            dim = list(range(x.dim()))
        return torch.logsumexp(x, dim=dim, keepdim=keepdim)
    spec = reduction(fn, F, "d", empty_ok=False, tol32=(1e-5, 1e-5))
    orig = spec.gen

    def gen(rng, dt):
        return orig(rng, dt) + [Case([arr(rng, (2, 5), dt) * 50], lambda x: fn(x, dim=1),
                                     {"dim": 1}, label="large")]
    spec.gen = gen
    return spec


def _allany(fn):
    # torch 1.13 has no all-dims keepdim form; its result is the kept-dims reshape (as sum's).
    def f(x, dim=None, keepdim=False):
        if dim is None:
            return fn(x).reshape([1] * x.dim()) if keepdim else fn(x)
        return fn(x, dim=dim, keepdim=keepdim)
    return reduction(f, ALL, "n", int_dim=True, kind="intlike")


def _norm(rng, dt):
    x = arr(rng, rshape(rng, 3), dt, "nonzero")
    out = []
    for p in (2, 1, 3.0, float("inf")):
        for d in (None, 1, [0, 2]):
            attrs = {"p": p}
            if d is not None:
                attrs["dim"] = d
            out.append(([x], attrs, lambda t, p=p, d=d: torch.norm(t, p=p, dim=d),
                        f"p={p} dim={d}"))
    out.append(([x], {"dim": 1, "keepdim": True}, lambda t: torch.norm(t, dim=1, keepdim=True),
                "keepdim"))
    return out


def _cumulative(fn, kind="normal"):
    def build(rng, dt):
        x = arr(rng, rshape(rng, 3), dt, kind)
        out = [([x], {"dim": d}, lambda t, d=d: fn(t, dim=d), f"dim={d}") for d in (0, 1, -1)]
        out.append(([x], {"dim": 1, "dtype": "f64"}, lambda t: fn(t, dim=1, dtype=torch.float64),
                    "dtype f64"))
        out.append(([arr(rng, (), dt, kind)], {"dim": 0}, lambda t: fn(t, dim=0), "0-d"))
        out.append(([arr(rng, (0, 3), dt, kind)], {"dim": 1}, lambda t: fn(t, dim=1), "empty"))
        return out
    return cases_spec(build, ALL, "d", tol32=(1e-5, 1e-5))


TABLE = {
    "sum": reduction(all_dims(torch.sum), ALL, kind="intlike", tol32=(1e-5, 1e-5),
                     extra_attrs=({"dtype": "f64"},)),
    "mean": _mean(),
    "max": _minmax(torch.max),
    "min": _minmax(torch.min),
    "amax": reduction(torch.amax, FI, kind="distinct", empty_ok=False),
    "amin": reduction(torch.amin, FI, kind="distinct", empty_ok=False),
    "argmax": _arg(torch.argmax),
    "argmin": _arg(torch.argmin),
    "var": _varstd(torch.var),
    "std": _varstd(torch.std),
    "logsumexp": _logsumexp(),
    "all": _allany(torch.all),
    "any": _allany(torch.any),
    "prod": reduction(lambda x, **kw: torch.prod(x) if "dim" not in kw else
                      torch.prod(x, kw["dim"], keepdim=kw.get("keepdim", False)), ALL,
                      lists=False, kind="nonzero", tol32=(1e-5, 1e-5)),
    "norm": cases_spec(_norm, F, "d", tol32=(1e-5, 1e-5)),
    # scans
    "cumsum": _cumulative(torch.cumsum),
    "cumprod": _cumulative(torch.cumprod, "nonzero"),
}
