"""Conformance table: convolutions (conv1d, conv2d, conv3d, conv_transpose1d, conv_transpose2d)
and pools (max_pool1d, avg_pool1d, max_pool2d, avg_pool2d, adaptive_avg_pool2d,
adaptive_max_pool2d)."""
import torch.nn.functional as TF

import tensord
from opcheck import Case, arr
from optable_specs import spec_of


CONV_TOL32 = (1e-4, 1e-5)


def _conv2d(rng, dt):
    out = []
    configs = [
        # input, weight, bias?, attrs
        ((2, 3, 6, 5), (4, 3, 3, 3), True, {}),
        ((1, 2, 7, 7), (3, 2, 3, 3), True, {"stride": 2, "padding": 1}),
        ((2, 2, 8, 6), (2, 2, 3, 2), False, {"dilation": 2}),
        ((1, 4, 5, 5), (6, 2, 3, 3), True, {"groups": 2, "padding": [1, 0]}),
        ((2, 3, 4, 4), (5, 3, 1, 1), False, {"stride": [1, 2]}),
        ((3, 4, 5), (2, 3, 2, 2), True, {}),  # unbatched (C, H, W)
        ((0, 3, 4, 4), (2, 3, 3, 3), True, {}),
        ((2, 3, 6, 5), (4, 3, 2, 3), True, {"padding": "same"}),  # asymmetric in H
        ((1, 2, 7, 7), (2, 2, 4, 2), False, {"padding": "same", "dilation": [1, 3]}),
        ((3, 5, 6), (2, 3, 3, 2), True, {"padding": "same"}),  # unbatched, asymmetric in W
        ((1, 2, 7, 7), (3, 2, 3, 3), True, {"padding": "valid", "stride": 2}),
    ]
    for xs, ws, bias, attrs in configs:
        inputs = [arr(rng, xs, dt), arr(rng, ws, dt)] + ([arr(rng, (ws[0],), dt)] if bias else [])
        out.append((inputs, attrs, lambda *t, a=attrs: TF.conv2d(*t, **a),
                    f"{xs}*{ws} bias={bias} {attrs}"))
    return out


def _padding_refusals(spec, spatial):
    """conv with padding='same' and a stride (PyTorch refuses it too) or an unknown padding
    string: BAD_ATTRIBUTE."""
    rows = spec.gen

    def gen(rng, dt):
        x = arr(rng, (1, 2) + (5,) * spatial, dt)
        w = arr(rng, (3, 2) + (3,) * spatial, dt)
        return rows(rng, dt) + [
            Case([x, w], attrs={"padding": "same", "stride": 2}, label="same with stride 2",
                 error=tensord.BadAttribute),
            Case([x, w], attrs={"padding": "full"}, label="padding='full'",
                 error=tensord.BadAttribute)]
    spec.gen = gen
    return spec


def _conv(fn, configs, transposed=False):
    """configs: (input shape, weight shape, bias?, attrs); the bias has the output channels."""
    def build(rng, dt):
        out = []
        for xs, ws, bias, attrs in configs:
            channels = ws[1] * attrs.get("groups", 1) if transposed else ws[0]
            inputs = [arr(rng, xs, dt), arr(rng, ws, dt)]
            if bias:
                inputs.append(arr(rng, (channels,), dt))
            out.append((inputs, attrs, lambda *t, a=attrs: fn(*t, **a),
                        f"{xs}*{ws} bias={bias} {attrs}"))
        return out
    return build


_CONV1D = [
    ((2, 3, 9), (4, 3, 3), True, {}),
    ((1, 4, 11), (6, 2, 3), True, {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}),
    ((2, 2, 7), (3, 2, 2), False, {"stride": 3, "padding": 1}),
    ((3, 8), (2, 3, 3), True, {"padding": 2}),  # unbatched (C, L)
    ((0, 3, 5), (2, 3, 3), True, {}),
]


# padding='valid' (none) and 'same' (stride 1): dilation * (kernel - 1) per dim, the larger
# half after, so an even kernel pads one more on the right (and bottom, back).
_CONV1D += [
    ((2, 3, 9), (4, 3, 4), True, {"padding": "same"}),  # total 3: 1 before, 2 after
    ((1, 4, 8), (6, 2, 3), False, {"padding": "same", "dilation": 3, "groups": 2}),
    ((3, 7), (2, 3, 2), True, {"padding": "same"}),  # unbatched
    ((2, 2, 7), (3, 2, 3), True, {"padding": "valid", "stride": 2}),
]

