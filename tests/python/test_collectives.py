"""Collectives across real tensord processes: process groups (file and Redis rendezvous), every
collective against numpy, f64 gradients of each across the group by central differences of the
group's own forward, both autodiff failures typed on every rank, mismatches, a rank that never
arrives, a rank killed mid-collective, and a session closed while it waits for its peers."""
import concurrent.futures
import contextlib
import shutil
import socket
import signal
import subprocess
import time
import uuid

import numpy as np
import pytest
import tensord
from conftest import ServerProcess, _free_port, server_binary

TIMEOUT_S = 5  # --collective-timeout of the servers here
WORLD = 4


def start_servers(tmp_path_factory, n, name):
    procs = []
    for r in range(n):
        p = ServerProcess(server_binary(), tmp_path_factory.mktemp(f"{name}{r}") / "tensord.log",
                          ["--collective-address=127.0.0.1",
                           f"--collective-timeout={TIMEOUT_S}s"])
        p.start()
        procs.append(p)
    return procs


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    procs = start_servers(tmp_path_factory, WORLD, "rank")
    clients = [tensord.connect(p.address) for p in procs]
    yield clients
    for c in clients:
        c.close()
    for p in procs:
        alive = p.proc is not None and p.proc.poll() is None
        p.stop()
        assert alive, f"a server died during the tests; log:\n{p.log_tail()}"


def run_ranks(fn, sessions):
    """Runs fn(rank, session) on every rank at once; returns each rank's result or exception."""
    with concurrent.futures.ThreadPoolExecutor(len(sessions)) as pool:
        futures = [pool.submit(fn, r, s) for r, s in enumerate(sessions)]
        out = []
        for f in futures:
            try:
                out.append(f.result(timeout=120))
            except Exception as exc:  # noqa: BLE001  (each rank's error is checked by the test)
                out.append(exc)
        return out


def values(results):
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


@contextlib.contextmanager
def own_group(tmp_path_factory, tmp_path, n, name):
    """n servers of the test's own, a session on each joined as one group through a file
    rendezvous: yields (server processes, sessions); everything stops afterwards."""
    procs = start_servers(tmp_path_factory, n, name)
    clients = [tensord.connect(p.address) for p in procs]
    try:
        sessions = [c.session() for c in clients]
        group = f"{name}-{uuid.uuid4().hex[:8]}"
        values(run_ranks(lambda r, s: s.join_group(group, r, n, f"file://{tmp_path}"), sessions))
        yield procs, sessions
    finally:
        for c in clients:
            c.close()
        for p in procs:
            p.stop()


def assert_serves_on(sess):
    np.testing.assert_array_equal(sess.op("add", sess.tensor(np.ones(2)), 1.0).numpy(), [2, 2])


@pytest.fixture
def group(servers, tmp_path):
    """A joined group of WORLD sessions, one per server, through a file rendezvous."""
    sessions = [c.session() for c in servers]
    name = f"g-{uuid.uuid4().hex[:8]}"
    uri = f"file://{tmp_path}"
    infos = values(run_ranks(lambda r, s: s.join_group(name, r, WORLD, uri), sessions))
    assert [i.rank for i in infos] == list(range(WORLD))
    assert {(i.name, i.world_size, i.backend) for i in infos} == {(name, WORLD, "gloo")}
    yield sessions
    for s in sessions:
        try:
            s.close()
        except tensord.TensordError:
            pass


def rank_inputs(dtype, shape=(2, 3), seed=0):
    rng = np.random.default_rng(seed)
    if np.issubdtype(dtype, np.integer):
        return [rng.integers(-5, 6, size=shape).astype(dtype) for _ in range(WORLD)]
    return [(rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1, 1], size=shape)).astype(dtype)
            for _ in range(WORLD)]


REDUCE = {"sum": lambda xs: np.sum(xs, axis=0), "mean": lambda xs: np.mean(xs, axis=0),
          "max": lambda xs: np.max(xs, axis=0), "min": lambda xs: np.min(xs, axis=0),
          "product": lambda xs: np.prod(xs, axis=0)}


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int32, np.uint8,
                                   np.int8, np.int16])
