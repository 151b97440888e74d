#!/usr/bin/env python3
"""Data-parallel training of an MLP on N tensord servers, one rank per server.

The model and data are those of client/python/examples/mlp_classifier.py: a 2-64-64-3 ReLU
MLP classifying three interleaved spirals, batches of 128 points. Every rank holds the same
parameters (rank 0's, broadcast at the start) on its own server and gets one shard of each
batch. Per step, each rank runs its forward and backward on its shard on its server; the
gradients are averaged across the ranks by the servers themselves (all_reduce, op=mean, over
Gloo between the servers: no gradient passes through this client), in buckets reduced while
the backward runs, as DistributedDataParallel does (ctx.backward(loss, reduce=buckets): each
bucket flattened and all-reduced as soon as its gradients are final; --no-overlap: after the
backward, as calls of their own), and each server applies the SGD step (the fused `sgd` op)
to its copy of the parameters. Since every rank applies the same averaged gradient, the
copies stay equal.

By default (`--mode program`) a rank's whole step -- forward, backward with its reduction and
the SGD update -- is one compiled program (sess.compile), so a step is one RunProgram round
trip per rank. `--mode eager` runs the same calls as three round trips per rank (the forward as
one Execute batch, Backward, then the update as one no_grad Execute batch), and a fourth
fetches the loss. The ranks run concurrently, one thread each.

    python3 examples/data_parallel/train.py                      # starts 4 local servers
    python3 examples/data_parallel/train.py --local 2 --steps 200 --mode eager
    python3 examples/data_parallel/train.py \\
        --addresses 10.0.0.10:50051,10.0.0.11:50051 --rendezvous file:///shared/rdv

With --addresses, each server must have been started with --collective-address (an address
its peers reach it at) and the rendezvous must be reachable by every server (a shared
directory, or redis://host:port). A rank whose server dies fails the step on every other rank
with tensord.TensordError, reason PEER_UNAVAILABLE, within the servers' --collective-timeout.
"""
from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "client" / "python"))  # the checkout's client
import tensord  # noqa: E402

SIZES = (2, 64, 64, 3)  # mlp_classifier.py's model
DDP_BUCKET_MB = 25.0    # torch DistributedDataParallel's default bucket_cap_mb


# -- data and model ------------------------------------------------------------------------------
def spirals(n: int, classes: int, rng: np.random.Generator):
    """n points on `classes` interleaved noisy spiral arms in the plane, labels 0..classes-1
    (mlp_classifier.py's data)."""
    labels = rng.integers(0, classes, n)
    radius = rng.uniform(0.05, 1.0, n)
    angle = 7.0 * radius + labels * (2 * np.pi / classes) + rng.normal(0, 0.2, n)
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1)
    return x.astype(np.float32), labels.astype(np.int64)


def init_parameters(sizes, dtype, rng: np.random.Generator) -> list:
    """[W1, b1, W2, b2, ...] with W [fan_in, fan_out], drawn as torch.nn.Linear draws its
    weight and bias (uniform in +-1/sqrt(fan_in))."""
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = 1.0 / np.sqrt(fan_in)
        params.append(rng.uniform(-bound, bound, (fan_in, fan_out)).astype(dtype))
        params.append(rng.uniform(-bound, bound, (fan_out,)).astype(dtype))
    return params


def forward(sess, params, x):
    h = x
    for i in range(0, len(params), 2):
        h = sess.op("add", sess.op("matmul", h, params[i]), params[i + 1])
        if i + 2 < len(params):
            h = sess.op("relu", h)
    return h


def loss_of(sess, params, x, y):
    return sess.op("cross_entropy", forward(sess, params, x), y)


def batches(n_train: int, batch: int, steps: int, rng: np.random.Generator) -> list:
    """The indices of each step's batch (drawn with replacement, as mlp_classifier.py)."""
    return [rng.integers(0, n_train, batch) for _ in range(steps)]


