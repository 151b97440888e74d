"""Conformance table: activations. The pointwise ones (relu ... threshold), prelu, and those
along a dim (softmax, log_softmax, softmin, glu)."""
import torch
import torch.nn.functional as TF

from opcheck import ALL, FI, Case, F, Spec, arr, unary_shapes
from optable_elementwise import unary


def _act(fn, kind="normal", variants=()):
    return unary(fn, F, "d", kind=kind, variants=variants)


def _prelu(rng, dt):
    # weight of one element or of C = dim 1 elements; inputs away from the kink at 0
    return [Case([arr(rng, s, dt, "nonzero"), arr(rng, (c,), dt)], TF.prelu, label=f"{s} w{c}")
            for s, c in (((2, 3, 4), 3), ((2, 3), 3), ((4, 5), 1), ((2, 3, 2, 2), 1))]


def _softmax(fn, tol32=(1e-5, 1e-6)):
    def gen(rng, dt):
        cases = []
        for s in unary_shapes(rng):
            dims = [-1] + ([0] if len(s) >= 1 else []) + ([1] if len(s) >= 2 else [])
            for d in dims:
                cases.append(Case([arr(rng, s, dt)], lambda x, d=d: fn(x, dim=d), {"dim": d},
                                  label=f"{s} dim={d}"))
        x = arr(rng, (2, 5), dt) * 30  # large logits: needs the max-subtraction
        cases.append(Case([x], lambda t: fn(t, dim=1), {"dim": 1}, label="large"))
        return cases
    return Spec(gen, F, "d", tol32=tol32)


def _dim_act(fn):
    def gen(rng, dt):
        return [Case([arr(rng, s, dt)], lambda x, d=d: fn(x, dim=d), {"dim": d}, label=f"{s} {d}")
                for s in ((2, 4), (4, 2, 4), (6,)) for d in (-1, 0)]
    return Spec(gen, F, "d")


TABLE = {
    # pointwise
    "relu": unary(torch.relu, FI, kind="nonzero"),
    "sigmoid": unary(torch.sigmoid, ALL),
    "tanh": unary(torch.tanh, ALL),
    "gelu": unary(TF.gelu, variants=[({"approximate": "tanh"},
                                      lambda x: TF.gelu(x, approximate="tanh")),
                                     ({"approximate": "none"}, TF.gelu)]),
    "silu": unary(TF.silu),
    "softplus": unary(TF.softplus, kind="wide",
                      variants=[({"beta": 2.0, "threshold": 1.0},
                                 lambda x: TF.softplus(x, beta=2.0, threshold=1.0))]),
    "leaky_relu": unary(TF.leaky_relu, kind="nonzero",
                        variants=[({"negative_slope": 0.2},
                                   lambda x: TF.leaky_relu(x, negative_slope=0.2))]),
    "elu": unary(TF.elu, kind="nonzero",
                 variants=[({"alpha": 0.5}, lambda x: TF.elu(x, alpha=0.5))]),
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
    "prelu": Spec(_prelu, F, "d"),
    # along a dim
    "softmax": _softmax(torch.softmax),
    # f32 log_softmax: outputs near 0 come from cancelling x - logsumexp(x), so the few-ulp
    # error of a vectorized exp/log shows as ~1e-6 absolute.
    "log_softmax": _softmax(torch.log_softmax, tol32=(1e-5, 1e-5)),
    "softmin": _dim_act(TF.softmin),
    "glu": _dim_act(TF.glu),
}