@pytest.mark.parametrize("op", sorted(REDUCE))
def test_all_reduce(group, op, dtype):
    if op == "mean" and np.issubdtype(dtype, np.integer):
        pytest.skip("mean takes floats (DTYPE_MISMATCH, tested below)")
    xs = rank_inputs(dtype)
    got = values(run_ranks(lambda r, s: s.op("all_reduce", s.tensor(xs[r]), op=op).numpy(),
                           group))
    # u8/i8/i16 reduce in i32 and wrap into their dtype, as numpy's wider result cast back.
    want = REDUCE[op](np.stack(xs)).astype(dtype)
    for r, g in enumerate(got):
        assert g.dtype == dtype
        np.testing.assert_allclose(g, want, rtol=1e-6 if dtype == np.float32 else 1e-12,
                                   err_msg=f"rank {r}")


def test_gather_scatter_broadcast_reduce_barrier(group):
    xs = rank_inputs(np.float64, shape=(WORLD * 2, 3))

    def step(r, s):
        x = s.tensor(xs[r])
        with s.batch():
            gathered = s.op("all_gather", x)
            scalar = s.op("all_gather", s.tensor(np.float64(r)))
            scattered = s.op("reduce_scatter", x, op="sum")
            averaged = s.op("reduce_scatter", x, op="mean")
            cast = s.op("broadcast", x, src=2)
            reduced = s.op("reduce", x, dst=1)
            assert s.op("barrier") is None
        return [t.numpy() for t in (gathered, scalar, scattered, averaged, cast, reduced)]
    results = values(run_ranks(step, group))
    total = np.sum(xs, axis=0)
    for r, (gathered, scalar, scattered, averaged, cast, reduced) in enumerate(results):
        np.testing.assert_array_equal(gathered, np.concatenate(xs))
        np.testing.assert_array_equal(scalar, np.arange(WORLD, dtype=np.float64))
        np.testing.assert_allclose(scattered, total[2 * r:2 * r + 2], rtol=1e-12)
        np.testing.assert_allclose(averaged, total[2 * r:2 * r + 2] / WORLD, rtol=1e-12)
        np.testing.assert_array_equal(cast, xs[2])
        np.testing.assert_allclose(reduced, total if r == 1 else np.zeros_like(total),
                                   rtol=1e-12)


def test_moves_every_dtype_bit_for_bit(group):
    """all_gather and broadcast move storage: bf16, f16, bool, u8, i8 and i16 too."""
    for dtype in ["bf16", "f16", "bool", "u8", "i8", "i16"]:
        def step(r, s):
            x = s.op("to_dtype", s.tensor(np.array([r, 1.5, -2.0])), dtype=dtype)
            return (s.op("all_gather", x).numpy(), s.op("broadcast", x, src=3).numpy())

        def rank_values(r):
            v = np.array([r, 1.5, -2.0])
            if dtype in ("u8", "i8", "i16"):  # to_dtype truncates, and wraps -2 in u8
                return np.trunc(v).astype(np.int64).astype({"u8": np.uint8, "i8": np.int8,
                                                            "i16": np.int16}[dtype])
            return (v != 0) if dtype == "bool" else v
        for gathered, cast in values(run_ranks(step, group)):
            np.testing.assert_array_equal(
                np.asarray(gathered, np.float64),
                np.concatenate([rank_values(r) for r in range(WORLD)]).astype(np.float64))
            np.testing.assert_array_equal(np.asarray(cast, np.float64),
                                          rank_values(3).astype(np.float64))


CASES = [("all_reduce", {"op": "sum"}), ("all_reduce", {"op": "mean"}),
         ("all_reduce", {"op": "max"}), ("all_reduce", {"op": "min"}),
         ("all_reduce", {"op": "product"}), ("all_gather", {}),
         ("reduce_scatter", {"op": "sum"}), ("reduce_scatter", {"op": "mean"}),
         ("broadcast", {"src": 1}), ("reduce", {"dst": 2})]


