"""Conformance table: losses (mse_loss, l1_loss, binary_cross_entropy,
binary_cross_entropy_with_logits, cross_entropy, nll_loss, smooth_l1_loss, huber_loss, kl_div,
cosine_similarity)."""
import numpy as np
import torch.nn.functional as TF

from opcheck import NP, Case, arr, rshape
from optable_specs import spec_of


REDUCTIONS = ("mean", "sum", "none")


def _pointwise_loss(fn, kx="normal", kt="normal", grad_inputs=(0, 1)):
    def build(rng, dt):
        out = []
        for red in REDUCTIONS:
            for s in (rshape(rng, 2), (), (0, 3), rshape(rng, 3)):
                out.append(([arr(rng, s, dt, kx), arr(rng, s, dt, kt)], {"reduction": red},
                            lambda x, t, r=red: fn(x, t, reduction=r), f"{s} {red}",
                            list(grad_inputs)))
        s = rshape(rng, 2)
        out.append(([arr(rng, s, dt, kx), arr(rng, s, dt, kt)], {},
                    lambda x, t: fn(x, t), "default reduction", list(grad_inputs)))
        return out
    return build


def _bce(with_logits):
    fn = TF.binary_cross_entropy_with_logits if with_logits else TF.binary_cross_entropy
    kx = "normal" if with_logits else "prob"

    def build(rng, dt):
        out = _pointwise_loss(fn, kx, "prob")(rng, dt)
        s = rshape(rng, 2, 2, 4)
        for red in REDUCTIONS:
            out.append(([arr(rng, s, dt, kx), arr(rng, s, dt, "prob"), arr(rng, s[1:], dt, "pos")],
                        {"reduction": red}, lambda x, t, w, r=red: fn(x, t, weight=w, reduction=r),
                        f"weight {red}", [0, 1]))
        if with_logits:
            out.append(([arr(rng, s, dt), arr(rng, s, dt, "prob"), arr(rng, s, dt, "pos"),
                         arr(rng, s[1:], dt, "pos")], {},
                        lambda x, t, w, pw: fn(x, t, weight=w, pos_weight=pw),
                        "weight and pos_weight", [0, 1]))
        return out
    return build


def _cross_entropy(rng, dt):
    out = []
    n, c = (int(v) for v in rng.integers(2, 5, 2))
    for red in REDUCTIONS:
        tgt = rng.integers(0, c, size=(n,)).astype(np.int64)
        out.append(([arr(rng, (n, c), dt), tgt], {"reduction": red},
                    lambda x, t, r=red: TF.cross_entropy(x, t, reduction=r), f"indices {red}"))
        tgt = rng.integers(0, c, size=(n, 3)).astype(np.int64)
        out.append(([arr(rng, (n, c, 3), dt), tgt], {"reduction": red},
                    lambda x, t, r=red: TF.cross_entropy(x, t, reduction=r), f"(N,C,d) {red}"))
        probs = arr(rng, (n, c), dt, "prob")
        probs = (probs / probs.sum(1, keepdims=True)).astype(NP[dt])
        out.append(([arr(rng, (n, c), dt), probs], {"reduction": red},
                    lambda x, t, r=red: TF.cross_entropy(x, t, reduction=r), f"probs {red}"))
    tgt = rng.integers(0, c, size=(n,)).astype(np.int64)
    out.append(([arr(rng, (c,), dt), np.array(1, np.int64)], {},
                lambda x, t: TF.cross_entropy(x, t), "unbatched"))
    out.append(([arr(rng, (n, c), dt), tgt], {"label_smoothing": 0.2},
                lambda x, t: TF.cross_entropy(x, t, label_smoothing=0.2), "label smoothing"))
    out.append(([arr(rng, (n, c), dt), tgt, arr(rng, (c,), dt, "pos")], {},
                lambda x, t, w: TF.cross_entropy(x, t, weight=w), "weight", [0]))
    ign = tgt.copy()
    ign[0] = 1
    for red in ("mean", "none"):
        out.append(([arr(rng, (n, c), dt), ign], {"ignore_index": 1, "reduction": red},
                    lambda x, t, r=red: TF.cross_entropy(x, t, ignore_index=1, reduction=r),
                    f"ignore_index {red}"))
    probs = arr(rng, (n, c), dt, "prob")
    out.append(([arr(rng, (n, c), dt), probs], {"label_smoothing": 0.1},
                lambda x, t: TF.cross_entropy(x, t, label_smoothing=0.1),
                "probs + smoothing"))
    return out


def _nll_loss(rng, dt):
    out = []
    n, c = (int(v) for v in rng.integers(2, 5, 2))

    def logp(shape):
        x = arr(rng, shape, "f64")
        return (x - np.log(np.exp(x).sum(1, keepdims=True))).astype(NP[dt])
    for red in REDUCTIONS:
        out.append(([logp((n, c)), rng.integers(0, c, size=(n,)).astype(np.int64)],
                    {"reduction": red}, lambda x, t, r=red: TF.nll_loss(x, t, reduction=r),
                    f"{red}"))
        out.append(([logp((n, c, 2)), rng.integers(0, c, size=(n, 2)).astype(np.int64)],
                    {"reduction": red}, lambda x, t, r=red: TF.nll_loss(x, t, reduction=r),
                    f"(N,C,d) {red}"))
        out.append(([logp((n, c)), rng.integers(0, c, size=(n,)).astype(np.int64),
                     arr(rng, (c,), dt, "pos")], {"reduction": red},
                    lambda x, t, w, r=red: TF.nll_loss(x, t, weight=w, reduction=r),
                    f"weight {red}", [0]))
    tgt = rng.integers(0, c, size=(n,)).astype(np.int64)
    tgt[-1] = -100
    out.append(([logp((n, c)), tgt], {}, lambda x, t: TF.nll_loss(x, t), "ignore_index default"))
    return out


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
            # A zero norm sits on the eps clamp, where the gradient is one-sided.
            Case([arr(rng, (2, 3), dt), np.zeros((2, 3), NP[dt])],
                 lambda a, b: TF.cosine_similarity(a, b, eps=1e-6), {"eps": 1e-6},
                 label="zero vector, eps", numeric=False),
            ([arr(rng, (3, 4), dt), arr(rng, (4,), dt)], {"dim": -1},
             lambda a, b: TF.cosine_similarity(a, b, dim=-1), "broadcast")]


LOSS_TOL32 = (2e-5, 1e-6)


TABLE = {
    "mse_loss": spec_of(_pointwise_loss(TF.mse_loss), tol32=LOSS_TOL32),
    "l1_loss": spec_of(_pointwise_loss(TF.l1_loss), tol32=LOSS_TOL32),
    "binary_cross_entropy": spec_of(_bce(False), tol32=LOSS_TOL32),
    "binary_cross_entropy_with_logits": spec_of(_bce(True), tol32=LOSS_TOL32),
    "cross_entropy": spec_of(_cross_entropy, tol32=LOSS_TOL32),
    "nll_loss": spec_of(_nll_loss, tol32=LOSS_TOL32),
    "smooth_l1_loss": _losses(TF.smooth_l1_loss, variants=({"beta": 0.5}, {"beta": 2.0})),
    "huber_loss": _losses(TF.huber_loss, variants=({"delta": 0.5}, {"delta": 2.0})),
    "kl_div": _losses(TF.kl_div, "normal", "prob", ("sum", "none", "batchmean"),
                      variants=({"log_target": True},)),
    "cosine_similarity": spec_of(_cosine_similarity, tol32=(1e-5, 1e-6)),
}