_CONV3D = [
    ((2, 3, 4, 5, 4), (4, 3, 3, 2, 3), True, {}),
    ((1, 4, 5, 6, 5), (4, 2, 3, 3, 2),
     True, {"stride": [2, 1, 2], "padding": [1, 0, 1], "dilation": [1, 2, 1], "groups": 2}),
    ((2, 3, 4, 4), (2, 2, 2, 2, 2), False, {"stride": 2, "padding": 1}),  # unbatched
    ((0, 2, 3, 3, 3), (2, 2, 2, 2, 2), True, {}),
    ((1, 2, 4, 5, 4), (3, 2, 2, 3, 4), True, {"padding": "same"}),
    ((1, 2, 4, 4, 4), (2, 2, 3, 2, 2), False, {"padding": "valid"}),
]


_CONV_T1D = [
    ((2, 3, 6), (3, 4, 3), True, {}),
    ((1, 4, 5), (4, 2, 3), True, {"stride": 2, "padding": 1, "output_padding": 1, "groups": 2}),
    ((2, 5), (2, 3, 2), False, {"stride": 3, "dilation": 2, "output_padding": 1}),  # unbatched
    ((1, 2, 4), (2, 1, 3), True, {"dilation": 3, "output_padding": 2}),
]


_CONV_T2D = [
    ((2, 3, 4, 5), (3, 2, 3, 3), True, {}),
    ((1, 4, 5, 4), (4, 3, 3, 2),
     True, {"stride": [2, 1], "padding": [1, 0], "output_padding": [1, 0], "groups": 2}),
    ((2, 2, 3, 3), (2, 2, 2, 3),
     False, {"stride": [2, 3], "padding": [0, 1], "dilation": [2, 1], "output_padding": [1, 2]}),
    ((3, 4, 4), (3, 2, 2, 2), True, {"stride": 2, "padding": 1}),  # unbatched
    ((1, 2, 3, 4), (2, 2, 2, 2), True, {"dilation": 3, "output_padding": [2, 1]}),
    ((0, 2, 3, 3), (2, 3, 2, 2), True, {}),
]


# ---- pools -----------------------------------------------------------------------------------
def _pool(fn, avg):
    def build(rng, dt):
        configs = [((2, 3, 6, 6), {"kernel_size": 2}),
                   ((1, 2, 7, 5), {"kernel_size": 3, "stride": 2, "padding": 1}),
                   ((1, 1, 7, 7), {"kernel_size": [3, 2], "stride": [2, 1]}),
                   ((2, 1, 6, 5), {"kernel_size": 2, "stride": 2, "ceil_mode": True}),
                   ((3, 5, 5), {"kernel_size": 2}),
                   ((0, 2, 4, 4), {"kernel_size": 2})]
        if avg:
            configs.append(((1, 2, 5, 5), {"kernel_size": 3, "stride": 2, "padding": 1,
                                           "count_include_pad": False}))
        else:
            configs.append(((1, 2, 9, 9), {"kernel_size": 3, "dilation": 2}))
            configs += _WITH_INDICES_2D
        return [([arr(rng, xs, dt)], attrs, lambda t, a=attrs: _tuple(fn(t, **a)),
                 f"{xs} {attrs}") for xs, attrs in configs]
    return build


def _tuple(out):
    """PyTorch's (values, indices) of return_indices=True as a tuple; a tensor unchanged."""
    return tuple(out) if isinstance(out, (tuple, list)) else out


# return_indices=True: the values and each maximum's offset in its input plane (padding,
# dilation, ceil_mode and an unbatched input move the windows; the offsets stay unpadded).
_WITH_INDICES_2D = [
    ((2, 3, 6, 6), {"kernel_size": 2, "return_indices": True}),
    ((1, 2, 7, 5), {"kernel_size": 3, "stride": 2, "padding": 1, "return_indices": True}),
    ((1, 2, 9, 8), {"kernel_size": [3, 2], "dilation": [2, 1], "ceil_mode": True,
                    "return_indices": True}),
    ((3, 5, 5), {"kernel_size": 2, "return_indices": True}),
    ((0, 2, 4, 4), {"kernel_size": 2, "return_indices": True}),
    ((1, 2, 4, 4), {"kernel_size": 2, "return_indices": False}),
]


