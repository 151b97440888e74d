"""Conformance table: indexing (index_select, gather, masked_fill, one_hot, index_add, scatter,
scatter_add, masked_select, nonzero) and sorting (sort, argsort, topk)."""
import numpy as np
import torch
import torch.nn.functional as TF

from opcheck import FI, F, I, NP, arr, rshape
from optable_specs import cases_spec, distinct


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
            if not accumulate:
                # torch's scatter(input, dim, index, value): a number written at every indexed
                # place, converted to the input's dtype (a float into ints truncates).
                for value in ((-2.5, 3) if dt in F else (7, -2.7)):
                    out.append(([x, index, value], {"dim": d},
                                lambda t, i, v, d=d: torch.scatter(t, d, i, v),
                                f"dim={d} {shape} value={value}"))
        return out
    return build


def _masked_select(rng, dt):
    s = rshape(rng, 2)
    return [([arr(rng, s, dt), arr(rng, ms, "bool")], {}, torch.masked_select, f"mask {ms}")
            for ms in (s, s[1:], (), (1, s[1]))] + \
        [([arr(rng, (0, 3), dt), arr(rng, (3,), "bool")], {}, torch.masked_select, "empty")]


def _nonzero(rng, dt):
    shapes = (rshape(rng, 2), (5,), (), (0, 3), rshape(rng, 3))
    # as_tuple=True: one 1-d index tensor per dim (one for a 0-d input), torch's tuple.
    return [([arr(rng, s, dt, "intlike")], {}, torch.nonzero, str(s)) for s in shapes] + \
        [([arr(rng, s, dt, "intlike")], {"as_tuple": True},
          lambda t: tuple(torch.nonzero(t, as_tuple=True)), f"{s} as_tuple") for s in shapes] + \
        [([arr(rng, (2, 3), dt, "intlike")], {"as_tuple": False}, torch.nonzero, "as_tuple=False")]


# ---- sorting ---------------------------------------------------------------------------------
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


TABLE = {
    "index_select": cases_spec(_index_select),
    "gather": cases_spec(_gather),
    "masked_fill": cases_spec(_masked_fill),
    "one_hot": cases_spec(_one_hot, I, "n"),
    "index_add": cases_spec(_index_add, FI),
    "scatter": cases_spec(_scatter(False), FI),
    "scatter_add": cases_spec(_scatter(True), FI),
    "masked_select": cases_spec(_masked_select),
    "nonzero": cases_spec(_nonzero, grad="n"),
    # sorting
    "sort": cases_spec(_sort, FI),
    "argsort": cases_spec(_argsort, FI, "n"),
    "topk": cases_spec(_topk, FI),
}
