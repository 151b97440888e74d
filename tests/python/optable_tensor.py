"""Conformance table, part 2: reductions, shape and indexing, linear algebra, neural-network
ops and losses. See optable_elementwise.py for the entry format."""
import numpy as np
import torch
import torch.nn.functional as TF

import tensord

from opcheck import (ALL, FI, NP, TORCH, Case, F, I, Spec, arr, rshape,
                     unary_shapes)


def distinct(rng, shape, dt):
    """Values without ties (so argmax/max indices are unambiguous)."""
    n = int(np.prod(shape, dtype=np.int64))
    vals = rng.permutation(n).astype(np.float64) - n // 2
    if dt in F:
        vals = vals + rng.uniform(-0.3, 0.3, n)
    return vals.reshape(shape).astype(NP[dt])


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


# ---- reductions ------------------------------------------------------------------------------
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


# ---- shape and indexing ----------------------------------------------------------------------
def cases_spec(build, dtypes=ALL, grad="d", **tol):
    """Spec from build(rng, dt) -> [(inputs, attrs, ref, label)]."""
    def gen(rng, dt):
        out = []
        for item in build(rng, dt):
            inputs, attrs, ref = item[:3]
            out.append(Case(inputs, ref, attrs, label=item[3] if len(item) > 3 else ""))
        return out
    return Spec(gen, dtypes, grad, **tol)


def _reshape(rng, dt):
    x = arr(rng, (2, 3, 4), dt)
    shapes = [[4, 6], [-1], [2, -1, 2], [24, 1], [1, 2, 1, 12]]
    out = [([x], {"shape": s}, lambda t, s=s: t.reshape(s), str(s)) for s in shapes]
    out.append(([arr(rng, (), dt)], {"shape": [1, 1]}, lambda t: t.reshape(1, 1), "0-d"))
    out.append(([arr(rng, (1,), dt)], {"shape": []}, lambda t: t.reshape(()), "to 0-d"))
    out.append(([arr(rng, (0, 3), dt)], {"shape": [3, 0]}, lambda t: t.reshape(3, 0), "empty"))
    out.append(([arr(rng, (0, 3), dt)], {"shape": [-1, 3]}, lambda t: t.reshape(-1, 3),
                "empty -1"))
    return out


def _flatten(rng, dt):
    x = arr(rng, (2, 3, 4, 2), dt)
    out = [([x], {}, torch.flatten, "default")]
    for s, e in [(1, -1), (0, 1), (1, 2), (-2, -1), (2, 2)]:
        out.append(([x], {"start_dim": s, "end_dim": e},
                    lambda t, s=s, e=e: torch.flatten(t, s, e), f"{s}..{e}"))
    out.append(([arr(rng, (), dt)], {}, torch.flatten, "0-d"))
    out.append(([arr(rng, (2, 0, 3), dt)], {"start_dim": 1}, lambda t: torch.flatten(t, 1),
                "empty"))
    return out


def _squeeze(rng, dt):
    x = arr(rng, (1, 3, 1, 2), dt)
    out = [([x], {}, torch.squeeze, "all")]
    for d in (0, 2, -2, 1):
        out.append(([x], {"dim": d}, lambda t, d=d: torch.squeeze(t, d), f"dim={d}"))
    out.append(([arr(rng, (), dt)], {}, torch.squeeze, "0-d"))
    out.append(([arr(rng, (0, 1), dt)], {"dim": 1}, lambda t: torch.squeeze(t, 1), "empty"))
    return out


def _unsqueeze(rng, dt):
    x = arr(rng, rshape(rng, 2), dt)
    out = [([x], {"dim": d}, lambda t, d=d: torch.unsqueeze(t, d), f"dim={d}")
           for d in (0, 1, 2, -1, -3)]
    out.append(([arr(rng, (), dt)], {"dim": 0}, lambda t: torch.unsqueeze(t, 0), "0-d"))
    out.append(([arr(rng, (0,), dt)], {"dim": -1}, lambda t: torch.unsqueeze(t, -1), "empty"))
    return out


def _permute(rng, dt):
    x = arr(rng, rshape(rng, 4), dt)
    out = []
    for dims in ([0, 1, 2, 3], [3, 2, 1, 0], [1, 3, 0, 2], [-1, 0, -2, 1]):
        out.append(([x], {"dims": dims}, lambda t, d=dims: torch.permute(t, d), str(dims)))
    out.append(([arr(rng, (), dt)], {"dims": []}, lambda t: torch.permute(t, []), "0-d"))
    out.append(([arr(rng, (2, 0, 3), dt)], {"dims": [2, 0, 1]}, lambda t: t.permute(2, 0, 1),
                "empty"))
    return out