def problem(seed: int, dtype: str, batch: int, steps: int):
    """What a run trains on, drawn from `seed`: (x_train, y_train, x_test, y_test, the initial
    parameters, each step's batch indices)."""
    np_dtype = {"f32": np.float32, "f64": np.float64}[dtype]
    rng = np.random.default_rng(seed)
    x_train, y_train = spirals(2048, 3, rng)
    x_test, y_test = spirals(512, 3, rng)
    init = init_parameters(SIZES, np_dtype, rng)
    plan = batches(len(x_train), batch, steps, rng)
    return x_train.astype(np_dtype), y_train, x_test.astype(np_dtype), y_test, init, plan


def shard(indices: np.ndarray, rank: int, world_size: int) -> np.ndarray:
    """Rank `rank`'s equal part of a batch (the batch size is a multiple of world_size)."""
    per = len(indices) // world_size
    return indices[rank * per:(rank + 1) * per]


# -- gradient buckets ----------------------------------------------------------------------------
def make_buckets(shapes, itemsize: int, cap_bytes: float) -> list:
    """Parameter indices grouped into buckets of at most cap_bytes of gradient (a parameter
    larger than the cap is a bucket of its own), in parameter order."""
    buckets, current, filled = [], [], 0
    for i, shape in enumerate(shapes):
        nbytes = int(np.prod(shape, dtype=np.int64)) * itemsize
        if current and filled + nbytes > cap_bytes:
            buckets.append(current)
            current, filled = [], 0
        current.append(i)
        filled += nbytes
    if current:
        buckets.append(current)
    return buckets


def average_gradients(sess, grads: list, shapes, buckets, reduce: bool = True) -> list:
    """The gradients averaged over the group, one all_reduce (mean) per bucket: each bucket's
    gradients flattened and concatenated, reduced, split back and reshaped. Ops of `sess`: run
    it inside a batch or a traced function. reduce=False skips the all_reduce (what a step
    costs without its communication; the ranks then drift apart)."""
    out = [None] * len(grads)
    for bucket in buckets:
        if len(bucket) == 1:
            i = bucket[0]
            out[i] = sess.op("all_reduce", grads[i], op="mean") if reduce else grads[i]
            continue
        flat = sess.op("cat", *[sess.op("flatten", grads[i]) for i in bucket])
        if reduce:
            flat = sess.op("all_reduce", flat, op="mean")
        sizes = [int(np.prod(shapes[i], dtype=np.int64)) for i in bucket]
        pieces = sess.op("split", flat, split_size=sizes)
        for i, piece in zip(bucket, pieces):
            out[i] = sess.op("reshape", piece, shape=list(shapes[i]))
    return out


