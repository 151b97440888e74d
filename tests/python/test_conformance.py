"""Every op the server lists, compared with PyTorch: forward values, output dtypes and
gradients (torch.autograd) over shapes with broadcasting, size-1 and empty dims and 0-d
tensors, for every dtype the op lists. See opcheck.py for the tolerances; bf16 and f16 (listed
wherever f32 is) rerun the f32 cases, see opcheck_low.py; u8, i8 and i16 (listed wherever i32
is) rerun the i32 cases, see opcheck_narrow.py."""
import zlib

import numpy as np
import pytest

from opcheck import run_case
from opcheck_low import LOW, run_low
from opcheck_narrow import NARROW, REFUSED, run_narrow, run_refused
from optable import TABLE

DTYPES = ("f64", "f32", "i64", "i32", "bool") + LOW + NARROW


def table_dtypes(spec) -> set:
    """The dtypes a table entry exercises: its own, bf16/f16 through its f32 cases and
    u8/i8/i16 through its i32 cases."""
    return set(spec.dtypes) | (set(LOW) if "f32" in spec.dtypes else set()) | \
        (set(NARROW) if "i32" in spec.dtypes else set())


MARKINGS = {"d": "differentiable", "z": "zero_grad", "n": "non_differentiable"}


def test_every_listed_op_is_in_the_table(catalog):
    missing = sorted(set(catalog) - set(TABLE))
    assert not missing, f"ops listed by the server with no conformance table entry: {missing}"


def test_every_table_op_is_served(catalog):
    """Every op of the table must be listed by the server."""
    missing = sorted(set(TABLE) - set(catalog))
    assert not missing, f"ops of the conformance table the server does not list: {missing}"


def test_table_covers_every_listed_dtype(catalog):
    gaps = {name: sorted(set(op["dtypes"]) - table_dtypes(TABLE[name]))
            for name, op in catalog.items() if name in TABLE}
    gaps = {k: v for k, v in gaps.items() if v}
    assert not gaps, f"dtypes listed by the server that the table does not exercise: {gaps}"


@pytest.mark.parametrize("name", sorted(TABLE))
def test_marking(name, catalog):
    assert name in catalog, f"the server does not list {name}"
    assert catalog[name]["marking"] == MARKINGS[TABLE[name].grad]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("name", sorted(TABLE))
def test_op(name, dt, catalog, sess):
    spec = TABLE[name]
    assert name in catalog, f"the server does not list {name}"
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dt}".encode()))
    if dt in NARROW and name in REFUSED:  # an index operand in u8/i8/i16: refused, not listed
        assert dt not in catalog[name]["dtypes"], f"{name} lists {dt}, but must refuse it"
        run_refused(sess, name, spec, dt, rng)
        return
    if dt not in table_dtypes(spec) or dt not in catalog[name]["dtypes"]:
        pytest.skip(f"{name} is not listed for {dt}")
    if dt in LOW:
        run_low(sess, name, spec, dt, rng)
        return
    if dt in NARROW:
        run_narrow(sess, name, spec, dt, rng)
        return
    if spec.run is not None:
        spec.run(sess, name, spec, dt, rng)
        return
    for case in spec.gen(rng, dt):
        run_case(sess, name, spec, case, dt, rng)


@pytest.mark.parametrize("name", sorted(n for n, s in TABLE.items()
                                        if s.grad in ("d", "z") and s.run is None))
def test_gradients_with_balanced_checkpointing(name, catalog, sess):
    """BALANCED recomputes memory-bound forwards during backward: same gradients."""
    spec = TABLE[name]
    assert name in catalog, f"the server does not list {name}"
    dt = next((d for d in ("f64", "i64", "i32") if d in spec.dtypes and
               d in catalog[name]["dtypes"]), None)
    if dt is None:
        pytest.skip(f"{name}: no dtype to test")
    rng = np.random.default_rng(zlib.crc32(f"{name}/{dt}/balanced".encode()))
    for case in spec.gen(rng, dt):
        run_case(sess, name, spec, case, dt, rng, checkpointing="balanced")
