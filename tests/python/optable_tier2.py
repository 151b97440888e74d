"""Conformance table, part 4: tier-2 ops of OPS.md.
Names, inputs and attributes follow PyTorch, as every tensord op does."""
import numpy as np
import torch
import torch.nn.functional as TF

from opcheck import ALL, FI, I, NP, Case, F, Spec, arr, rshape, unary_shapes
from optable_elementwise import binary, ts, unary
from optable_nn import spec_of
from optable_tensor import cases_spec, distinct, reduction

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


def _flip(rng, dt):
    x = arr(rng, rshape(rng, 3), dt)
    return [([x], {"dims": d}, lambda t, d=d: torch.flip(t, d), str(d))
            for d in ([0], [1, 2], [-1], [])]


def _roll(rng, dt):
    x = arr(rng, (3, 4), dt)
    return [([x], {"shifts": 1, "dims": 0}, lambda t: torch.roll(t, 1, 0), "1 on 0"),
            ([x], {"shifts": [-2, 5], "dims": [0, 1]}, lambda t: torch.roll(t, [-2, 5], [0, 1]),
             "two dims"),
            ([x], {"shifts": 3}, lambda t: torch.roll(t, 3), "flattened")]


def _repeat(rng, dt):
    x = arr(rng, (2, 3), dt)
    return [([x], {"repeats": r}, lambda t, r=r: t.repeat(*r), str(r))
            for r in ([2, 1], [1, 3], [2, 2, 1], [1, 0])]


def _tile(rng, dt):
    x = arr(rng, (2, 3), dt)
    return [([x], {"dims": r}, lambda t, r=r: torch.tile(t, r), str(r))
            for r in ([2], [2, 1], [3, 1, 2])]


def _tri(fn):
    def build(rng, dt):
        x = arr(rng, (4, 5), dt)
        out = [([x], {"diagonal": k}, lambda t, k=k: fn(t, k), f"k={k}") for k in (0, 1, -2, 7)]
        out.append(([arr(rng, (2, 3, 3), dt)], {}, fn, "batched"))
        return out
    return build


def _sort(rng, dt):
    x = distinct(rng, rshape(rng, 2, 2, 5), dt)
    return [([x], {"dim": d, "descending": desc},
             lambda t, d=d, s=desc: tuple(torch.sort(t, dim=d, descending=s)), f"{d} {desc}")
            for d in (-1, 0) for desc in (False, True)]


def _argsort(rng, dt):
    x = distinct(rng, rshape(rng, 2, 2, 5), dt)
    return [([x], {"dim": d, "descending": desc},
             lambda t, d=d, s=desc: torch.argsort(t, dim=d, descending=s), f"{d} {desc}")
            for d in (-1, 0) for desc in (False, True)]


def _topk(rng, dt):
    x = distinct(rng, (3, 6), dt)
    return [([x], {"k": k, "dim": d, "largest": lg},
             lambda t, k=k, d=d, lg=lg: tuple(torch.topk(t, k, dim=d, largest=lg)),
             f"k={k} dim={d} largest={lg}")
            for k, d in ((2, -1), (1, 0), (6, 1)) for lg in (True, False)]