# -- one rank ------------------------------------------------------------------------------------
class Rank:
    """One rank: a session on its server joined to the group, the parameters as requires-grad
    leaves of one autodiff context, tensord.optim.SGD (the server's fused sgd op, its momentum
    buffers on the server) and the step, compiled or eager."""

    def __init__(self, address: str, rank: int, world_size: int, group: str, rendezvous: str,
                 init: list, *, lr: float, momentum: float, bucket_bytes: float,
                 mode: str = "program", overlap: bool = True, device: str | None = None):
        if mode not in ("program", "eager"):
            raise ValueError(f"mode must be 'program' or 'eager', not {mode!r}")
        self.rank, self.world_size, self.mode = rank, world_size, mode
        self.overlap = overlap
        self.client = tensord.connect(address)
        self.sess, self.program = None, None
        try:
            self.sess = self.client.session(device=device)
            self.group = self.sess.join_group(group, rank, world_size, rendezvous)
            self.ctx = self.sess.autodiff()
            self.shapes = [tuple(v.shape) for v in init]
            self.params = [self.sess.tensor(v, requires_grad=True, ctx=self.ctx) for v in init]
            self.buckets = make_buckets(self.shapes, init[0].dtype.itemsize, bucket_bytes)
            # What the servers reduce during the backward: the buckets, last layers first.
            self.backward_buckets = [[self.params[i] for i in b] for b in reversed(self.buckets)]
            self.opt = tensord.optim.SGD(self.params, lr=lr, momentum=momentum)
        except BaseException:
            self.close()
            raise

    def broadcast_parameters(self, src: int = 0) -> None:
        """Every rank takes rank src's parameter values (one Execute: a broadcast and an
        in-place assign per parameter), as DistributedDataParallel does at construction."""
        sess = self.sess
        with sess.no_grad(), sess.batch():
            for p in self.params:
                sess.op("assign", p, sess.op("broadcast", p, src=src))

    def _backward(self, loss, reduce: bool = True) -> dict:
        """The step's gradients, averaged over the group by the servers while the backward
        runs (overlap), or the rank's own (to be averaged after it)."""
        if self.overlap and reduce:
            return self.ctx.backward(loss, reduce=self.backward_buckets, reduce_op="mean")
        return self.ctx.backward(loss)

    def _step(self, x, y, reduce: bool = True):
        sess = self.sess
        loss = loss_of(sess, self.params, x, y)
        grads = self._backward(loss, reduce)
        averaged = [grads[p] for p in self.params]
        if not self.overlap:
            averaged = average_gradients(sess, averaged, self.shapes, self.buckets, reduce)
        self.opt.step(dict(zip(self.params, averaged)))
        return loss

    def compile(self, x: np.ndarray, y: np.ndarray, reduce: bool = True) -> None:
        """Compiles the step for shards shaped like x, y. Compiling runs the step once (and
        undoes it), collectives included: every rank compiles at the same time."""
        if self.program is not None:
            self.program.release()
        self.program = self.sess.compile(lambda xs, ys: self._step(xs, ys, reduce), x, y,
                                         names=["x", "y"], ctx=self.ctx)

    def step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One training step on this rank's shard; returns the shard's loss."""
        if self.mode == "program":
            if self.program is None:
                self.compile(x, y)
            return float(self.program(x, y))
        sess = self.sess
        with sess.batch():
            loss = loss_of(sess, self.params, sess.tensor(x), sess.tensor(y))
        grads = self._backward(loss)
        with sess.no_grad(), sess.batch():
            averaged = [grads[p] for p in self.params]
            if not self.overlap:
                averaged = average_gradients(sess, averaged, self.shapes, self.buckets)
            self.opt.step(dict(zip(self.params, averaged)))
        return loss.item()

    def parameters(self) -> list:
        return [p.numpy() for p in self.params]

    def accuracy(self, x: np.ndarray, y: np.ndarray) -> float:
        sess = self.sess
        with sess.no_grad(), sess.batch():
            predicted = sess.op("argmax", forward(sess, self.params, sess.tensor(x)), dim=1)
        return float((predicted.numpy() == y).mean())

    def close(self) -> None:
        """Closes the session (its server may be gone) and the channel."""
        if self.sess is not None:
            with contextlib.suppress(tensord.TensordError):
                if self.program is not None and not self.sess.closed:
                    self.program.release()
            with contextlib.suppress(tensord.TensordError):
                self.sess.close()
        self.client.close()


def on_every_rank(fn, n: int, timeout: float | None = None) -> list:
    """fn(rank) on n threads at once; each rank's result, or the exception it raised."""
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        futures = [pool.submit(fn, r) for r in range(n)]
        out = []
        for f in futures:
            try:
                out.append(f.result(timeout=timeout))
            except Exception as exc:  # noqa: BLE001  (reported per rank)
                out.append(exc)
        return out


class RankFailure(RuntimeError):
    """Some ranks failed: `errors` maps each failed rank to (exception, time.monotonic() when
    it failed, the step it was in)."""

    def __init__(self, errors: dict):
        self.errors = errors
        lines = [f"rank {r} at step {step}: {type(e).__name__}: {e}"
                 for r, (e, _, step) in sorted(errors.items())]
        super().__init__("training failed on " + str(len(errors)) + " rank(s):\n  " +
                         "\n  ".join(lines))


def join(addresses, rendezvous: str, init: list, *, lr: float, momentum: float,
         bucket_bytes: float, mode: str, group: str | None = None,
         overlap: bool = True, device: str | None = None) -> list:
    """A Rank per address, joined to one new group (concurrently, as JoinGroup waits for every
    rank), with rank 0's parameters broadcast to all; each rank's tensors on `device` (the
    server's default when None)."""
    world = len(addresses)
    group = group or f"dp-{uuid.uuid4().hex[:12]}"

    def make(r):
        rank = Rank(addresses[r], r, world, group, rendezvous, init, lr=lr, momentum=momentum,
                    bucket_bytes=bucket_bytes, mode=mode, overlap=overlap, device=device)
        try:
            rank.broadcast_parameters()
        except BaseException:
            rank.close()
            raise
        return rank
    made = on_every_rank(make, world)
    failed = {r: (e, time.monotonic(), 0) for r, e in enumerate(made)
              if isinstance(e, BaseException)}
    if failed:
        for rank in made:
            if isinstance(rank, Rank):
                rank.close()
        raise RankFailure(failed)
    return made


