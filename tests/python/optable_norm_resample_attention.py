"""Conformance table: normalization (layer_norm, batch_norm, group_norm), interpolate and
scaled_dot_product_attention.

batch_norm's in-place update of the running statistics is checked in test_batch_norm.py: here
the reference runs on copies of them, and the rows compare outputs and gradients."""
import math

import numpy as np
import torch
import torch.nn.functional as TF

from opcheck import arr
from optable_specs import spec_of


NORM_TOL32 = (1e-4, 1e-5)


def _layer_norm(rng, dt):
    out = []
    for xs, ns, affine, eps in (((2, 3, 4), [4], True, None), ((2, 3, 4), [3, 4], True, 1e-3),
                                ((5, 6), [6], False, None), ((4,), [4], True, None),
                                ((0, 3), [3], True, None), ((2, 1), [1], True, None)):
        inputs = [arr(rng, xs, dt)]
        if affine:
            inputs += [arr(rng, ns, dt), arr(rng, ns, dt)]
        attrs = {"normalized_shape": ns}
        if eps is not None:
            attrs["eps"] = eps
        out.append((inputs, attrs,
                    lambda x, w=None, b=None, ns=ns, e=eps: TF.layer_norm(
                        x, ns, w, b, **({} if e is None else {"eps": e})),
                    f"{xs} {ns} affine={affine}"))
    return out


def _batch_norm(rng, dt):
    out = []
    for xs, training, affine, stats in (((4, 3), True, True, True), ((2, 3, 5), True, True, True),
                                        ((3, 2, 3, 4), True, False, False),
                                        ((2, 3, 2, 2), False, True, True),
                                        ((5, 2, 3), False, False, True),
                                        ((0, 3, 2), False, True, True),
                                        ((2, 4, 1, 3), True, True, False)):
        c = xs[1]
        x = arr(rng, xs, dt)
        if stats:
            rm, rv = arr(rng, (c,), dt), arr(rng, (c,), dt, "pos")
        else:
            rm, rv = np.zeros((0,), dtype=x.dtype), np.zeros((0,), dtype=x.dtype)
        inputs = [x, rm, rv]
        if affine:
            inputs += [arr(rng, (c,), dt), arr(rng, (c,), dt)]
        attrs = {"training": training, "momentum": 0.2, "eps": 1e-3}

        def ref(x, rm=None, rv=None, w=None, b=None, training=training, stats=stats):
            # The server updates its own running statistics; torch gets copies.
            rm = rm.detach().clone() if stats else None
            rv = rv.detach().clone() if stats else None
            return TF.batch_norm(x, rm, rv, w, b, training=training, momentum=0.2, eps=1e-3)

        if not stats and affine is False:
            inputs = [x]
        out.append((inputs, attrs, ref,
                    f"{xs} training={training} affine={affine} stats={stats}",
                    [0, 3, 4]))
    return out


def _group_norm(rng, dt):
    out = []
    for xs, groups, affine, eps in (((2, 6, 5), 3, True, None), ((3, 4), 2, True, 1e-3),
                                    ((2, 6, 3, 3), 1, False, None), ((1, 4, 2, 3), 4, True, None),
                                    ((2, 4, 2, 1, 3), 2, True, None), ((0, 4, 3), 2, True, None)):
        c = xs[1]
        inputs = [arr(rng, xs, dt)]
        if affine:
            inputs += [arr(rng, (c,), dt), arr(rng, (c,), dt)]
        attrs = {"num_groups": groups}
        if eps is not None:
            attrs["eps"] = eps
        out.append((inputs, attrs,
                    lambda x, w=None, b=None, g=groups, e=eps: TF.group_norm(
                        x, g, w, b, **({} if e is None else {"eps": e})),
                    f"{xs} groups={groups} affine={affine}"))
    return out