def _transpose(rng, dt):
    x = arr(rng, rshape(rng, 3), dt)
    out = [([x], {"dim0": a, "dim1": b}, lambda t, a=a, b=b: torch.transpose(t, a, b),
            f"{a},{b}") for a, b in ((0, 1), (0, 2), (-1, 1), (1, 1))]
    out.append(([arr(rng, (0, 2), dt)], {"dim0": 0, "dim1": 1}, lambda t: t.transpose(0, 1),
                "empty"))
    return out


def _expand(rng, dt):
    out = []
    for shape, size in [((3, 1), [3, 4]), ((1, 2), [5, -1]), ((2,), [3, 2]), ((), [2, 3]),
                        ((1, 1), [2, 1, 4]), ((2, 3), [2, 3]), ((1,), [0])]:
        out.append(([arr(rng, shape, dt)], {"size": size}, lambda t, s=size: t.expand(*s),
                    f"{shape}->{size}"))
    return out


def _identity_like(fn):
    def build(rng, dt):
        return [([arr(rng, s, dt)], {}, fn, str(s)) for s in unary_shapes(rng)]
    return build


def _cat(rng, dt):
    a, b = rshape(rng, 2), rshape(rng, 1)[0]
    return [
        ([arr(rng, (2, a[1]), dt), arr(rng, (b, a[1]), dt)], {"dim": 0},
         lambda *t: torch.cat(t, 0), "dim 0"),
        ([arr(rng, (a[0], 2), dt), arr(rng, (a[0], 3), dt), arr(rng, (a[0], 1), dt)],
         {"dim": -1}, lambda *t: torch.cat(t, -1), "three, dim -1"),
        ([arr(rng, (2, 3), dt)], {"dim": 1}, lambda *t: torch.cat(t, 1), "one input"),
        ([arr(rng, (0, 3), dt), arr(rng, (2, 3), dt)], {"dim": 0}, lambda *t: torch.cat(t, 0),
         "with empty"),
        ([arr(rng, (2, 1, 3), dt), arr(rng, (3, 1, 3), dt)], {}, lambda *t: torch.cat(t),
         "default dim"),
    ]


def _stack(rng, dt):
    s = rshape(rng, 2)
    out = []
    for d in (0, 1, 2, -1):
        xs = [arr(rng, s, dt) for _ in range(3)]
        out.append((xs, {"dim": d}, lambda *t, d=d: torch.stack(t, d), f"dim={d}"))
    out.append(([arr(rng, (), dt), arr(rng, (), dt)], {}, lambda *t: torch.stack(t), "0-d"))
    out.append(([arr(rng, (0, 2), dt)] * 2, {"dim": 1}, lambda *t: torch.stack(t, 1), "empty"))
    return out


def _split(rng, dt):
    x = arr(rng, (5, 4), dt)
    return [
        ([x], {"split_size": 2}, lambda t: torch.split(t, 2), "size 2"),
        ([x], {"split_size": 2, "dim": 1}, lambda t: torch.split(t, 2, 1), "dim 1"),
        ([x], {"split_size": [1, 3, 1]}, lambda t: torch.split(t, [1, 3, 1]), "sections"),
        ([x], {"split_size": [4, 0], "dim": -1}, lambda t: torch.split(t, [4, 0], -1),
         "empty section"),
        ([x], {"split_size": 7}, lambda t: torch.split(t, 7), "larger than dim"),
    ]


def _chunk(rng, dt):
    x = arr(rng, (5, 6), dt)
    return [([x], {"chunks": c, "dim": d}, lambda t, c=c, d=d: torch.chunk(t, c, d),
             f"{c} chunks dim {d}") for c, d in ((2, 0), (3, 1), (5, 0), (4, -1), (1, 0))]


def _narrow(rng, dt):
    x = arr(rng, (4, 5), dt)
    return [([x], {"dim": d, "start": s, "length": n},
             lambda t, d=d, s=s, n=n: torch.narrow(t, d, s, n), f"{d},{s},{n}")
            for d, s, n in ((0, 1, 2), (1, 0, 5), (-1, 2, 0), (1, -3, 2))]


def _slice(rng, dt):
    x = arr(rng, (6, 7), dt)

    def ref(d, s, e, st):
        def f(t):
            idx = [slice(None)] * t.dim()
            idx[d] = slice(s, e, st)
            return t[tuple(idx)]
        return f
    out = []
    for d, s, e, st in ((0, 1, 4, 1), (1, 0, 7, 2), (1, -5, -1, 1), (0, 2, 100, 3),
                        (1, 5, 2, 1), (-1, 1, 6, 4), (0, -100, 3, 1)):
        out.append(([x], {"dim": d, "start": s, "end": e, "step": st}, ref(d, s, e, st),
                    f"{d}:{s}:{e}:{st}"))
    return out