def _linalg_small(rng, dt):
    n, m, k = 3, 4, 2

    def es(eq, *shapes):
        return ([arr(rng, s, dt) for s in shapes], {"equation": eq},
                lambda *t, eq=eq: torch.einsum(eq, *t), eq)

    return {
        "dot": [([arr(rng, (n,), dt), arr(rng, (n,), dt)], {}, torch.dot),
                ([arr(rng, (0,), dt), arr(rng, (0,), dt)], {}, torch.dot, "empty")],
        "outer": [([arr(rng, (n,), dt), arr(rng, (m,), dt)], {}, torch.outer),
                  ([arr(rng, (0,), dt), arr(rng, (m,), dt)], {}, torch.outer, "empty")],
        "addmm": [([arr(rng, (n, m), dt), arr(rng, (n, k), dt), arr(rng, (k, m), dt)], {},
                   torch.addmm),
                  ([arr(rng, (m,), dt), arr(rng, (n, k), dt), arr(rng, (k, m), dt)],
                   {"beta": 0.5, "alpha": 2.0},
                   lambda c, a, b: torch.addmm(c, a, b, beta=0.5, alpha=2.0)),
                  ([arr(rng, (n, 1), dt), arr(rng, (n, k), dt), arr(rng, (k, m), dt)],
                   {"beta": 0.0}, lambda c, a, b: torch.addmm(c, a, b, beta=0.0), "beta 0"),
                  ([arr(rng, (n, m), dt), arr(rng, (n, 0), dt), arr(rng, (0, m), dt)], {},
                   torch.addmm, "empty inner dim")],
        "baddbmm": [([arr(rng, (2, n, m), dt), arr(rng, (2, n, k), dt), arr(rng, (2, k, m), dt)],
                     {}, torch.baddbmm),
                    ([arr(rng, (n, 1), dt), arr(rng, (2, n, k), dt), arr(rng, (2, k, m), dt)],
                     {"beta": -1.0, "alpha": 0.5},
                     lambda c, a, b: torch.baddbmm(c, a, b, beta=-1.0, alpha=0.5), "broadcast")],
        "trace": [([arr(rng, (n, m), dt)], {}, torch.trace),
                  ([arr(rng, (m, m), dt)], {}, torch.trace, "square"),
                  ([arr(rng, (0, m), dt)], {}, torch.trace, "empty")],
        "diag": [([arr(rng, (n,), dt)], {}, torch.diag),
                 ([arr(rng, (n,), dt)], {"diagonal": -2}, lambda t: torch.diag(t, -2), "1-d k=-2"),
                 ([arr(rng, (n, m), dt)], {"diagonal": 1}, lambda t: torch.diag(t, 1)),
                 ([arr(rng, (n, m), dt)], {"diagonal": -2}, lambda t: torch.diag(t, -2),
                  "2-d k=-2"),
                 ([arr(rng, (n, m), dt)], {"diagonal": -3}, lambda t: torch.diag(t, -3),
                  "past the matrix")],
        "diagonal": [([arr(rng, (n, m), dt)], {}, torch.diagonal),
                     ([arr(rng, (2, n, m), dt)], {"offset": -1, "dim1": 1, "dim2": 2},
                      lambda t: torch.diagonal(t, -1, 1, 2)),
                     ([arr(rng, (2, n, m), dt)], {"offset": 2, "dim1": -1, "dim2": 0},
                      lambda t: torch.diagonal(t, 2, -1, 0), "negative dims"),
                     ([arr(rng, (n, m), dt)], {"offset": 5},
                      lambda t: torch.diagonal(t, 5), "past the matrix")],
        "einsum": [([arr(rng, (n, k), dt), arr(rng, (k, m), dt)], {"equation": "ij,jk->ik"},
                    lambda a, b: torch.einsum("ij,jk->ik", a, b)),
                   ([arr(rng, (2, n, k), dt)], {"equation": "bij->bji"},
                    lambda a: torch.einsum("bij->bji", a)),
                   es("bij,bjk->bik", (2, n, k), (2, k, m)),
                   es("ii->", (n, n)),
                   es("ii->i", (n, n)),
                   es("i,j->ij", (n,), (m,)),
                   es("ij->", (n, m)),
                   es("ij,jk", (n, k), (k, m)),
                   es("...ij,...jk->...ik", (2, n, k), (k, m)),
                   es("bhqd,bhkd->bhqk", (2, 2, n, k), (2, 2, m, k)),
                   es("ij,jk,kl->il", (n, k), (k, m), (m, 2)),
                   es("ij,ij->ij", (1, m), (n, m))],
    }


def _linalg(name):
    return cases_spec(lambda rng, dt: [(*c, "") for c in _linalg_small(rng, dt)[name]], F, "d",
                      tol32=(1e-4, 1e-5))


def _losses(fn, kx="normal", kt="normal", reductions=("mean", "sum", "none"), variants=()):
    """variants: extra attribute dicts (torch keyword names), each run with reduction sum."""
    def build(rng, dt):
        out = []
        for red in reductions:
            s = rshape(rng, 2)
            out.append(([arr(rng, s, dt, kx), arr(rng, s, dt, kt)], {"reduction": red},
                        lambda x, t, r=red: fn(x, t, reduction=r), red))
        for extra in variants:
            s = rshape(rng, 2)
            attrs = {"reduction": "sum", **extra}
            out.append(([arr(rng, s, dt, kx), arr(rng, s, dt, kt)], attrs,
                        lambda x, t, a=attrs: fn(x, t, **a), str(extra)))
        return out
    return spec_of(build, tol32=(2e-5, 1e-6))


def _cosine_similarity(rng, dt):
    return [([arr(rng, (3, 4), dt), arr(rng, (3, 4), dt)], {}, TF.cosine_similarity, "dim 1"),
            ([arr(rng, (2, 3), dt), np.zeros((2, 3), NP[dt])], {"eps": 1e-6},
             lambda a, b: TF.cosine_similarity(a, b, eps=1e-6), "zero vector, eps"),
            ([arr(rng, (3, 4), dt), arr(rng, (4,), dt)], {"dim": -1},
             lambda a, b: TF.cosine_similarity(a, b, dim=-1), "broadcast")]


def _eye_gen(rng, dt):
    return [Case([], lambda n=n, m=m: torch.eye(n, m if m is not None else n, dtype=TORCH_DT[dt]),
                 {"n": n, **({"m": m} if m is not None else {}), "dtype": dt})
            for n, m in ((3, None), (2, 4), (0, 2))]