@pytest.mark.parametrize("name,attrs", CASES, ids=[f"{n}-{a}" for n, a in CASES])
def test_f64_gradients_by_central_differences(group, name, attrs):
    """L = sum over ranks of <w_r, op(x_r)>: each rank's backward gives dL/dx_r (the rule's
    collectives carry the other ranks' terms), checked along a random direction against the
    group's own forward."""
    rng = np.random.default_rng(7)
    shape = (WORLD, 3)
    xs = [rng.uniform(0.5, 2.0, size=shape) * rng.choice([-1, 1], size=shape)
          for _ in range(WORLD)]
    if attrs.get("op") == "product":
        xs[1][0, 0] = 0.0  # one zero in the group: the exact rule, not y / x
        xs[2][1, :] = 0.0
        xs[3][1, 0] = 0.0
    out_rows = {"all_gather": WORLD * WORLD, "reduce_scatter": 1}.get(name, WORLD)
    ws = [rng.standard_normal((out_rows, 3)) for _ in range(WORLD)]
    vs = [rng.standard_normal(shape) for _ in range(WORLD)]

    def loss(s, r, x):
        return s.op("sum", s.op("mul", s.op(name, x, **attrs), s.tensor(ws[r])))

    def grad(r, s):
        with s.autodiff() as ctx:
            x = s.tensor(xs[r], requires_grad=True)
            grads = ctx.backward(loss(s, r, x))
            return grads[x].numpy()

    def forward(h):
        def step(r, s):
            return float(loss(s, r, s.tensor(xs[r] + h * vs[r])).numpy())
        return sum(values(run_ranks(step, group)))
    grads = values(run_ranks(grad, group))
    analytic = sum(float(np.sum(g * v)) for g, v in zip(grads, vs))
    step = 1e-6
    numeric = (forward(step) - forward(-step)) / (2 * step)
    assert abs(numeric - analytic) <= 1e-7 + 1e-6 * abs(numeric), (analytic, numeric)


def expect_on_every_rank(results, reason, **metadata):
    for r, err in enumerate(results):
        assert isinstance(err, tensord.TensordError), f"rank {r} got {err!r}"
        assert err.reason == reason, f"rank {r}: {err}"
        for k, v in metadata.items():
            assert err.metadata.get(k) == v, f"rank {r}: {k}={err.metadata.get(k)} ({err})"


def all_reduce_works(group):
    got = values(run_ranks(lambda r, s: s.op("all_reduce", s.tensor(np.ones(2))).numpy(), group))
    for g in got:
        np.testing.assert_array_equal(g, [WORLD, WORLD])


def test_context_not_enabled_fails_on_every_rank_before_data_moves(group):
    """The seed failure: rank 2's tensor belongs to a closed context, so every rank's
    all_reduce fails with AUTODIFF_CONTEXT_NOT_ENABLED naming rank 2, and the group goes on."""
    def step(r, s):
        ctx = s.autodiff()
        x = s.tensor(np.ones(2), requires_grad=True, ctx=ctx)
        if r == 2:
            ctx.close()
        return s.op("all_reduce", x)
    results = run_ranks(step, group)
    expect_on_every_rank(results, "AUTODIFF_CONTEXT_NOT_ENABLED", op="all_reduce", rank="2",
                         device="cpu")
    assert results[2].metadata["context_state"] == "closed"
    assert all(type(e).__name__ == "AutodiffContextNotEnabled" for e in results)
    assert all(e.metadata["group"] == results[0].metadata["group"] for e in results)
    all_reduce_works(group)


def test_context_not_enabled_in_a_disabled_session(servers, tmp_path):
    """Autodiff disabled on one rank's session: its requires-grad put is refused there; a
    collective of that rank's plain tensor still runs with the others'."""
    sessions = [c.session(autodiff=(r != 1)) for r, c in enumerate(servers)]
    name = f"d-{uuid.uuid4().hex[:8]}"
    values(run_ranks(lambda r, s: s.join_group(name, r, WORLD, f"file://{tmp_path}"), sessions))
    with pytest.raises(tensord.TensordError) as err:
        sessions[1].tensor(np.ones(2), requires_grad=True)
    assert err.value.reason == "AUTODIFF_CONTEXT_NOT_ENABLED"
    all_reduce_works(sessions)
    for s in sessions:
        s.close()


def test_unmarked_op_in_a_group_is_typed_on_every_rank(group):
    """assign on a recorded autodiff tensor (not marked for autodiff) in the batch every rank
    runs: OPERATION_NOT_MARKED_FOR_AUTODIFF on each, naming the group and rank."""
    def step(r, s):
        with s.autodiff():
            x = s.tensor(np.ones(2), requires_grad=True)
            with s.batch():
                y = s.op("all_reduce", s.op("mul", x, 2.0))
                s.op("assign", y, s.tensor(np.zeros(2)))
    results = run_ranks(step, group)
    expect_on_every_rank(results, "OPERATION_NOT_MARKED_FOR_AUTODIFF", op="assign")
    for r, e in enumerate(results):
        assert e.metadata["rank"] == str(r) and e.metadata["group"]
    all_reduce_works(group)


