"""Conformance rows of the collectives (all_reduce, all_gather, reduce_scatter, broadcast,
reduce, barrier), run in a process group of one rank, where each is the identity (all_gather
of a 0-d tensor gives one element): values, dtypes, marking, gradients against PyTorch and the
f64 gradient check of every row. Groups of several servers, with the failures only they can
have, are tested in test_collectives.py."""
import contextlib
import tempfile
import uuid

import opcheck_low
from opcheck import Case, Spec, arr, run_case

ALL = ("f64", "f32", "i64", "i32", "bool")
NUMBERS = ("f64", "f32", "i64", "i32")
FLOAT = ("f64", "f32")
SHAPES = [(3, 4), (5,), (2, 0), ()]
_RENDEZVOUS = tempfile.mkdtemp(prefix="tensord-conformance-")


@contextlib.contextmanager
def solo_group(sess):
    sess.join_group(f"conformance-{uuid.uuid4().hex}", 0, 1, f"file://{_RENDEZVOUS}")
    try:
        yield
    finally:
        sess.leave_group()


def _gen(attr_sets, shapes=SHAPES, gathers=False):
    """One case per shape and attribute set; "mean" only for floats, as the op takes it."""
    def gen(rng, dt):
        def ref(x):
            return x.reshape(1) if gathers and x.dim() == 0 else x.clone()
        return [Case([arr(rng, shape, dt)], ref, attrs=dict(attrs), label=f"{shape} {attrs}")
                for attrs in attr_sets if attrs.get("op") != "mean" or dt in FLOAT
                for shape in shapes]
    return gen


def _in_group(sess, name, spec, dt, rng):
    with solo_group(sess):
        for case in spec.gen(rng, dt):
            run_case(sess, name, spec, case, dt, rng)


def _low_in_group(sess, name, spec, dt, rng):
    with solo_group(sess):
        for case in spec.gen(rng, "f32"):
            opcheck_low.run_low_case(sess, name, spec, case, dt, rng)


def _barrier(sess, name, spec, dt, rng):
    with solo_group(sess):
        assert sess.op("barrier") is None


opcheck_low.RUNNERS.update({name: _low_in_group for name in
                            ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce")})

TABLE = {
    "all_reduce": Spec(_gen([{"op": op} for op in ("sum", "mean", "max", "min", "product")]),
                       NUMBERS, "d", run=_in_group),
    "all_gather": Spec(_gen([{}], gathers=True), ALL, "d", run=_in_group),
    "reduce_scatter": Spec(_gen([{"op": "sum"}, {"op": "mean"}], shapes=[(3, 4), (5,), (2, 0)]),
                           NUMBERS, "d", run=_in_group),
    "broadcast": Spec(_gen([{"src": 0}]), ALL, "d", run=_in_group),
    "reduce": Spec(_gen([{"dst": 0}]), NUMBERS, "d", run=_in_group),
    "barrier": Spec(None, ("f32",), "n", run=_barrier),
}