def _index_add(rng, dt):
    x = arr(rng, (4, 3), dt)
    out = []
    for d, idx, alpha in ((0, [3, 0, 3], None), (1, [2, 2], 2.0), (-1, [], None), (0, [1], -0.5)):
        index = np.array(idx, np.int64)
        src_shape = (len(idx), 3) if d == 0 else (4, len(idx))
        a = alpha if dt in F or alpha is None else int(alpha)
        attrs = {"dim": d, **({} if a is None else {"alpha": a})}
        out.append(([x, index, arr(rng, src_shape, dt)], attrs,
                    lambda t, i, s, d=d, a=a: torch.index_add(t, d, i, s, **(
                        {} if a is None else {"alpha": a})), f"dim={d} {idx} alpha={a}"))
    return out


def _scatter(accumulate):
    def build(rng, dt):
        x = arr(rng, (4, 5), dt)
        out = []
        for d, shape in ((0, (3, 5)), (1, (4, 2)), (-1, (2, 3)), (0, (0, 5))):
            n = x.shape[d]
            if accumulate:
                index = rng.integers(0, n, size=shape)
            else:  # distinct targets per line, so the result is deterministic
                index = np.stack([rng.permutation(n)[:shape[d]] for _ in
                                  range(shape[1 - d % 2])], axis=1 - d % 2) if shape[d] else \
                    np.zeros(shape, np.int64)
            index = index.astype(np.int64)
            fn = torch.scatter_add if accumulate else torch.scatter
            out.append(([x, index, arr(rng, shape, dt)], {"dim": d},
                        lambda t, i, s, d=d, fn=fn: fn(t, d, i, s), f"dim={d} {shape}"))
        return out
    return build


def _masked_select(rng, dt):
    s = rshape(rng, 2)
    return [([arr(rng, s, dt), arr(rng, ms, "bool")], {}, torch.masked_select, f"mask {ms}")
            for ms in (s, s[1:], (), (1, s[1]))] + \
        [([arr(rng, (0, 3), dt), arr(rng, (3,), "bool")], {}, torch.masked_select, "empty")]


def _nonzero(rng, dt):
    return [([arr(rng, s, dt, "intlike")], {}, torch.nonzero, str(s))
            for s in (rshape(rng, 2), (5,), (), (0, 3), rshape(rng, 3))]


def _pad(rng, dt):
    out = []
    x3 = arr(rng, (2, 3, 5), dt)
    x4 = arr(rng, (1, 2, 4, 5), dt)
    for mode in ("reflect", "replicate", "circular"):
        out.append(([x3], {"pad": [1, 2], "mode": mode},
                    lambda t, m=mode: TF.pad(t, [1, 2], mode=m), f"{mode} 1 dim"))
        out.append(([x4], {"pad": [1, 1, 2, 0], "mode": mode},
                    lambda t, m=mode: TF.pad(t, [1, 1, 2, 0], mode=m), f"{mode} 2 dims"))
    for pad, value in (([1, 2], None), ([0, 1, 2, 0, 1, 1], 1.5), ([-1, 2], None),
                       ([2, -3, 0, 0], -0.5)):
        attrs = {"pad": pad, **({} if value is None else {"value": value})}
        out.append(([x3], attrs, lambda t, p=pad, v=value: TF.pad(t, p, value=v or 0.0),
                    f"constant {pad} {value}"))
    out.append(([arr(rng, (), dt)], {"pad": []}, lambda t: TF.pad(t, []), "0-d, no pad"))
    return out


TORCH_DT = {"f32": torch.float32, "f64": torch.float64, "i32": torch.int32, "i64": torch.int64,
            "bool": torch.bool}


def _act(fn, kind="normal", variants=()):
    return unary(fn, F, "d", kind=kind, variants=variants)


def _prelu(rng, dt):
    # weight of one element or of C = dim 1 elements; inputs away from the kink at 0
    return [Case([arr(rng, s, dt, "nonzero"), arr(rng, (c,), dt)], TF.prelu, label=f"{s} w{c}")
            for s, c in (((2, 3, 4), 3), ((2, 3), 3), ((4, 5), 1), ((2, 3, 2, 2), 1))]


def _dim_act(fn):
    def gen(rng, dt):
        return [Case([arr(rng, s, dt)], lambda x, d=d: fn(x, dim=d), {"dim": d}, label=f"{s} {d}")
                for s in ((2, 4), (4, 2, 4), (6,)) for d in (-1, 0)]
    return Spec(gen, F, "d")