def test_mismatched_calls_fail_alike_and_send_nothing(group):
    def shapes(r, s):
        return s.op("all_reduce", s.tensor(np.ones(3 if r != 3 else 4)))
    expect_on_every_rank(run_ranks(shapes, group), "COLLECTIVE_MISMATCH", field="shape",
                         peer_rank="3")

    def ops(r, s):
        x = s.tensor(np.ones(4))
        return s.op("all_gather", x) if r == 1 else s.op("all_reduce", x)
    expect_on_every_rank(run_ranks(ops, group), "COLLECTIVE_MISMATCH", field="op",
                         peer_rank="1")

    def attrs(r, s):
        return s.op("all_reduce", s.tensor(np.ones(4)), op="max" if r == 2 else "sum")
    expect_on_every_rank(run_ranks(attrs, group), "COLLECTIVE_MISMATCH", field="attrs")

    def dtypes(r, s):
        return s.op("all_reduce", s.tensor(np.ones(4, np.float32 if r else np.float64)))
    expect_on_every_rank(run_ranks(dtypes, group), "COLLECTIVE_MISMATCH", field="dtype")
    all_reduce_works(group)


def test_one_rank_refusing_any_check_fails_every_rank(group):
    def bad_attr(r, s):
        return s.op("broadcast", s.tensor(np.ones(2)), src=WORLD if r == 0 else 0)
    expect_on_every_rank(run_ranks(bad_attr, group), "BAD_ATTRIBUTE", rank="0")

    def mean_of_ints(r, s):
        return s.op("all_reduce", s.tensor(np.ones(2, np.int64)), op="mean")
    expect_on_every_rank(run_ranks(mean_of_ints, group), "DTYPE_MISMATCH")

    def indivisible(r, s):
        return s.op("reduce_scatter", s.tensor(np.ones(WORLD + 1)))
    expect_on_every_rank(run_ranks(indivisible, group), "SHAPE_MISMATCH")
    all_reduce_works(group)


def opencl_device(sess):
    """The servers' first OpenCL device (PoCL's in CI), or a skip. (Not a CUDA device: its
    library, NCCL, takes one rank per GPU, and these servers share a machine.)"""
    names = [d["name"] for d in sess.devices() if d["name"].startswith("opencl:")]
    if not names:
        pytest.skip("the servers have no OpenCL device")
    return names[0]


def test_collectives_on_an_opencl_device_stage_through_the_host(group):
    """Ranks 0 and 2 on an OpenCL device, 1 and 3 on cpu: every collective gives numpy's
    values, each rank's result on its own device; an f64 gradient through the device; a
    refusal there (closed context) typed on every rank, naming the device."""
    device = opencl_device(group[0])
    xs = rank_inputs(np.float64, shape=(WORLD * 2, 3), seed=3)
    on = [device if r % 2 == 0 else "cpu" for r in range(WORLD)]

    def step(r, s):
        x = s.op("to_device", s.tensor(xs[r]), device=on[r])
        with s.batch():
            outs = [s.op("all_reduce", x, op="sum"), s.op("all_reduce", x, op="max"),
                    s.op("all_gather", x), s.op("reduce_scatter", x, op="mean"),
                    s.op("broadcast", x, src=1), s.op("reduce", x, dst=2),
                    s.op("all_reduce", s.op("to_dtype", x, dtype="f32"), op="mean")]
        return [(t.device, t.numpy()) for t in outs]
    total = np.sum(xs, axis=0)
    for r, outs in enumerate(values(run_ranks(step, group))):
        assert {d for d, _ in outs} == {on[r]}, (r, outs)
        got = [v for _, v in outs]
        np.testing.assert_allclose(got[0], total, rtol=1e-12)
        np.testing.assert_array_equal(got[1], np.max(xs, axis=0))
        np.testing.assert_array_equal(got[2], np.concatenate(xs))
        np.testing.assert_allclose(got[3], total[2 * r:2 * r + 2] / WORLD, rtol=1e-12)
        np.testing.assert_array_equal(got[4], xs[1])
        np.testing.assert_allclose(got[5], total if r == 2 else np.zeros_like(total),
                                   rtol=1e-12)
        assert got[6].dtype == np.float32
        np.testing.assert_allclose(got[6], total / WORLD, rtol=1e-5, atol=1e-6)

    # L = sum_r <w_r, all_reduce(x_r)>: dL/dx_r = sum_r w_r on every rank.
    ws = rank_inputs(np.float64, shape=(2, 3), seed=4)

    def grad(r, s):
        with s.autodiff() as ctx:
            leaf = s.tensor(xs[r][:2], requires_grad=True)
            x = s.op("to_device", leaf, device=on[r])
            loss = s.op("sum", s.op("mul", s.op("all_reduce", x),
                                    s.op("to_device", s.tensor(ws[r]), device=on[r])))
            return ctx.backward(loss)[leaf].numpy()
    for g in values(run_ranks(grad, group)):
        np.testing.assert_allclose(g, np.sum(ws, axis=0), rtol=1e-12)

    def closed(r, s):
        ctx = s.autodiff()
        x = s.op("to_device", s.tensor(np.ones(2), requires_grad=True, ctx=ctx), device=on[r])
        if r == 2:
            ctx.close()
        return s.op("all_reduce", x)
    expect_on_every_rank(run_ranks(closed, group), "AUTODIFF_CONTEXT_NOT_ENABLED", rank="2",
                         device=device)
    all_reduce_works(group)


