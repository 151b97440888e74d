"""Several clients at once through the Python client, each with its own connection and
session: eager batches of temporaries, a compiled training step (forward, backward, SGD with
momentum) mirrored in numpy, an inference program, puts and gets of every dtype, moves between
cpu and the accelerator (TENSORD_TEST_GPU_DEVICE, default opencl:0, when the server lists it;
required with TENSORD_REQUIRE_GPU) and refused calls in between. Every result is compared with
numpy; no call may fail unexpectedly, and neither a session's memory nor the server's RSS may
grow from the first round to the second."""
import gc
import os
import threading
import traceback

import numpy as np
import pytest

import tensord

DEVICE = os.environ.get("TENSORD_TEST_GPU_DEVICE", "opencl:0")
CLIENTS = 4
STEPS = 80  # per client and round
RSS_SLACK_KIB = 16 << 10
LR, MOMENTUM = 0.05, 0.9
DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


def accelerator(client):
    names = [d["name"] for d in client.devices()]
    if DEVICE in names:
        return DEVICE
    if os.environ.get("TENSORD_REQUIRE_GPU"):
        pytest.fail(f"the server has no device {DEVICE} (devices: {names})")
    return None


def rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for pid {pid}")


class Worker:
    """One client, one session; `round()` runs STEPS mixed steps and records what went wrong
    instead of raising, so that one bad answer does not hide the others."""

    def __init__(self, address, seed, device):
        self.client = tensord.connect(address)
        self.sess = self.client.session()
        self.rng = np.random.default_rng(seed)
        self.device = device
        self.errors = []  # unexpected exceptions
        self.wrong = []   # results that differ from numpy, refusals that did not happen
        self.checks = 0
        self.refusals = 0
        sess = self.sess
        self.ctx = sess.autodiff()
        self.wn = self.rng.standard_normal((6, 1))
        self.w = sess.tensor(self.wn, requires_grad=True, ctx=self.ctx)
        self.opt = tensord.optim.SGD([self.w], lr=LR, momentum=MOMENTUM)
        self.buf = None

        def train_step(x, y):
            loss = sess.op("mse_loss", x @ self.w, y)
            self.opt.step(self.ctx.backward(loss))
            return loss

        x0, y0 = np.zeros((16, 6)), np.zeros((16, 1))
        self.train = sess.compile(train_step, x0, y0)
        self.infer = sess.compile(lambda x: sess.op("relu", x @ self.w) * 0.5, x0)

    # -- checks ----------------------------------------------------------------------------------
    def same(self, what, got, want, rtol=1e-10, atol=1e-12):
        self.checks += 1
        try:
            np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
        except AssertionError as e:
            self.wrong.append(f"{what}: {e}")

    def refused(self, what, reason, fn, **metadata):
        try:
            fn()
        except tensord.TensordError as e:
            self.refusals += 1
            if e.reason != reason or any(e.metadata.get(k) != v for k, v in metadata.items()):
                self.wrong.append(f"{what}: {e}")
            return
        self.wrong.append(f"{what}: not refused")

    # -- the steps -------------------------------------------------------------------------------
    def eager_batch(self):
        sess = self.sess
        x = self.rng.standard_normal((8, 6))
        m = self.rng.standard_normal((6, 3))
        with sess.batch():
            h = sess.op("tanh", sess.tensor(x) * 0.5)
            y = sess.op("relu", h @ m) - sess.tensor(np.ones(3))
            total = sess.op("sum", y)
        want = np.maximum(np.tanh(x * 0.5) @ m, 0) - 1.0
        self.same("eager batch", y.numpy(), want)
        self.same("eager batch sum", total.item(), want.sum())

    def train_step(self):
        x = self.rng.standard_normal((16, 6))
        y = x @ np.arange(1.0, 7.0)[:, None] + 0.1 * self.rng.standard_normal((16, 1))
        err = x @ self.wn - y
        want_loss = np.mean(err ** 2)
        grad = 2.0 * x.T @ err / err.size
        self.buf = grad if self.buf is None else MOMENTUM * self.buf + grad
        self.wn = self.wn - LR * self.buf
        self.same("compiled step loss", self.train(x, y), want_loss, rtol=1e-10)
        if self.rng.random() < 0.3:
            self.same("weights after the step", self.w.numpy(), self.wn, rtol=1e-9, atol=1e-12)

    def inference(self):
        x = self.rng.standard_normal((16, 6))
        self.same("inference program", self.infer(x), np.maximum(x @ self.wn, 0) * 0.5,
                  rtol=1e-9, atol=1e-12)

    def put_get(self):
        dtype = DTYPES[self.rng.integers(len(DTYPES))]
        shape = tuple(int(s) for s in self.rng.integers(0, 9, self.rng.integers(0, 4)))
        if self.rng.random() < 0.05:
            shape = (300, 500)  # several chunks each way
        value = (self.rng.standard_normal(shape) * 50).astype(dtype)
        t = self.sess.tensor(value)
        got = t.numpy()
        self.checks += 1
        if got.dtype != value.dtype or got.shape != value.shape or \
                not np.array_equal(got, value):
            self.wrong.append(f"put/get {dtype.__name__}{shape}: got {got!r}")
        if self.rng.random() < 0.5:
            t.release()

    def device_moves(self):
        sess, dev = self.sess, self.device
        x = self.rng.standard_normal((5, 7))
        on_dev = sess.tensor(x, device=dev) if self.rng.random() < 0.5 else \
            sess.op("to_device", sess.tensor(x), device=dev)
        self.checks += 1
        if on_dev.device != dev:
            self.wrong.append(f"put on {dev}: the tensor is on {on_dev.device}")
        with sess.batch():
            back = sess.op("to_device", sess.op("tanh", on_dev * 2.0) + 1.0, device="cpu")
        self.checks += 1
        if back.device != "cpu":
            self.wrong.append(f"to_device cpu: the tensor is on {back.device}")
        self.same(f"tanh on {dev}", back.numpy(), np.tanh(x * 2.0) + 1.0, rtol=1e-6, atol=1e-7)
        self.refused(f"cpu and {dev} in one op", "DEVICE_MISMATCH",
                     lambda: sess.op("add", on_dev, sess.tensor(x)))

    def refusals_in_between(self, k):
        sess = self.sess
        if k % 3 == 0:
            self.refused("matmul of bad shapes", "SHAPE_MISMATCH", lambda: sess.op(
                "matmul", sess.tensor(np.ones((2, 3))), np.ones((4, 5))))
        elif k % 3 == 1:
            def bad_batch():
                with sess.batch():
                    h = sess.op("neg", sess.tensor(np.ones((2, 3))))
                    sess.op("add", h, sess.tensor(np.ones(4)))
            self.refused("a batch with a bad call", "SHAPE_MISMATCH", bad_batch,
                         call_index="1")
        else:
            # A bad run of the compiled step changes nothing: the numpy mirror stays right.
            self.refused("a run on inputs of the wrong shape", "SHAPE_MISMATCH",
                         lambda: self.train(np.zeros((3, 6)), np.zeros((16, 1))),
                         parameter_index="0")

    def round(self, barrier):
        barrier.wait()
        for k in range(STEPS):
            steps = [self.eager_batch, self.train_step, self.inference, self.put_get,
                     lambda: self.refusals_in_between(k)]
            if self.device:
                steps.append(self.device_moves)
            for i in self.rng.permutation(len(steps)):
                try:
                    steps[i]()
                except Exception:  # noqa: BLE001  (recorded, asserted on below)
                    self.errors.append(traceback.format_exc())
        try:
            self.same("weights after the round", self.w.numpy(), self.wn, rtol=1e-9, atol=1e-12)
        except Exception:  # noqa: BLE001
            self.errors.append(traceback.format_exc())

    def memory_used(self) -> int:
        return self.sess.info().memory_used_bytes  # after the queued releases are sent

    def close(self):
        try:
            self.train.release()
            self.infer.release()
            self.sess.close()
        finally:
            self.client.close()


