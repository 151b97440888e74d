"""Conformance table: creation ops (zeros, ones, full, zeros_like, ones_like, full_like, arange,
eye, and the random rand, randn and randint)."""
import numpy as np
import torch

from opcheck import ALL, FI, NP, TORCH, Case, F, I, Spec, arr, rshape


def _filled(kind):
    def gen(rng, dt):
        cases = []
        for shape in [(), (0,), rshape(rng, 1), rshape(rng, 3), (2, 0)]:
            attrs = {"shape": list(shape), "dtype": dt}
            value = True if dt == "bool" else (3 if dt in I else -1.25)
            if kind == "zeros":
                ref = lambda s=shape, d=dt: torch.zeros(s, dtype=TORCH[d])
            elif kind == "ones":
                ref = lambda s=shape, d=dt: torch.ones(s, dtype=TORCH[d])
            else:
                attrs["value"] = value
                ref = lambda s=shape, d=dt, v=value: torch.full(s, v, dtype=TORCH[d])
            cases.append(Case([], ref, attrs))
        if dt == "f32" and kind != "full":  # default dtype is f32, as in torch
            cases.append(Case([], lambda: getattr(torch, kind)((2, 3)), {"shape": [2, 3]}))
        return cases
    return Spec(gen, ALL, "n")


def _filled_like(kind):
    def gen(rng, dt):
        cases = []
        for shape in [(), (0, 2), rshape(rng, 2)]:
            x = arr(rng, shape, dt)
            if kind == "full_like":
                v = True if dt == "bool" else (2 if dt in I else 0.5)
                cases.append(Case([x], lambda t, v=v: torch.full_like(t, v), {"value": v}))
            else:
                cases.append(Case([x], getattr(torch, kind)))
        other = "i64" if dt != "i64" else "f64"
        x = arr(rng, (2, 3), dt)
        attrs = {"dtype": other, **({"value": 1} if kind == "full_like" else {})}
        if kind == "full_like":
            ref = lambda t, o=other: torch.full_like(t, 1, dtype=TORCH[o])
        else:
            ref = lambda t, o=other, k=kind: getattr(torch, k)(t, dtype=TORCH[o])
        cases.append(Case([x], ref, attrs, label="dtype attr"))
        return cases
    return Spec(gen, ALL, "n")


def _arange_gen(rng, dt):
    if dt in I:
        combos = [(0, 5, 1), (-3, 7, 2), (5, 0, -1), (2, 2, 1), (0, 10, 3)]
    else:
        combos = [(0.0, 1.0, 0.1), (-1.5, 2.5, 0.5), (3.0, -1.0, -0.75), (0.0, 0.0, 1.0)]
    cases = [Case([], lambda s=s, e=e, st=st: torch.arange(s, e, st, dtype=TORCH[dt]),
                  {"start": s, "end": e, "step": st, "dtype": dt}) for s, e, st in combos]
    if dt == "i64":  # integer arguments without a dtype give i64, as in torch
        cases.append(Case([], lambda: torch.arange(1, 9, 2), {"start": 1, "end": 9, "step": 2}))
    if dt == "f32":  # a float argument without a dtype gives the default float dtype
        cases.append(Case([], lambda: torch.arange(0.5, 3.0, 0.5),
                          {"start": 0.5, "end": 3.0, "step": 0.5}))
    return cases


TORCH_DT = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32, "i64": torch.int64,
            "bool": torch.bool}


def _eye_gen(rng, dt):
    return [Case([], lambda n=n, m=m: torch.eye(n, m if m is not None else n, dtype=TORCH_DT[dt]),
                 {"n": n, **({"m": m} if m is not None else {}), "dtype": dt})
            for n, m in ((3, None), (2, 4), (0, 2))]


# ---- random ----------------------------------------------------------------------------------
def _random_check(kind, dt, shape, low=None, high=None):
    def check(got, case):
        (g,) = got
        assert g.shape == tuple(shape) and g.dtype == np.dtype(NP[dt]), (g.shape, g.dtype)
        if g.size == 0:
            return
        if kind == "rand":
            assert g.min() >= 0 and g.max() < 1
            if g.size >= 10000:
                assert abs(g.mean() - 0.5) < 0.02 and abs(g.std() - 12 ** -0.5) < 0.02
        elif kind == "randn":
            if g.size >= 10000:
                assert abs(g.mean()) < 0.05 and abs(g.std() - 1) < 0.05
        else:
            assert g.min() >= low and g.max() < high
            np.testing.assert_array_equal(g, np.round(g))
            if g.size >= 10000:
                assert set(np.unique(g)) == set(range(low, high))
    return check


def _random(kind):
    def gen(rng, dt):
        cases = []
        for shape in [(), (0, 3), rshape(rng, 2), (100, 100)]:
            attrs = {"shape": list(shape), "dtype": dt, "seed": int(rng.integers(1, 1 << 30))}
            low = high = None
            if kind == "randint":
                low, high = -3, 5
                attrs.update(low=low, high=high)
            cases.append(Case([], attrs=attrs, check=_random_check(kind, dt, shape, low, high)))
        return cases
    return Spec(gen, FI if "int" in kind else F, "n", run=_run_random(kind))


def _run_random(kind):
    """Random ops: generic statistics cases plus determinism of the seed."""
    from opcheck import run_case

    def run(sess, name, spec, dt, rng):
        for case in spec.gen(rng, dt):
            run_case(sess, name, spec, case, dt, rng)
        attrs = {"shape": [50], "dtype": dt, "seed": 1234}
        if kind == "randint":
            attrs.update(low=0, high=1000)
        a = sess.op(name, **attrs).numpy()
        b = sess.op(name, **attrs).numpy()
        c = sess.op(name, **{**attrs, "seed": 4321}).numpy()
        np.testing.assert_array_equal(a, b, err_msg=f"{name}: same seed, different values")
        assert not np.array_equal(a, c), f"{name}: different seeds gave the same values"
    return run


TABLE = {
    "zeros": _filled("zeros"),
    "ones": _filled("ones"),
    "full": _filled("full"),
    "zeros_like": _filled_like("zeros_like"),
    "ones_like": _filled_like("ones_like"),
    "full_like": _filled_like("full_like"),
    "arange": Spec(_arange_gen, FI, "n", tol32=(1e-6, 1e-6)),
    "eye": Spec(_eye_gen, ALL, "n"),
    "rand": _random("rand"),
    "randn": _random("randn"),
    "randint": _random("randint"),
}