def test_group_membership(servers, tmp_path, group):
    s = servers[0].session()
    with pytest.raises(tensord.TensordError) as err:
        s.op("all_reduce", s.tensor(np.ones(2)))
    assert err.value.reason == "GROUP_NOT_JOINED"
    assert err.value.code.name == "FAILED_PRECONDITION"
    with pytest.raises(tensord.TensordError) as err:
        s.leave_group()
    assert err.value.reason == "GROUP_NOT_JOINED"
    with pytest.raises(tensord.TensordError) as err:
        group[0].join_group("other", 0, 1, f"file://{tmp_path}")
    assert err.value.reason == "GROUP_NOT_JOINED" and err.value.metadata["group"]
    for bad, field in [(dict(rank=2, world_size=2), "rank"),
                       (dict(rank=0, world_size=1, rendezvous="tcp://x"), "rendezvous"),
                       (dict(rank=0, world_size=1, rendezvous="file://relative"),
                        "rendezvous")]:
        args = dict(group="g", rank=0, world_size=1, rendezvous=f"file://{tmp_path}") | bad
        with pytest.raises(tensord.TensordError) as err:
            s.join_group(**args)
        assert err.value.reason == "INVALID_REQUEST" and err.value.metadata["field"] == field
    # A group of one: every collective is the identity, and the info shows it.
    solo = f"solo-{uuid.uuid4().hex[:8]}"
    s.join_group(solo, 0, 1, f"file://{tmp_path}")
    assert s.group.world_size == 1
    np.testing.assert_array_equal(s.op("all_gather", s.tensor(np.arange(3.0))).numpy(),
                                  np.arange(3.0))
    s.leave_group()
    assert s.group is None
    # A name is used once per store: the store still holds the first launch's keys.
    with pytest.raises(tensord.TensordError) as err:
        s.join_group(solo, 0, 1, f"file://{tmp_path}")
    assert err.value.reason == "INVALID_REQUEST" and err.value.metadata["field"] == "group"
    s.close()


def test_a_rank_that_never_arrives_is_peer_unavailable(group):
    """Ranks 0-2 call all_reduce, rank 3 does not: each fails with PEER_UNAVAILABLE within
    the timeout, naming rank 3 (or, having waited on rank 3's neighbour, the group broken)."""
    def step(r, s):
        if r == 3:
            return None
        started = time.monotonic()
        try:
            s.op("all_reduce", s.tensor(np.ones(2)))
        except tensord.TensordError as exc:
            return exc, time.monotonic() - started
        return "no error", 0
    results = run_ranks(step, group)
    for r, (err, took) in enumerate(results[:3]):
        assert isinstance(err, tensord.TensordError), f"rank {r}: {err}"
        assert err.reason == "PEER_UNAVAILABLE" and err.code.name == "UNAVAILABLE"
        assert err.metadata["peer_rank"] == "3", err
        assert took < TIMEOUT_S + 5
    # The group is broken now: the next call fails at once.
    with pytest.raises(tensord.TensordError) as err:
        group[0].op("all_reduce", group[0].tensor(np.ones(2)))
    assert err.value.reason == "PEER_UNAVAILABLE" and err.value.metadata["cause"] == "broken"


