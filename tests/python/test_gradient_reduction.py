"""Gradients reduced across real tensord processes while the backward runs
(ctx.backward(loss, reduce=buckets), ProgramBackward.reduce): the reduced gradients are the
mean (or sum) of every rank's own, in f64, eager and compiled; a leaf one rank does not reach
takes part with zeros; a rank whose backward or request fails makes every rank fail with its
reason (the seed failure AUTODIFF_CONTEXT_NOT_ENABLED included) and the group goes on; ranks
whose buckets differ fail with COLLECTIVE_MISMATCH; a session outside a group is told so."""
import numpy as np
import pytest
import tensord
from test_collectives import (WORLD, all_reduce_works, expect_on_every_rank,  # noqa: F401
                              group, run_ranks, servers, values)

SHAPES = {"w1": (3, 4), "b1": (4,), "w2": (4, 2), "b2": (2,), "u": (2,)}


def parameters(sess, ctx):
    rng = np.random.default_rng(7)  # the same values on every rank
    return {k: sess.tensor(rng.normal(size=shape), requires_grad=True, ctx=ctx)
            for k, shape in SHAPES.items()}


def loss_of(sess, p, r, uses_u=True):
    """A two-layer step on rank r's own data; u only where uses_u."""
    x = sess.tensor(np.random.default_rng(100 + r).normal(size=(5, 3)))
    h = sess.op("tanh", sess.op("add", sess.op("matmul", x, p["w1"]), p["b1"]))
    y = sess.op("add", sess.op("matmul", h, p["w2"]), p["b2"])
    loss = sess.op("sum", sess.op("mul", y, y))
    if uses_u:
        loss = sess.op("add", loss, sess.op("sum", sess.op("mul", p["u"], p["u"])))
    return loss


def buckets(p):
    """The last layer first, as the backward finishes them."""
    return [[p["u"]], [p["w2"], p["b2"]], [p["w1"], p["b1"]]]


def own_gradients(sess, ctx, p, r, uses_u=True):
    grads = ctx.backward(loss_of(sess, p, r, uses_u))
    return {k: grads[v].numpy() for k, v in p.items() if v in grads}


@pytest.mark.parametrize("op", ["mean", "sum"])
def test_reduced_gradients_are_the_groups_mean_or_sum(group, op):
    """Rank 3 does not use u: it gets the others' gradient of u all the same."""
    def step(r, s):
        ctx = s.autodiff()
        p = parameters(s, ctx)
        own = own_gradients(s, ctx, p, r, uses_u=r != 3)
        grads = ctx.backward(loss_of(s, p, r, uses_u=r != 3), reduce=buckets(p), reduce_op=op)
        return own, {k: grads[v].numpy() for k, v in p.items()}
    results = values(run_ranks(step, group))
    for k, shape in SHAPES.items():
        mine = [own.get(k, np.zeros(shape)) for own, _ in results]
        expected = np.mean(mine, axis=0) if op == "mean" else np.sum(mine, axis=0)
        for r, (_, reduced) in enumerate(results):
            np.testing.assert_allclose(reduced[k], expected, rtol=1e-12, atol=1e-14,
                                       err_msg=f"rank {r}, {k}")


def test_a_compiled_step_reduces_its_gradients_like_the_eager_backward(group):
    """sess.compile of a step whose backward reduces: the updates see the reduced gradients
    (here copied out by the program's results), bit for bit those of the eager backward."""
    def step(r, s):
        ctx = s.autodiff()
        p = parameters(s, ctx)
        eager = ctx.backward(loss_of(s, p, r), reduce=buckets(p))
        eager = {k: eager[v].numpy() for k, v in p.items()}

        def traced(scale):
            grads = ctx.backward(loss_of(s, p, r), reduce=buckets(p))
            return [s.op("mul", grads[p[k]], scale) for k in SHAPES]
        program = s.compile(traced, 1.0, ctx=ctx)
        outs = [program(1.0) for _ in range(2)]
        return eager, [dict(zip(SHAPES, out)) for out in outs]
    for r, (eager, runs) in enumerate(values(run_ranks(step, group))):
        for run in runs:
            for k in SHAPES:
                np.testing.assert_array_equal(run[k], eager[k], err_msg=f"rank {r}, {k}")