TABLE = {
    # elementwise unary math
    "log1p": unary(torch.log1p, ALL, kind="pos"),
    "expm1": unary(torch.expm1, ALL),
    "log2": unary(torch.log2, ALL, kind="pos"),
    "log10": unary(torch.log10, ALL, kind="pos"),
    "exp2": unary(torch.exp2, ALL),
    "sin": unary(torch.sin, ALL),
    "cos": unary(torch.cos, ALL),
    "tan": unary(torch.tan, ALL, kind="unit"),
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
    "lerp": _lerp(),
    # elementwise binary
    "remainder": binary(lambda a, b: torch.remainder(*ts(a, b)), FI, kb="nonzero"),
    "fmod": binary(lambda a, b: torch.fmod(*ts(a, b)), FI, kb="nonzero"),
    "atan2": binary(lambda a, b: torch.atan2(*ts(a, b)), ALL, kb="nonzero", scalars=False),
    "hypot": binary(lambda a, b: torch.hypot(*ts(a, b)), F, ka="nonzero", scalars=False),
    "bitwise_and": binary(lambda a, b: torch.bitwise_and(*ts(a, b)), B_I, "n"),
    "bitwise_or": binary(lambda a, b: torch.bitwise_or(*ts(a, b)), B_I, "n"),
    "bitwise_xor": binary(lambda a, b: torch.bitwise_xor(*ts(a, b)), B_I, "n"),
    "bitwise_not": unary(torch.bitwise_not, B_I, "n"),
    # activations
    "relu6": _act(TF.relu6, "wide"),
    "selu": _act(TF.selu, "nonzero"),
    "celu": _act(TF.celu, "nonzero", [({"alpha": 0.5}, lambda x: TF.celu(x, alpha=0.5))]),
    "mish": _act(TF.mish),
    "softsign": _act(TF.softsign),
    "hardsigmoid": _act(TF.hardsigmoid, "wide"),
    "hardswish": _act(TF.hardswish, "wide"),
    "hardtanh": _act(TF.hardtanh, "wide", [({"min_val": -0.5, "max_val": 2.0},
                                            lambda x: TF.hardtanh(x, -0.5, 2.0))]),
    "logsigmoid": _act(TF.logsigmoid),
    "tanhshrink": _act(TF.tanhshrink),
    "softshrink": _act(TF.softshrink, "wide", [({"lambd": 1.0},
                                                lambda x: TF.softshrink(x, 1.0))]),
    "hardshrink": _act(TF.hardshrink, "wide", [({"lambd": 1.0},
                                                lambda x: TF.hardshrink(x, 1.0))]),
    "threshold": Spec(lambda rng, dt: [
        Case([arr(rng, s, dt, "wide")], lambda x: TF.threshold(x, 0.1, -2.0),
             {"threshold": 0.1, "value": -2.0}, label=str(s)) for s in unary_shapes(rng)], F, "d"),
    "glu": _dim_act(TF.glu),
    "prelu": Spec(_prelu, F, "d"),
    "softmin": _dim_act(TF.softmin),
    # reductions and scans
    "prod": reduction(lambda x, **kw: torch.prod(x) if "dim" not in kw else
                      torch.prod(x, kw["dim"], keepdim=kw.get("keepdim", False)), ALL,
                      lists=False, kind="nonzero", tol32=(1e-5, 1e-5)),
    "norm": cases_spec(_norm, F, "d", tol32=(1e-5, 1e-5)),
    "cumsum": _cumulative(torch.cumsum),
    "cumprod": _cumulative(torch.cumprod, "nonzero"),
    # shape
    "flip": cases_spec(_flip),
    "roll": cases_spec(_roll),
    "repeat": cases_spec(_repeat),
    "tile": cases_spec(_tile),
    "tril": cases_spec(_tri(torch.tril)),
    "triu": cases_spec(_tri(torch.triu)),
    "sort": cases_spec(_sort, FI),
    "argsort": cases_spec(_argsort, FI, "n"),
    "topk": cases_spec(_topk, FI),
    "eye": Spec(_eye_gen, ALL, "n"),
    "index_add": cases_spec(_index_add, FI),
    "scatter": cases_spec(_scatter(False), FI),
    "scatter_add": cases_spec(_scatter(True), FI),
    "masked_select": cases_spec(_masked_select),
    "nonzero": cases_spec(_nonzero, grad="n"),
    "pad": cases_spec(_pad, F),
    # linear algebra
    **{name: _linalg(name) for name in ("dot", "outer", "addmm", "baddbmm", "trace", "diag",
                                        "diagonal", "einsum")},
    # losses
    "smooth_l1_loss": _losses(TF.smooth_l1_loss, variants=({"beta": 0.5}, {"beta": 2.0})),
    "huber_loss": _losses(TF.huber_loss, variants=({"delta": 0.5}, {"delta": 2.0})),
    "kl_div": _losses(TF.kl_div, "normal", "prob", ("sum", "none", "batchmean"),
                      variants=({"log_target": True},)),
    "cosine_similarity": spec_of(_cosine_similarity, tol32=(1e-5, 1e-6)),
}