def test_a_server_may_allow_only_its_rendezvous_stores(tmp_path_factory, tmp_path):
    """--collective-rendezvous-prefix: other URIs are refused before the server writes a file
    or connects anywhere; world sizes past the limit are refused too."""
    allowed = tmp_path / "allowed"
    allowed.mkdir()
    proc = ServerProcess(server_binary(), tmp_path_factory.mktemp("allow") / "tensord.log",
                         ["--collective-address=127.0.0.1",
                          f"--collective-rendezvous-prefix=file://{allowed}/,redis://10.9.8.7:"])
    proc.start()
    try:
        with tensord.connect(proc.address) as c:
            s = c.session()
            for uri in [f"file://{tmp_path}/elsewhere", "redis://127.0.0.1:6379",
                        f"file://{allowed}"]:
                with pytest.raises(tensord.TensordError) as err:
                    s.join_group(f"a-{uuid.uuid4().hex[:8]}", 0, 1, uri)
                assert err.value.reason == "INVALID_REQUEST", uri
                assert err.value.metadata["cause"] == "not_allowed", uri
            assert not list(tmp_path.glob("elsewhere*"))
            with pytest.raises(tensord.TensordError) as err:
                s.join_group("huge", 0, 5000, f"file://{allowed}/")
            assert err.value.reason == "LIMIT_EXCEEDED"
            assert err.value.metadata["limit"] == "max_world_size"
            info = s.join_group(f"a-{uuid.uuid4().hex[:8]}", 0, 1, f"file://{allowed}/")
            assert info.world_size == 1
    finally:
        proc.stop()


def test_rendezvous_timeout_names_the_missing_rank(servers, tmp_path):
    s = servers[0].session()
    started = time.monotonic()
    with pytest.raises(tensord.TensordError) as err:
        s.join_group(f"late-{uuid.uuid4().hex[:8]}", 0, 2, f"file://{tmp_path}")
    assert err.value.reason == "PEER_UNAVAILABLE"
    assert err.value.metadata["cause"] == "rendezvous"
    assert err.value.metadata["peer_rank"] == "1"
    assert time.monotonic() - started < TIMEOUT_S + 5
    s.close()


def test_closing_a_session_ends_its_wait(group):
    """Rank 0 waits in all_reduce for ranks that never come; closing its session from another
    connection ends the wait at once and frees the session."""
    s = group[0]
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        started = time.monotonic()
        waiting = pool.submit(lambda: s.op("all_reduce", s.tensor(np.ones(2))))
        time.sleep(0.5)
        s.close()
        with pytest.raises(tensord.TensordError) as err:
            waiting.result(timeout=TIMEOUT_S + 5)
    assert err.value.reason in ("PEER_UNAVAILABLE", "SESSION_NOT_FOUND")
    assert time.monotonic() - started < TIMEOUT_S


def test_a_stopping_server_ends_its_waits_for_peers(tmp_path_factory, tmp_path):
    """SIGTERM while rank 0 waits in all_reduce for a rank that never calls: the server stops
    within its shutdown grace, not after the 30 s collective timeout."""
    procs = []
    for r in range(2):
        p = ServerProcess(server_binary(), tmp_path_factory.mktemp(f"stop{r}") / "tensord.log",
                          ["--collective-address=127.0.0.1", "--collective-timeout=30s",
                           "--shutdown-grace=1s"])
        p.start()
        procs.append(p)
    clients = [tensord.connect(p.address) for p in procs]
    try:
        sessions = [c.session() for c in clients]
        name = f"t-{uuid.uuid4().hex[:8]}"
        values(run_ranks(lambda r, s: s.join_group(name, r, 2, f"file://{tmp_path}"), sessions))
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            s = sessions[0]
            waiting = pool.submit(lambda: s.op("all_reduce", s.tensor(np.ones(2))))
            time.sleep(0.5)
            started = time.monotonic()
            procs[0].proc.send_signal(signal.SIGTERM)
            assert procs[0].proc.wait(timeout=20) == 0
            took = time.monotonic() - started
            with pytest.raises(tensord.TensordError):
                waiting.result(timeout=5)
        assert took < 10, took
    finally:
        for c in clients:
            c.close()
        for p in procs:
            p.stop()


