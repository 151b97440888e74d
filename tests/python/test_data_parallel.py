"""examples/data_parallel/train.py on real tensord processes: three steps on 4 servers, each
rank training on a quarter of every batch with its gradients averaged by the servers
(bucketed all_reduce, while the backward runs or after it) and the SGD step applied there,
leave the parameters of a single-server run on the whole batches (f64 to 1e-12, f32 to the
rounding of another summation order), in the compiled and the eager path; and a server killed
with SIGKILL mid-training fails the step on every other rank with PEER_UNAVAILABLE within the
collective timeout, undoing that step; and the driver's command line trains on servers it
starts."""
import os
import re
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensord
from conftest import REPO, ServerProcess, server_binary

sys.path.insert(0, str(REPO / "examples" / "data_parallel"))
import train as dp  # noqa: E402

TIMEOUT_S = 5  # --collective-timeout of the servers here
WORLD = 4
STEPS = 3
BATCH = 128
LR, MOMENTUM = 0.5, 0.9  # large steps: three of them move every parameter
# 8 KiB per bucket: [W1, b1], [W2] (a bucket of its own: 16 KiB in f32), [b2, W3, b3].
BUCKET_BYTES = 8 * 1024


def start_servers(tmp_path_factory, n, name):
    procs = []
    try:
        for r in range(n):
            p = ServerProcess(server_binary(), tmp_path_factory.mktemp(f"{name}{r}") /
                              "tensord.log", ["--collective-address=127.0.0.1",
                                              f"--collective-timeout={TIMEOUT_S}s"])
            procs.append(p)
            p.start()
    except BaseException:
        for p in procs:
            p.stop()
        raise
    return procs


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    procs = start_servers(tmp_path_factory, WORLD, "dp")
    yield procs
    for p in procs:
        alive = p.proc is not None and p.proc.poll() is None
        p.stop()
        assert alive, f"a server died during the tests; log:\n{p.log_tail()}"


def single_server_run(address, x, y, init, plan, device=None):
    """The reference: one session trains on the whole of every batch (no group, no
    collective), same model, same SGD."""
    with tensord.connect(address) as client, client.session(device=device) as sess:
        with sess.autodiff() as ctx:
            params = [sess.tensor(v, requires_grad=True) for v in init]
            opt = tensord.optim.SGD(params, lr=LR, momentum=MOMENTUM)
            for indices in plan:
                with sess.batch():
                    loss = dp.loss_of(sess, params, sess.tensor(x[indices]),
                                      sess.tensor(y[indices]))
                opt.step(ctx.backward(loss))
            return [p.numpy() for p in params]


def close_all(ranks):
    for rank in ranks:
        rank.close()


@pytest.mark.parametrize("mode,overlap", [("program", True), ("eager", True),
                                          ("program", False), ("eager", False)])
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_four_sharded_ranks_equal_one_server_on_the_whole_batch(servers, tmp_path, mode, dtype,
                                                                overlap):
    """overlap: the servers reduce the buckets while the backward runs (reduce=); otherwise
    as calls of their own after it."""
    x, y, _, _, init, plan = dp.problem(seed=1, dtype=dtype, batch=BATCH, steps=STEPS)
    want = single_server_run(servers[0].address, x, y, init, plan)
    ranks = dp.join([p.address for p in servers], f"file://{tmp_path}", init, lr=LR,
                    momentum=MOMENTUM, bucket_bytes=BUCKET_BYTES, mode=mode, overlap=overlap)
    try:
        assert [len(b) for b in ranks[0].buckets] == [2, 1, 3]
        dp.run_steps(ranks, x, y, plan)
        got = dp.on_every_rank(lambda r: ranks[r].parameters(), WORLD)
    finally:
        close_all(ranks)
    check_parameters(got, want, init, dtype)


def check_parameters(got, want, init, dtype):
    """Every rank's parameters (got[r]) against the single-server run's (want)."""
    for r in range(WORLD):
        assert not isinstance(got[r], BaseException), got[r]
        for i, (g, w) in enumerate(zip(got[r], want)):
            assert g.dtype == w.dtype
            # Every rank applied the same averaged gradient: the copies are bit for bit equal.
            np.testing.assert_array_equal(g, got[0][i], err_msg=f"rank {r}, parameter {i}")
            moved = np.max(np.abs(w - init[i]))
            assert moved > 1e-3, f"parameter {i} hardly moved ({moved})"
            if dtype == "f64":
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12,
                                           err_msg=f"rank {r}, parameter {i}")
            else:
                # The gradient is summed in another order (4 shard means, then their mean):
                # a few f32 roundings of the gradient, times lr, over three steps.
                np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6,
                                           err_msg=f"rank {r}, parameter {i}")


