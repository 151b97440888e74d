"""Conformance table: shape and view ops (reshape, flatten, squeeze, unsqueeze, permute,
transpose, expand, contiguous, clone, cat, stack, split, chunk, narrow, slice, flip, roll, repeat,
tile, tril, triu, pad), and to_dtype, detach, to_device and assign."""
import numpy as np
import torch
import torch.nn.functional as TF

from opcheck import ALL, F, NP, TORCH, Case, Spec, arr, rshape, unary_shapes
from optable_specs import cases_spec
from tensord.errors import REASON_CLASSES


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


def _pad(rng, dt):
    out = []
    x3 = arr(rng, (2, 3, 5), dt)
    x4 = arr(rng, (1, 2, 4, 5), dt)
    for mode in ("reflect", "replicate", "circular"):
        if mode != "circular" and dt not in F:  # torch: "not implemented for 'Int'"
            out.append(Case([x3], None, {"pad": [1, 2], "mode": mode}, label=f"{mode} of {dt}",
                            error=REASON_CLASSES["DTYPE_MISMATCH"]))
            continue
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


# ---- dtype, device and in-place writes -------------------------------------------------------
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
    "flip": cases_spec(_flip),
    "roll": cases_spec(_roll),
    "repeat": cases_spec(_repeat),
    "tile": cases_spec(_tile),
    "tril": cases_spec(_tri(torch.tril)),
    "triu": cases_spec(_tri(torch.triu)),
    "pad": cases_spec(_pad),  # reflect/replicate of ints and bool: refused, as by torch
    # dtype, device and in-place writes
    "to_dtype": cases_spec(_to_dtype),
    "detach": cases_spec(_detach, grad="n"),
    "to_device": cases_spec(_to_device),
    "assign": Spec(None, ALL, "n", run=_run_assign),
}