def test_a_killed_rank_fails_the_others_at_once(tmp_path_factory, tmp_path):
    with own_group(tmp_path_factory, tmp_path, 2, "killed") as (procs, sessions):
        all_reduce_works_n = values(run_ranks(
            lambda r, s: s.op("all_reduce", s.tensor(np.ones(2))).numpy(), sessions))
        np.testing.assert_array_equal(all_reduce_works_n[0], [2, 2])
        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            s = sessions[0]
            started = time.monotonic()
            waiting = pool.submit(lambda: s.op("all_reduce", s.tensor(np.ones(2))))
            time.sleep(0.5)
            procs[1].proc.send_signal(signal.SIGKILL)
            with pytest.raises(tensord.TensordError) as err:
                waiting.result(timeout=TIMEOUT_S + 5)
        assert err.value.reason == "PEER_UNAVAILABLE"
        assert err.value.metadata["peer_rank"] == "1"
        assert err.value.metadata["cause"] == "connection", err.value
        assert time.monotonic() - started < TIMEOUT_S
        assert_serves_on(sessions[0])


def test_a_rank_killed_while_data_moves_is_named(tmp_path_factory, tmp_path):
    """Three ranks all-reduce a large tensor and rank 2 is killed while the data moves. No
    connection error says which rank died (a rank sees its neighbour's connection close): the
    survivors find it through the rendezvous store, fail with PEER_UNAVAILABLE naming rank 2,
    and serve on."""
    with own_group(tmp_path_factory, tmp_path, 3, "datakill") as (procs, sessions):
        # A size whose all_reduce takes long enough to be killed in the middle of.
        n = 1 << 25
        while True:
            big = [s.tensor(np.ones(n, np.float32)) for s in sessions]
            took = float("inf")
            for _ in range(2):  # the first run also pages its buffers in
                started = time.monotonic()
                values(run_ranks(lambda r, s: s.op("all_reduce", big[r]).shape, sessions))
                took = min(took, time.monotonic() - started)
            if took > 0.3 or n >= 1 << 27:
                break
            n *= 2
        assert took > 0.15, f"an all_reduce of {n} f32 took only {took:.2f} s"
        with concurrent.futures.ThreadPoolExecutor(3) as pool:
            futures = [pool.submit(lambda r=r: sessions[r].op("all_reduce", big[r]).shape)
                       for r in range(3)]
            time.sleep(took / 3)
            procs[2].proc.send_signal(signal.SIGKILL)
            errors = []
            for f in futures[:2]:
                with pytest.raises(tensord.TensordError) as err:
                    f.result(timeout=TIMEOUT_S + 10)
                errors.append(err.value)
        for err in errors:
            assert err.reason == "PEER_UNAVAILABLE", err
            assert err.metadata["peer_rank"] == "2", err
        assert_serves_on(sessions[0])


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="needs Debian's redis-server")
def test_redis_rendezvous(servers, tmp_path):
    port = _free_port()
    redis = subprocess.Popen(["redis-server", "--port", str(port), "--save", "",
                              "--appendonly", "no", "--dir", str(tmp_path)],
                             stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        sessions = [c.session() for c in servers]
        name = f"r-{uuid.uuid4().hex[:8]}"
        values(run_ranks(lambda r, s: s.join_group(name, r, WORLD, f"redis://127.0.0.1:{port}"),
                         sessions))
        all_reduce_works(sessions)
        for s in sessions:
            s.close()
    finally:
        redis.send_signal(signal.SIGTERM)
        redis.wait(timeout=10)


def test_collectives_are_listed_for_every_backend(servers):
    sess = servers[0].session()
    ops = {o["name"]: o for o in sess.ops()}
    kinds = sorted({d["kind"] for d in sess.devices()})
    for name in ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "barrier"]:
        assert ops[name]["category"] == "distributed"
        assert sorted(ops[name]["backends"]) == kinds, ops[name]
    assert ops["barrier"]["marking"] == "non_differentiable"
    assert ops["all_reduce"]["marking"] == "differentiable"