def test_a_closed_context_on_one_rank_fails_every_ranks_backward(group):
    """The seed failure in a data-parallel backward: rank 2's context is closed, so its
    backward fails with AUTODIFF_CONTEXT_NOT_ENABLED, and so does every other rank's, naming
    rank 2, before any gradient moves; the group goes on."""
    def step(r, s):
        ctx = s.autodiff()
        p = parameters(s, ctx)
        loss = loss_of(s, p, r)
        if r == 2:
            ctx.close()
        return ctx.backward(loss, reduce=buckets(p))
    results = run_ranks(step, group)
    expect_on_every_rank(results, "AUTODIFF_CONTEXT_NOT_ENABLED")
    for r, e in enumerate(results):
        if r != 2:
            assert e.metadata.get("rank") == "2", f"rank {r}: {e}"
            assert e.metadata.get("phase") == "gradient_reduction", f"rank {r}: {e}"
    all_reduce_works(group)


def test_a_bad_bucket_on_one_rank_fails_every_rank(group):
    """Rank 1 names a tensor that is not a requires-grad leaf: BAD_OPERAND on every rank."""
    def step(r, s):
        ctx = s.autodiff()
        p = parameters(s, ctx)
        b = buckets(p)
        if r == 1:
            b[1] = [s.tensor(np.ones(8))]
        return ctx.backward(loss_of(s, p, r), reduce=b)
    results = run_ranks(step, group)
    expect_on_every_rank(results, "BAD_OPERAND")
    assert all(e.metadata.get("rank") == "1" for r, e in enumerate(results) if r != 1)
    all_reduce_works(group)


def test_ranks_whose_buckets_differ_fail_with_collective_mismatch(group):
    """Rank 3 puts w2 and b2 in buckets of their own (one bucket more, and a second one of
    another size): every rank fails at its first bucket with COLLECTIVE_MISMATCH, and the
    group goes on."""
    def step(r, s):
        ctx = s.autodiff()
        p = parameters(s, ctx)
        b = buckets(p)
        if r == 3:
            b = [[p["u"]], [p["w2"]], [p["b2"]], [p["w1"], p["b1"]]]
        return ctx.backward(loss_of(s, p, r), reduce=b)
    results = run_ranks(step, group)
    expect_on_every_rank(results, "COLLECTIVE_MISMATCH", peer_rank="3", bucket_index="0")
    all_reduce_works(group)


def test_reducing_outside_a_group_is_group_not_joined(servers):
    with servers[0].session() as s:
        ctx = s.autodiff()
        p = parameters(s, ctx)
        with pytest.raises(tensord.TensordError) as err:
            ctx.backward(loss_of(s, p, 0), reduce=buckets(p))
        assert err.value.reason == "GROUP_NOT_JOINED"
        # Nothing was consumed: the same graph's plain backward still runs.
        assert set(ctx.backward(loss_of(s, p, 0))) == set(p.values())


def test_a_bucket_of_mixed_dtypes_is_refused(group):
    def step(r, s):
        ctx = s.autodiff()
        p = parameters(s, ctx)
        f32 = s.tensor(np.ones(2, np.float32), requires_grad=True, ctx=ctx)
        loss = s.op("add", loss_of(s, p, r), s.op("sum", f32))
        return ctx.backward(loss, reduce=[[p["u"], f32]] + buckets(p)[1:])
    results = run_ranks(step, group)
    expect_on_every_rank(results, "BAD_OPERAND")
    assert "mixes" in str(results[0])
    all_reduce_works(group)



def test_a_compiled_step_with_a_bad_bucket_is_refused_typed(group):
    """A traced reduce= naming a tensor that is not a leaf: the compile fails on every rank
    with BAD_OPERAND, and the group goes on."""
    def step(r, s):
        ctx = s.autodiff()
        p = parameters(s, ctx)
        plain = s.tensor(np.ones(2))

        def traced(scale):
            b = buckets(p)
            b[0] = [plain] if r == 0 else b[0]
            grads = ctx.backward(loss_of(s, p, r), reduce=b)
            return s.op("mul", grads[p["w1"]], scale)
        return s.compile(traced, 1.0, ctx=ctx)
    results = run_ranks(step, group)
    expect_on_every_rank(results, "BAD_OPERAND")
    assert all(e.metadata.get("rank") == "0" for e in results[1:]), results
    all_reduce_works(group)
