"""Builders the conformance table parts (optable_*.py) share: a Spec from rows of
(inputs, attrs, ref[, label[, grad_inputs]]), and values without ties."""
import numpy as np

from opcheck import ALL, F, NP, Case, Spec


def spec_of(build, dtypes=F, grad="d", **tol):
    """Spec from build(rng, dt) -> [(inputs, attrs, ref[, label[, grad_inputs]]) or Case]
    (a Case for what a row cannot say, such as an expected error)."""
    def gen(rng, dt):
        out = []
        for item in build(rng, dt):
            if isinstance(item, Case):  # a case that needs more than the tuple says
                out.append(item)
                continue
            inputs, attrs, ref = item[:3]
            grad_inputs = item[4] if len(item) > 4 else None
            out.append(Case(inputs, ref, attrs, grad_inputs=grad_inputs,
                            label=item[3] if len(item) > 3 else ""))
        return out
    return Spec(gen, dtypes, grad, **tol)


def cases_spec(build, dtypes=ALL, grad="d", **tol):
    """Spec from build(rng, dt) -> [(inputs, attrs, ref, label)]."""
    def gen(rng, dt):
        out = []
        for item in build(rng, dt):
            if isinstance(item, Case):  # a case that needs more than the tuple says
                out.append(item)
                continue
            inputs, attrs, ref = item[:3]
            out.append(Case(inputs, ref, attrs, label=item[3] if len(item) > 3 else ""))
        return out
    return Spec(gen, dtypes, grad, **tol)


def distinct(rng, shape, dt):
    """Values without ties (so argmax/max indices are unambiguous)."""
    n = int(np.prod(shape, dtype=np.int64))
    vals = rng.permutation(n).astype(np.float64) - n // 2
    if dt in F:
        vals = vals + rng.uniform(-0.3, 0.3, n)
    return vals.reshape(shape).astype(NP[dt])
