"""Conformance table: linear algebra (matmul, mm, bmm, linear, dot, outer, addmm, baddbmm,
einsum, trace, diag, diagonal)."""
import torch
import torch.nn.functional as TF

from opcheck import F, arr
from optable_specs import cases_spec, spec_of


MATMUL_TOL32 = (1e-4, 1e-5)


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


TABLE = {
    "matmul": spec_of(_matmul, tol32=MATMUL_TOL32),
    "mm": spec_of(_mm, tol32=MATMUL_TOL32),
    "bmm": spec_of(_bmm, tol32=MATMUL_TOL32),
    "linear": spec_of(_linear, tol32=MATMUL_TOL32),
    "dot": _linalg("dot"),
    "outer": _linalg("outer"),
    "addmm": _linalg("addmm"),
    "baddbmm": _linalg("baddbmm"),
    "einsum": _linalg("einsum"),
    "trace": _linalg("trace"),
    "diag": _linalg("diag"),
    "diagonal": _linalg("diagonal"),
}
