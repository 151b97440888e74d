"""Conformance table: embedding and dropout."""
import numpy as np
import torch.nn.functional as TF

from opcheck import F, I, NP, Spec, arr
from optable_specs import spec_of


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


TABLE = {
    "embedding": spec_of(_embedding, I),
    "dropout": Spec(None, F, "d", run=_run_dropout),
}
