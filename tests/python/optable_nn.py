"""Conformance table, part 3: linear algebra, neural-network ops, losses."""
import numpy as np
import torch
import torch.nn.functional as TF

from opcheck import F, I, NP, Case, Spec, arr, rshape

MATMUL_TOL32 = (1e-4, 1e-5)


def spec_of(build, dtypes=F, grad="d", **tol):
    def gen(rng, dt):
        out = []
        for item in build(rng, dt):
            inputs, attrs, ref = item[:3]
            grad_inputs = item[4] if len(item) > 4 else None
            out.append(Case(inputs, ref, attrs, grad_inputs=grad_inputs,
                            label=item[3] if len(item) > 3 else ""))
        return out
    return Spec(gen, dtypes, grad, **tol)


# ---- linear algebra --------------------------------------------------------------------------
def _matmul(rng, dt):
    m, k, n = (int(v) for v in rng.integers(1, 5, 3))
    pairs = [((k,), (k,)), ((m, k), (k,)), ((k,), (k, n)), ((m, k), (k, n)),
             ((3, m, k), (k, n)), ((2, 1, m, k), (3, k, n)), ((m, k), (2, k, n)),
             ((m, 0), (0, n)), ((0, k), (k, n)), ((2, m, k), (2, k, 0))]
    return [([arr(rng, a, dt), arr(rng, b, dt)], {}, torch.matmul, f"{a}@{b}") for a, b in pairs]


def _mm(rng, dt):
    m, k, n = (int(v) for v in rng.integers(1, 6, 3))
    return [([arr(rng, a, dt), arr(rng, b, dt)], {}, torch.mm, f"{a}@{b}")
            for a, b in (((m, k), (k, n)), ((1, k), (k, 1)), ((m, 0), (0, n)), ((0, k), (k, n)))]


def _bmm(rng, dt):
    b, m, k, n = (int(v) for v in rng.integers(1, 5, 4))
    return [([arr(rng, x, dt), arr(rng, y, dt)], {}, torch.bmm, f"{x}@{y}")
            for x, y in (((b, m, k), (b, k, n)), ((1, m, k), (1, k, n)), ((0, m, k), (0, k, n)),
                         ((b, m, 0), (b, 0, n)))]


def _linear(rng, dt):
    i, o = (int(v) for v in rng.integers(1, 6, 2))
    out = []
    for xs in ((3, i), (i,), (2, 3, i), (0, i)):
        out.append(([arr(rng, xs, dt), arr(rng, (o, i), dt), arr(rng, (o,), dt)], {},
                    TF.linear, f"x{xs} with bias"))
        out.append(([arr(rng, xs, dt), arr(rng, (o, i), dt)], {}, TF.linear, f"x{xs}"))
    return out


# ---- neural-network ops ----------------------------------------------------------------------
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
    ]
    for xs, ws, bias, attrs in configs:
        inputs = [arr(rng, xs, dt), arr(rng, ws, dt)] + ([arr(rng, (ws[0],), dt)] if bias else [])
        out.append((inputs, attrs, lambda *t, a=attrs: TF.conv2d(*t, **a),
                    f"{xs}*{ws} bias={bias} {attrs}"))
    return out


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
        return [([arr(rng, xs, dt)], attrs, lambda t, a=attrs: fn(t, **a), f"{xs} {attrs}")
                for xs, attrs in configs]
    return build


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


def _embedding(rng, dt):
    """dt is the index dtype (the primary operand); weights are f64 and f32."""
    out = []
    for wdt in ("f64", "f32"):
        for n, d, idx_shape, pad in ((5, 3, (4,), None), (6, 2, (2, 3), 1), (4, 4, (), None),
                                     (3, 2, (0,), None), (4, 2, (6,), None)):
            weight = arr(rng, (n, d), wdt)
            idx = rng.integers(0, n, size=idx_shape).astype(NP[dt])
            if pad is not None:
                idx.flat[0] = pad
            attrs = {} if pad is None else {"padding_idx": pad}
            out.append(([idx, weight], attrs,
                        lambda i, w, p=pad: TF.embedding(i.long(), w, padding_idx=p),
                        f"{wdt} {n}x{d} idx{idx_shape} pad={pad}", [1]))
    return out


def _run_dropout(sess, name, spec, dt, rng):
    """dropout is random: check identities (p=0, training=False), the scaling, the fraction
    dropped, the seed's determinism, and that the gradient uses the forward's mask."""
    x = arr(rng, (200, 50), dt, "pos")
    for attrs in ({"p": 0.0}, {"p": 0.7, "training": False}):
        np.testing.assert_array_equal(sess.op(name, x, **attrs).numpy(), x, err_msg=str(attrs))
    p = 0.3
    with sess.autodiff() as ctx:
        leaf = sess.tensor(x, requires_grad=True)
        y = sess.op(name, leaf, p=p, seed=77)
        got = y.numpy()
        kept = got != 0
        frac = 1 - kept.mean()
        assert abs(frac - p) < 0.03, f"dropout fraction {frac} for p={p}"
        tol = (1e-6, 1e-6) if dt == "f32" else (1e-12, 1e-12)
        np.testing.assert_allclose(got[kept], x[kept] / (1 - p), rtol=tol[0], atol=tol[1])
        seed = arr(rng, x.shape, dt)
        grads = ctx.backward(y, seed=seed)
        np.testing.assert_allclose(grads[leaf].numpy(), seed * kept / (1 - p), rtol=tol[0],
                                   atol=tol[1])
    again = sess.op(name, x, p=p, seed=77).numpy()
    np.testing.assert_array_equal(again != 0, kept, err_msg="same seed, different mask")
    assert sess.op(name, np.zeros((0, 3), NP[dt]), p=0.5).shape == (0, 3)


# ---- losses ----------------------------------------------------------------------------------
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


LOSS_TOL32 = (2e-5, 1e-6)

TABLE = {
    "matmul": spec_of(_matmul, tol32=MATMUL_TOL32),
    "mm": spec_of(_mm, tol32=MATMUL_TOL32),
    "bmm": spec_of(_bmm, tol32=MATMUL_TOL32),
    "linear": spec_of(_linear, tol32=MATMUL_TOL32),
    "conv2d": spec_of(_conv2d, tol32=(1e-4, 1e-5)),
    "max_pool2d": spec_of(_pool(TF.max_pool2d, False)),
    "avg_pool2d": spec_of(_pool(TF.avg_pool2d, True), tol32=(1e-5, 1e-6)),
    "layer_norm": spec_of(_layer_norm, tol32=(1e-4, 1e-5)),
    "embedding": spec_of(_embedding, I),
    "dropout": Spec(None, F, "d", run=_run_dropout),
    "mse_loss": spec_of(_pointwise_loss(TF.mse_loss), tol32=LOSS_TOL32),
    "l1_loss": spec_of(_pointwise_loss(TF.l1_loss), tol32=LOSS_TOL32),
    "binary_cross_entropy": spec_of(_bce(False), tol32=LOSS_TOL32),
    "binary_cross_entropy_with_logits": spec_of(_bce(True), tol32=LOSS_TOL32),
    "cross_entropy": spec_of(_cross_entropy, tol32=LOSS_TOL32),
    "nll_loss": spec_of(_nll_loss, tol32=LOSS_TOL32),
}