def run_round(workers):
    barrier = threading.Barrier(len(workers))
    threads = [threading.Thread(target=w.round, args=(barrier,), name=f"client-{i}")
               for i, w in enumerate(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    assert not any(t.is_alive() for t in threads), "a client hung"
    gc.collect()


def test_concurrent_clients(server, client):
    device = accelerator(client)
    workers = [Worker(server.address, seed, device) for seed in range(CLIENTS)]
    try:
        run_round(workers)
        first = [w.memory_used() for w in workers]
        rss_first = rss_kib(server.proc.pid)
        run_round(workers)
        second = [w.memory_used() for w in workers]
        rss_second = rss_kib(server.proc.pid)
    finally:
        for w in workers:
            w.close()
    errors = [e for w in workers for e in w.errors]
    wrong = [e for w in workers for e in w.wrong]
    assert not errors, f"{len(errors)} errors, the first:\n{errors[0]}"
    assert not wrong, f"{len(wrong)} wrong results: {wrong[:5]}"
    assert all(w.checks > 0 and w.refusals >= 2 * STEPS for w in workers)
    assert second == first, "a session holds more after the second round than after the first"
    assert rss_second <= rss_first + RSS_SLACK_KIB, (
        f"server RSS grew from {rss_first} KiB to {rss_second} KiB")