def _index_select(rng, dt):
    x = arr(rng, (4, 3, 2), dt)
    out = []
    for d, idx in ((0, [3, 0, 0, 2]), (1, [2]), (-1, [1, 0, 1]), (0, [])):
        index = np.array(idx, np.int64)
        out.append(([x, index], {"dim": d},
                    lambda t, i, d=d: torch.index_select(t, d, i), f"dim={d} {idx}"))
    out.append(([x, np.array([2, 1], np.int32)], {"dim": 0},
                lambda t, i: torch.index_select(t, 0, i.long()), "i32 index"))
    return out


def _gather(rng, dt):
    x = arr(rng, (3, 4), dt)
    out = []
    for d, shape in ((0, (2, 4)), (1, (3, 2)), (-1, (1, 5)), (0, (0, 4))):
        size = x.shape[d]
        index = rng.integers(0, size, size=shape).astype(np.int64)
        out.append(([x, index], {"dim": d}, lambda t, i, d=d: torch.gather(t, d, i),
                    f"dim={d} {shape}"))
    return out


def _masked_fill(rng, dt):
    value = True if dt == "bool" else (7 if dt in I else -2.5)
    wire = 1.0 if dt == "bool" else value
    s = rshape(rng, 2)
    out = []
    for ms in (s, s[1:], (), (1, s[1])):
        mask = arr(rng, ms, "bool")
        out.append(([arr(rng, s, dt), mask], {"value": wire},
                    lambda t, m: t.masked_fill(m, value), f"mask {ms}"))
    return out


def _one_hot(rng, dt):
    idx = rng.integers(0, 5, size=(3, 2)).astype(NP[dt])
    return [([idx], {"num_classes": 6}, lambda t: TF.one_hot(t.long(), 6), "6 classes"),
            ([idx], {}, lambda t: TF.one_hot(t.long()), "inferred"),
            ([np.array(2, NP[dt])], {"num_classes": 3}, lambda t: TF.one_hot(t.long(), 3), "0-d"),
            ([np.zeros((0,), NP[dt])], {"num_classes": 2}, lambda t: TF.one_hot(t.long(), 2),
             "empty")]


def _to_dtype(rng, dt):
    out = []
    for target in ("f32", "f64", "i32", "i64", "bool"):
        x = arr(rng, rshape(rng, 2), dt, "wide")
        out.append(([x], {"dtype": target}, lambda t, g=target: t.to(TORCH[g]), f"to {target}"))
    out.append(([arr(rng, (), dt)], {"dtype": "f64"}, lambda t: t.to(torch.float64), "0-d"))
    return out


def _detach(rng, dt):
    return [([arr(rng, s, dt)], {}, lambda t: t.detach(), str(s)) for s in unary_shapes(rng)]


def _to_device(rng, dt):
    return [([arr(rng, s, dt)], {"device": "cpu"}, lambda t: t.to("cpu"), str(s))
            for s in unary_shapes(rng)[:5]]


def _run_assign(sess, name, spec, dt, rng):
    """assign(target, value) writes value (broadcast, cast) into target in place."""
    for ts_, vs in (((2, 3), (2, 3)), ((2, 3), (3,)), ((2, 3), ()), ((), ())):
        target = arr(rng, ts_, dt)
        value = arr(rng, vs, dt)
        t = sess.tensor(target)
        out = sess.op("assign", t, value)
        want = np.broadcast_to(value, ts_).astype(NP[dt])
        np.testing.assert_array_equal(t.numpy(), want, err_msg=f"assign {ts_} <- {vs}")
        for o in (out if isinstance(out, tuple) else (out,)):
            assert o.shape == ts_
    # A view shares storage: writing through the base shows through the view (torch views).
    base = sess.tensor(arr(rng, (2, 3), dt))
    view = sess.op("reshape", base, shape=[6])
    value = arr(rng, (2, 3), dt)
    sess.op("assign", base, value)
    np.testing.assert_array_equal(view.numpy(), value.reshape(6))


TABLE = {
    # reductions
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
    # shape and indexing
    "reshape": cases_spec(_reshape),
    "flatten": cases_spec(_flatten),
    "squeeze": cases_spec(_squeeze),
    "unsqueeze": cases_spec(_unsqueeze),
    "permute": cases_spec(_permute),
    "transpose": cases_spec(_transpose),
    "expand": cases_spec(_expand),
    "contiguous": cases_spec(_identity_like(lambda t: t.contiguous())),
    "clone": cases_spec(_identity_like(torch.clone)),
    "cat": cases_spec(_cat),
    "stack": cases_spec(_stack),
    "split": cases_spec(_split),
    "chunk": cases_spec(_chunk),
    "narrow": cases_spec(_narrow),
    "slice": cases_spec(_slice),
    "index_select": cases_spec(_index_select),
    "gather": cases_spec(_gather),
    "masked_fill": cases_spec(_masked_fill),
    "one_hot": cases_spec(_one_hot, I, "n"),
    "to_dtype": cases_spec(_to_dtype),
    "detach": cases_spec(_detach, grad="n"),
    "to_device": cases_spec(_to_device),
    "assign": Spec(None, ALL, "n", run=_run_assign),
}