def run_steps(ranks: list, data_x: np.ndarray, data_y: np.ndarray, steps: list,
              on_step=None) -> list:
    """Runs every step on every rank concurrently (each rank its shard of each batch); returns
    the batch loss of each step (the mean of the ranks' shard losses). on_step(rank, step,
    loss) is called after each rank's step. Raises RankFailure when a rank fails."""
    world = len(ranks)
    losses = np.zeros((len(steps), world))
    progress = [0] * world

    def work(r):
        rank = ranks[r]
        for k, indices in enumerate(steps):
            progress[r] = k + 1
            mine = shard(indices, r, world)
            try:
                losses[k, r] = rank.step(data_x[mine], data_y[mine])
            except BaseException as exc:
                exc.failed_at = time.monotonic()
                raise
            if on_step is not None:
                on_step(r, k + 1, losses[k, r])
    results = on_every_rank(work, world)
    errors = {r: (e, getattr(e, "failed_at", time.monotonic()), progress[r])
              for r, e in enumerate(results) if isinstance(e, BaseException)}
    if errors:
        raise RankFailure(errors)
    return list(losses.mean(axis=1))


# -- local servers -------------------------------------------------------------------------------
def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def local_servers(n: int, binary: str | None = None, collective_timeout: str = "30s",
                  threads: int = 0, quiet: bool = False):
    """Starts n tensord servers on loopback ports (collectives on 127.0.0.1); yields their
    addresses and stops them after the block."""
    binary = binary or os.environ.get("TENSORD_BIN") or str(REPO / "build" / "tensord")
    if not os.path.isfile(binary):
        raise SystemExit(f"no tensord server binary at {binary}: build it (scripts/build.sh), "
                         "set $TENSORD_BIN, or pass --addresses")
    procs, addresses = [], []
    try:
        for _ in range(n):
            address = f"127.0.0.1:{_free_port()}"
            procs.append(subprocess.Popen(
                [binary, f"--address={address}", "--collective-address=127.0.0.1",
                 f"--collective-timeout={collective_timeout}", f"--threads={threads}",
                 "--log_level=warning"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL))
            addresses.append(address)
        for proc, address in zip(procs, addresses):
            deadline = time.monotonic() + 60
            while True:
                if proc.poll() is not None:
                    raise SystemExit(f"{binary} exited with status {proc.returncode} at start")
                try:  # a fresh channel per probe (no reconnect backoff)
                    with tensord.connect(address) as probe:
                        if probe.health(timeout=1.0) == "SERVING":
                            break
                except tensord.TensordError:
                    pass
                if time.monotonic() > deadline:
                    raise SystemExit(f"{binary} did not become healthy at {address}")
                time.sleep(0.05)
        if not quiet:
            print(f"started {n} servers ({binary}) at {', '.join(addresses)}", flush=True)
        yield addresses
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


# -- the driver ----------------------------------------------------------------------------------
def train(addresses, rendezvous: str, *, steps: int = 400, batch: int = 128,
          dtype: str = "f32", lr: float = 0.1, momentum: float = 0.9,
          bucket_mb: float = DDP_BUCKET_MB, mode: str = "program", seed: int = 0,
          log_every: int = 50, on_step=None, overlap: bool = True,
          device: str | None = None) -> dict:
    """Trains on the servers at `addresses` (rank r at addresses[r]); returns the losses, the
    held-out accuracy, the final parameters (rank 0's) and the largest difference between
    rank 0's parameters and another rank's."""
    world = len(addresses)
    if batch % world:
        raise SystemExit(f"--batch {batch} is not a multiple of the {world} ranks")
    x_train, y_train, x_test, y_test, init, plan = problem(seed, dtype, batch, steps)
    ranks = join(addresses, rendezvous, init, lr=lr, momentum=momentum,
                 bucket_bytes=bucket_mb * 2**20, mode=mode, overlap=overlap, device=device)
    try:
        print(f"{world} ranks, group {ranks[0].group.name!r}, {mode} mode, "
              f"{len(ranks[0].buckets)} gradient bucket(s) reduced "
              f"{'during' if overlap else 'after'} the backward, batch {batch} "
              f"({batch // world} per rank), {dtype}", flush=True)
        start = time.perf_counter()

        def report(r, k, loss):
            if on_step is not None:
                on_step(r, k, loss)
            if r == 0 and log_every and (k % log_every == 0 or k == 1):
                print(f"step {k:5d}  rank 0 shard loss {loss:.4f}  "
                      f"{k / (time.perf_counter() - start):6.1f} steps/s", flush=True)
        losses = run_steps(ranks, x_train, y_train, plan, report)
        elapsed = time.perf_counter() - start
        params = on_every_rank(lambda r: ranks[r].parameters(), world)
        for p in params:
            if isinstance(p, BaseException):
                raise p
        spread = max((float(np.max(np.abs(a - b))) for p in params[1:]
                      for a, b in zip(params[0], p)), default=0.0)
        accuracy = ranks[0].accuracy(x_test, y_test)
    finally:
        for rank in ranks:
            rank.close()
    print(f"{steps} steps in {elapsed:.2f} s ({steps / elapsed:.1f} steps/s); final batch loss "
          f"{losses[-1]:.4f}; test accuracy {accuracy:.3f}; largest parameter difference "
          f"between ranks {spread:.3g}", flush=True)
    return {"losses": losses, "accuracy": accuracy, "params": params[0], "spread": spread,
            "seconds": elapsed}


def main(argv=None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = p.add_mutually_exclusive_group()
    where.add_argument("--local", type=int, default=None, metavar="N",
                       help="start N servers on loopback ports (default: 4 when no --addresses)")
    where.add_argument("--addresses", help="running servers, comma-separated HOST:PORT; rank r "
                       "is the r-th")
    p.add_argument("--rendezvous", help="the group's rendezvous with --addresses "
                   "(file:///shared/dir or redis://host:port); with --local a temporary "
                   "directory")
    p.add_argument("--mode", choices=["program", "eager"], default="program",
                   help="one compiled program per step (default), or three Execute/Backward "
                   "round trips")
    p.add_argument("--steps", type=int, default=400)
    p.add_argument("--batch", type=int, default=128, help="global batch (split over the ranks)")
    p.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--bucket-mb", type=float, default=DDP_BUCKET_MB,
                   help="gradient bucket cap in MiB (default %(default)s, DDP's)")
    p.add_argument("--no-overlap", action="store_true",
                   help="reduce the buckets after the backward, as calls of their own, "
                   "instead of while the backward runs")
    p.add_argument("--device", default=None,
                   help="the device of every rank's tensors (cpu, opencl:0, cuda:0, ...; "
                   "default: each server's default)")
    p.add_argument("--collective-timeout", default="30s",
                   help="--collective-timeout of the servers --local starts")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--log-every", type=int, default=50)
    args = p.parse_args(argv)
    kwargs = dict(steps=args.steps, batch=args.batch, dtype=args.dtype, lr=args.lr,
                  momentum=args.momentum, bucket_mb=args.bucket_mb, mode=args.mode,
                  seed=args.seed, log_every=args.log_every, overlap=not args.no_overlap,
                  device=args.device)
    if args.addresses:
        if not args.rendezvous:
            p.error("--addresses needs --rendezvous")
        return train(args.addresses.split(","), args.rendezvous, **kwargs)
    with tempfile.TemporaryDirectory(prefix="tensord-rdv-") as rdv, \
            local_servers(args.local or 4, collective_timeout=args.collective_timeout) \
            as addresses:
        return train(addresses, args.rendezvous or f"file://{rdv}", **kwargs)


if __name__ == "__main__":
    try:
        main()
    except RankFailure as failure:
        print(failure, file=sys.stderr, flush=True)
        sys.exit(1)