@pytest.mark.parametrize("mode", ["program", "eager"])
def test_ranks_on_an_opencl_device_equal_one_server_there(servers, tmp_path, mode):
    """Every rank's tensors on an OpenCL device (PoCL's in CI): the servers' gradient buckets
    stage through host memory for Gloo, and the parameters after three steps are those of one
    server training on the whole batches on that device."""
    with tensord.connect(servers[0].address) as client:
        gpus = [d["name"] for d in client.devices() if d["name"].startswith("opencl:")]
    if not gpus:
        pytest.skip("the servers have no OpenCL device")
    x, y, _, _, init, plan = dp.problem(seed=3, dtype="f64", batch=BATCH, steps=STEPS)
    want = single_server_run(servers[0].address, x, y, init, plan, device=gpus[0])
    ranks = dp.join([p.address for p in servers], f"file://{tmp_path}", init, lr=LR,
                    momentum=MOMENTUM, bucket_bytes=BUCKET_BYTES, mode=mode, device=gpus[0])
    try:
        assert all(p.device == gpus[0] for p in ranks[0].params)
        dp.run_steps(ranks, x, y, plan)
        got = dp.on_every_rank(lambda r: ranks[r].parameters(), WORLD)
    finally:
        close_all(ranks)
    check_parameters(got, want, init, "f64")


def test_a_killed_server_fails_the_step_on_every_other_rank(tmp_path_factory, tmp_path):
    procs = start_servers(tmp_path_factory, WORLD, "dpkill")
    victim, kill_after = 2, 3
    x, y, _, _, init, plan = dp.problem(seed=2, dtype="f32", batch=BATCH, steps=1000)
    ranks = []
    try:
        ranks = dp.join([p.address for p in procs], f"file://{tmp_path}", init, lr=LR,
                        momentum=MOMENTUM, bucket_bytes=BUCKET_BYTES, mode="program")
        killed = {}
        before = {}
        lock = threading.Lock()

        def on_step(r, k, loss):
            # Rank 0, after its step 3, notes its parameters and kills rank 2's server: rank 0's
            # step 4 cannot have started, rank 2 may be waiting in it.
            if r == 0 and k == kill_after:
                with lock:
                    before["params"] = ranks[0].parameters()
                    procs[victim].proc.send_signal(signal.SIGKILL)
                    killed["at"] = time.monotonic()
        started = time.monotonic()
        with pytest.raises(dp.RankFailure) as failure:
            dp.run_steps(ranks, x, y, plan, on_step)
        took = time.monotonic() - started
        assert "at" in killed, f"no rank failed before the kill: {failure.value}"
        errors = failure.value.errors
        assert set(errors) == set(range(WORLD)), failure.value
        for r, (err, at, step) in errors.items():
            assert isinstance(err, tensord.TensordError), f"rank {r}: {err!r}"
            if r == victim:
                assert err.code.name == "UNAVAILABLE", f"rank {r}: {err}"
                continue
            assert err.reason == "PEER_UNAVAILABLE" and err.code.name == "UNAVAILABLE", \
                f"rank {r}: {err}"
            assert err.metadata["group"] == ranks[0].group.name
            # Within the timeout: at once where a connection to the dead rank breaks, at the
            # timeout where a rank waits on a live peer that has already given up.
            assert at - killed["at"] < TIMEOUT_S + 3, f"rank {r} failed {at - killed['at']} s " \
                "after the kill"
            assert step in (kill_after, kill_after + 1), f"rank {r} failed in step {step}"
        assert errors[0][2] == kill_after + 1
        assert took < 30
        # Rank 0's failed step was undone: its parameters are those of its last step.
        for i, (now, then) in enumerate(zip(ranks[0].parameters(), before["params"])):
            np.testing.assert_array_equal(now, then, err_msg=f"parameter {i}")
        # The group is broken; the survivors' servers serve on.
        with pytest.raises(tensord.TensordError) as err:
            ranks[1].step(x[:BATCH // WORLD], y[:BATCH // WORLD])
        assert err.value.reason == "PEER_UNAVAILABLE"
        assert err.value.metadata["cause"] == "broken"
        s = ranks[3].sess
        np.testing.assert_array_equal(s.op("add", s.tensor(np.ones(2)), 1.0).numpy(), [2, 2])
    finally:
        close_all(ranks)
        for r, p in enumerate(procs):
            alive = p.proc is not None and p.proc.poll() is None
            p.stop()
            if r != victim:
                assert alive, f"server {r} died; log:\n{p.log_tail()}"


def test_the_driver_trains_on_local_servers():
    """train.py --local 2 starts two servers, trains through the compiled step and stops them."""
    proc = subprocess.run([sys.executable, str(REPO / "examples" / "data_parallel" / "train.py"),
                           "--local", "2", "--steps", "150", "--log-every", "50"],
                          capture_output=True, text=True, timeout=120,
                          env={**os.environ, "TENSORD_BIN": str(server_binary())})
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "2 ranks" in out and "program mode" in out, out
    match = re.search(r"test accuracy ([0-9.]+); largest parameter difference between ranks "
                      r"(\S+)", out)
    assert match, out
    assert float(match.group(2)) == 0.0, out
    assert float(match.group(1)) > 0.7, out  # three classes: chance is 1/3