def _interpolate(rng, dt):
    cases = [((1, 2, 3, 5), {"size": [4, 7]}),
             ((2, 1, 3, 5), {"scale_factor": 1.7}),
             ((1, 2, 4, 6), {"scale_factor": 0.5}),
             ((1, 1, 5, 4), {"size": [3, 9], "mode": "nearest"}),
             ((2, 3, 7), {"scale_factor": 2.0}),
             ((1, 2, 3, 4), {"scale_factor": [2.0, 3.0]}),
             ((1, 2, 3, 5), {"size": [5, 8], "mode": "bilinear", "align_corners": False}),
             ((1, 2, 3, 5), {"size": [5, 8], "mode": "bilinear", "align_corners": True}),
             ((2, 1, 3, 4), {"scale_factor": 2.5, "mode": "bilinear", "align_corners": False}),
             ((2, 1, 3, 4), {"scale_factor": 2.5, "mode": "bilinear", "align_corners": True}),
             ((1, 2, 3, 4), {"scale_factor": 2.0, "mode": "bilinear"}),
             ((1, 2, 5, 6), {"size": [2, 3], "mode": "bilinear"}),
             ((1, 1, 4, 4), {"size": 1, "mode": "bilinear", "align_corners": True}),
             ((2, 2, 5), {"size": 9, "mode": "linear"}),
             ((2, 2, 5), {"scale_factor": 1.3, "mode": "linear", "align_corners": True}),
             ((1, 1, 4, 5), {"scale_factor": 1.7, "mode": "bilinear",
                             "recompute_scale_factor": True}),
             ((1, 1, 2, 3, 2), {"scale_factor": [1.5, 2.0, 1.0], "mode": "trilinear"}),
             ((1, 2, 2, 2, 3), {"size": [3, 3, 4], "mode": "nearest"}),
             ((0, 2, 3, 4), {"size": [5, 6], "mode": "bilinear"})]
    out = []
    for xs, kw in cases:
        out.append(([arr(rng, xs, dt)], kw, lambda x, kw=kw: TF.interpolate(x, **kw),
                    f"{xs} {kw}"))
    return out


def sdpa_reference(q, k, v, mask=None, is_causal=False, scale=None):
    """PyTorch 2.x's documented reference of F.scaled_dot_product_attention (the installed
    torch predates the function)."""
    ell, s = q.size(-2), k.size(-2)
    factor = 1 / math.sqrt(q.size(-1)) if scale is None else scale
    bias = torch.zeros(ell, s, dtype=q.dtype)
    if is_causal:
        keep = torch.ones(ell, s, dtype=torch.bool).tril(diagonal=0)
        bias = bias.masked_fill(keep.logical_not(), float("-inf"))
    if mask is not None:
        if mask.dtype == torch.bool:
            bias = bias.masked_fill(mask.logical_not(), float("-inf"))
        else:
            bias = mask + bias
    weights = torch.softmax(q @ k.transpose(-2, -1) * factor + bias, dim=-1)
    return weights @ v


def _attention(rng, dt):
    out = []
    for (qs, ks, vs), mask, attrs in (
            (((2, 3, 4), (2, 5, 4), (2, 5, 3)), None, {}),
            (((2, 3, 4), (2, 5, 4), (2, 5, 3)), None, {"is_causal": True}),
            (((2, 2, 4, 3), (2, 2, 4, 3), (2, 2, 4, 5)), None, {"is_causal": True, "scale": 0.3}),
            (((3, 4), (6, 4), (6, 2)), "bool", {}),
            (((2, 3, 4), (2, 5, 4), (2, 5, 3)), "float", {"scale": 1.0}),
            (((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 5, 3)), "bool_heads", {}),
            (((1, 0, 4), (1, 5, 4), (1, 5, 3)), None, {})):
        inputs = [arr(rng, qs, dt), arr(rng, ks, dt), arr(rng, vs, dt)]
        ell, s = qs[-2], ks[-2]
        if mask == "bool":
            m = rng.integers(0, 2, size=(ell, s)).astype(np.bool_)
            m[:, 0] = True  # no row masked everywhere
            inputs.append(m)
        elif mask == "bool_heads":
            m = rng.integers(0, 2, size=(2, 1, ell, s)).astype(np.bool_)
            m[..., 0] = True
            inputs.append(m)
        elif mask == "float":
            inputs.append(arr(rng, (1, ell, s), dt))
        out.append((inputs, attrs,
                    lambda q, k, v, m=None, a=attrs: sdpa_reference(
                        q, k, v, m, a.get("is_causal", False), a.get("scale")),
                    f"{qs} {ks} {vs} mask={mask} {attrs}", [0, 1, 2, 3]))
    return out


TABLE = {
    "layer_norm": spec_of(_layer_norm, tol32=(1e-4, 1e-5)),
    "batch_norm": spec_of(_batch_norm, tol32=NORM_TOL32),
    "group_norm": spec_of(_group_norm, tol32=NORM_TOL32),
    "interpolate": spec_of(_interpolate, tol32=(1e-5, 1e-5)),
    "scaled_dot_product_attention": spec_of(_attention, tol32=NORM_TOL32),
}
