"""PyTorch's OpInfo sample inputs through the server, float64 and float32, forward and
gradients, against PyTorch in float64 (see torch_samples.py for the translation, the
tolerances and the list of known differences)."""
import pytest

import torch_samples as ts
from optable import TABLE

# The OpInfos of ops the conformance table holds; that table is exactly the served catalog
# (test_conformance.py checks both directions), so no parameter names an op the server lacks.
NAMES = [n for n in ts.opinfo_names() if n in TABLE]


def test_known_differences_name_served_ops(catalog):
    """Every KNOWN entry is about an op the server lists and that has an OpInfo here."""
    stray = sorted({k.op for k in ts.KNOWN} - (set(catalog) & set(NAMES)))
    assert not stray, f"KNOWN entries for ops without a served OpInfo: {stray}"


def test_some_ops_have_opinfos(catalog):
    served = [n for n in NAMES if n in catalog and ts.opinfos(n)]
    assert len(served) >= 100, f"only {len(served)} served ops have an OpInfo: {served}"


@pytest.mark.parametrize("name", NAMES)
def test_op(name, catalog, sess):
    assert name in catalog, f"the server does not list {name}"
    results = ts.run_op(sess, name, catalog[name])
    if not results:
        pytest.skip(f"{name}: its OpInfo has no float32/float64 samples")
    problems = ts.check(name, results)
    assert not problems, f"{name}: {len(problems)} problem(s):\n  " + "\n  ".join(problems)