def _pool1d(fn, avg):
    def build(rng, dt):
        configs = [((2, 3, 8), {"kernel_size": 2}),
                   ((1, 2, 9), {"kernel_size": 3, "stride": 2, "padding": 1}),
                   ((2, 1, 10), {"kernel_size": 3, "stride": 2, "ceil_mode": True}),
                   ((2, 2, 7), {"kernel_size": 2, "stride": 3, "padding": 1, "ceil_mode": True}),
                   ((3, 6), {"kernel_size": 3}),  # unbatched (C, L)
                   ((0, 2, 5), {"kernel_size": 2})]
        if avg:
            configs.append(((1, 2, 9), {"kernel_size": 3, "stride": 2, "padding": 1,
                                        "count_include_pad": False}))
            configs.append(((1, 2, 7), {"kernel_size": 2, "stride": 3, "padding": 1,
                                        "ceil_mode": True, "count_include_pad": False}))
        else:
            configs.append(((1, 2, 11), {"kernel_size": 3, "dilation": 2, "padding": 1}))
            configs += [((2, 3, 8), {"kernel_size": 2, "return_indices": True}),
                        ((1, 2, 11), {"kernel_size": 3, "stride": 2, "dilation": 2,
                                      "padding": 1, "ceil_mode": True,
                                      "return_indices": True}),
                        ((3, 6), {"kernel_size": 3, "return_indices": True}),
                        ((2, 2, 5), {"kernel_size": 2, "return_indices": False})]
        return [([arr(rng, xs, dt)], attrs, lambda t, a=attrs: _tuple(fn(t, **a)),
                 f"{xs} {attrs}") for xs, attrs in configs]
    return build


def _adaptive(fn, max_pool=False):
    def build(rng, dt):
        configs = [((2, 3, 5, 7), [3, 4]), ((1, 2, 6, 6), [3]), ((2, 1, 4, 5), [1, 1]),
                   ((1, 2, 3, 3), [5, 4]), ((3, 7, 5), [2, 3]), ((0, 2, 4, 4), [2])]
        out = [([arr(rng, xs, dt)], {"output_size": size},
                lambda t, s=size: fn(t, s if len(s) == 2 else s[0]), f"{xs} -> {size}")
               for xs, size in configs]
        # None keeps that dim's input size (the client sends it as -1).
        for xs, size in (((2, 3, 5, 7), [None, 3]), ((1, 2, 6, 6), [4, None]),
                         ((3, 7, 5), [None, None])):
            out.append(([arr(rng, xs, dt)], {"output_size": size},
                        lambda t, s=size: fn(t, tuple(s)), f"{xs} -> {size}"))
        out.append(Case([arr(rng, (1, 2, 4, 4), dt)], attrs={"output_size": [-2, 3]},
                        label="output_size below -1", error=tensord.BadAttribute))
        if max_pool:  # return_indices: (values, each maximum's offset in its input plane)
            for xs, size in (((2, 3, 5, 7), [3, 4]), ((1, 2, 3, 3), [5, 4]), ((3, 7, 5), [2, 3]),
                             ((0, 2, 4, 4), [2])):
                out.append(([arr(rng, xs, dt)], {"output_size": size, "return_indices": True},
                            lambda t, s=size: tuple(fn(t, s if len(s) == 2 else s[0],
                                                         return_indices=True)),
                            f"{xs} -> {size} return_indices"))
        return out
    return build


TABLE = {
    "conv1d": _padding_refusals(spec_of(_conv(TF.conv1d, _CONV1D), tol32=CONV_TOL32), 1),
    "conv2d": _padding_refusals(spec_of(_conv2d, tol32=(1e-4, 1e-5)), 2),
    "conv3d": _padding_refusals(spec_of(_conv(TF.conv3d, _CONV3D), tol32=CONV_TOL32),
                                3),
    "conv_transpose1d": spec_of(_conv(TF.conv_transpose1d, _CONV_T1D, True), tol32=CONV_TOL32),
    "conv_transpose2d": spec_of(_conv(TF.conv_transpose2d, _CONV_T2D, True), tol32=CONV_TOL32),
    "max_pool1d": spec_of(_pool1d(TF.max_pool1d, False)),
    "avg_pool1d": spec_of(_pool1d(TF.avg_pool1d, True), tol32=(1e-5, 1e-6)),
    "max_pool2d": spec_of(_pool(TF.max_pool2d, False)),
    "avg_pool2d": spec_of(_pool(TF.avg_pool2d, True), tol32=(1e-5, 1e-6)),
    "adaptive_avg_pool2d": spec_of(_adaptive(TF.adaptive_avg_pool2d), tol32=(1e-5, 1e-6)),
    "adaptive_max_pool2d": spec_of(_adaptive(TF.adaptive_max_pool2d, True)),
}
