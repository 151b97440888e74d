#!/usr/bin/python3
"""all_reduce and data-parallel steps on local tensord servers, beside Gloo in the same run.

Prints each figure, its baseline (Gloo called directly) and the ratio; never asserted.

    bench/collectives.py            # starts build/tensord (or $TENSORD_BIN) servers itself
    bench/collectives.py --quick    # 1 and 16 MiB only, fewer repetitions (under a minute)
    bench/collectives.py --only all_reduce --device opencl:0   # tensord's tensors on a device

Lines:
  all_reduce N MiB   sum of N MiB of f32 across 4 ranks: tensord (4 servers on loopback, one
                     session each, the tensor resident on its server; one Execute of
                     all_reduce per rank, timed by the rank's client process from the call to
                     its answer, the round trip included) | torch.distributed's allreduce
                     with backend="gloo" across 4 local processes (GLOO_SOCKET_IFNAME=lo),
                     the tensor in each process. Each repetition starts the ranks together
                     (a process barrier | dist.barrier) and takes the slowest rank's time; the
                     figure is the median over the repetitions. Throughput is N MiB / time;
                     the ratio is tensord's throughput over Gloo's (goal >= 0.9). Beside it,
                     the same from one client process with a thread per rank (one GIL).
                     With --device, tensord's tensors live on that device of each server (a
                     device without a collectives library of its own stages them through host
                     memory for Gloo), Gloo's stay in host memory.
  DP step            examples/data_parallel/train.py's step (one compiled program per rank:
                     forward and backward on the rank's shard, bucketed all_reduce (mean) of
                     the gradients, SGD) at 1, 2 and 4 ranks, the global batch fixed (each
                     rank a 1/N shard), for the example's MLP (2-64-64-3, batch 128: 18 KiB of
                     gradients) and a wider one (2-1024-1024-3, batch 512: 4 MiB), buckets of
                     at most 1 MiB. Step time is the wall time of a run of steps on every rank
                     / steps, with the buckets reduced by the servers while the backward runs
                     (reduce=, as DDP) | reduced after the backward, as calls of their own
                     (the ratio: after over during, above 1 where overlapping pays); and the
                     same step compiled without its all_reduce (every other call kept), the
                     difference being the share spent in the collective, waiting for the
                     other ranks included; and, beside it, the Execute of an all_reduce of
                     the largest bucket's size on its own.
Rounds alternate tensord and Gloo (3 rounds of 5 repetitions after one warm-up each; --quick:
2), and the three forms of the step (3 rounds of 20 steps, median; --quick: 1 of 10), so drift on a noisy machine hits both. The servers of a DP line get --threads cores/N each
(at least 1).
"""
import argparse
import concurrent.futures
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(ROOT / "examples" / "data_parallel"))
import tensord  # noqa: E402
import train as dp  # noqa: E402

MiB = 2**20
WORLD = 4
# DDP's cap for its first bucket (torch.distributed._DEFAULT_FIRST_BUCKET_BYTES): the wide
# model's gradients then come in three buckets, whose reductions can overlap the backward.
BUCKET_MB = 1.0


def line(what: str, ours: str, base: str, ratio, note: str = ""):
    shown = f"ratio {ratio:6.2f}" if ratio is not None else " " * 12
    print(f"{what:<30} {ours:>30}   {base:>30}   {shown}  {note}", flush=True)


def ms(s: float) -> str:
    return f"{s * 1e3:.2f} ms"


# -- all_reduce through tensord -------------------------------------------------------------------
class TensordRanks:
    """WORLD sessions, one per server, joined to one group; run() times all_reduce there."""

    def __init__(self, addresses, rendezvous, device=None):
        self.n = len(addresses)
        self.clients = [tensord.connect(a) for a in addresses]
        self.sessions = [c.session(device=device) for c in self.clients]
        self.inputs = [{} for _ in range(self.n)]  # per rank: nbytes -> resident tensor
        self.barrier = threading.Barrier(self.n)
        self.pool = concurrent.futures.ThreadPoolExecutor(self.n)
        group = f"bench-{uuid.uuid4().hex[:8]}"
        for f in [self.pool.submit(s.join_group, group, r, self.n, rendezvous)
                  for r, s in enumerate(self.sessions)]:
            f.result()

    def run(self, nbytes: int, reps: int, warmup: int) -> list:
        """Seconds per repetition: the slowest rank's Execute of all_reduce (sum)."""
        def rank(r):
            s = self.sessions[r]
            x = self.inputs[r].get(nbytes)
            if x is None:
                x = self.inputs[r][nbytes] = s.op("full", shape=[nbytes // 4], value=1.0,
                                                  dtype="f32")
            times = []
            for _ in range(warmup + reps):
                self.barrier.wait()
                t0 = time.perf_counter()
                y = s.op("all_reduce", x, op="sum")
                times.append(time.perf_counter() - t0)
                s.release(y)
            return times[warmup:]
        per_rank = [f.result() for f in [self.pool.submit(rank, r) for r in range(self.n)]]
        return [max(ts) for ts in zip(*per_rank)]

    def close(self):
        self.pool.shutdown()
        for s in self.sessions:
            s.close()
        for c in self.clients:
            c.close()


def tensord_worker(rank: int, world: int, address: str, group: str, rendezvous: str, barrier,
                   device, commands, results) -> None:
    """A client process of one rank, as each Gloo rank is a process of its own: joins the group
    on its server and runs (nbytes, reps, warmup) commands until None."""
    with tensord.connect(address) as client, client.session(device=device) as s:
        s.join_group(group, rank, world, rendezvous)
        results.put((rank, "ready"))
        inputs = {}
        while (command := commands.get()) is not None:
            nbytes, reps, warmup = command
            x = inputs.get(nbytes)
            if x is None:
                x = inputs[nbytes] = s.op("full", shape=[nbytes // 4], value=1.0, dtype="f32")
            times = []
            for _ in range(warmup + reps):
                barrier.wait()
                t0 = time.perf_counter()
                y = s.op("all_reduce", x, op="sum")
                times.append(time.perf_counter() - t0)
                s.release(y)
            results.put((rank, times[warmup:]))


class RankProcesses:
    """WORLD processes running `target(rank, *args, commands, results)`, each putting
    (rank, "ready") once set up and then answering (nbytes, reps, warmup) commands with
    (rank, seconds per repetition) until None; run() gives the slowest rank's time per
    repetition."""

    def __init__(self, target, args_of_rank):
        import multiprocessing
        ctx = multiprocessing.get_context("spawn")
        self.commands = [ctx.Queue() for _ in range(WORLD)]
        self.results = ctx.Queue()
        self.procs = [ctx.Process(target=target,
                                  args=(r, *args_of_rank(r, ctx), self.commands[r], self.results))
                      for r in range(WORLD)]
        for p in self.procs:
            p.start()
        for _ in range(WORLD):  # every rank set up before anything is measured
            self.results.get(timeout=300)

    def run(self, nbytes: int, reps: int, warmup: int) -> list:
        for q in self.commands:
            q.put((nbytes, reps, warmup))
        per_rank = dict(self.results.get(timeout=600) for _ in range(WORLD))
        return [max(ts) for ts in zip(*per_rank.values())]

    def close(self):
        for q in self.commands:
            q.put(None)
        for p in self.procs:
            p.join(timeout=60)
            if p.is_alive():
                p.kill()


class TensordRankProcesses(RankProcesses):
    """A client process per server and rank (the layout of the Gloo baseline), timing
    all_reduce as TensordRanks does."""

    def __init__(self, addresses, rendezvous, device=None):
        group = f"bench-{uuid.uuid4().hex[:8]}"
        barrier = None

        def args_of_rank(r, ctx):
            nonlocal barrier
            if barrier is None:
                barrier = ctx.Barrier(WORLD)
            return (WORLD, addresses[r], group, rendezvous, barrier, device)

        super().__init__(tensord_worker, args_of_rank)


# -- all_reduce through torch.distributed (gloo) --------------------------------------------------
def gloo_worker(rank: int, world: int, init_file: str, commands, results) -> None:
    """A process of the Gloo baseline: runs (nbytes, reps, warmup) commands until None."""
    import torch
    import torch.distributed as dist
    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world)
    dist.barrier()
    results.put((rank, "ready"))
    tensors = {}
    while (command := commands.get()) is not None:
        nbytes, reps, warmup = command
        x = tensors.setdefault(nbytes, torch.empty(nbytes // 4, dtype=torch.float32))
        times = []
        for _ in range(warmup + reps):
            x.fill_(1.0)
            dist.barrier()
            t0 = time.perf_counter()
            dist.all_reduce(x, op=dist.ReduceOp.SUM)
            times.append(time.perf_counter() - t0)
        assert float(x[0]) == world and float(x[-1]) == world
        results.put((rank, times[warmup:]))
    dist.destroy_process_group()


class GlooRanks(RankProcesses):
    """WORLD processes of torch.distributed with backend="gloo", kept for the whole run and
    idle (blocked on their command queue) while tensord is measured."""

    def __init__(self, tmp: str):
        import torch.distributed as dist
        if not dist.is_gloo_available():
            raise SystemExit("torch.distributed has no gloo backend")
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        # Started, torch imported and the group formed before anything is measured.
        super().__init__(gloo_worker, lambda r, ctx: (WORLD, f"{tmp}/gloo-store"))


def all_reduce_lines(sizes, rounds: int, reps: int, warmup: int, device=None) -> None:
    ours = {n: [] for n in sizes}  # a client process per rank
    threaded = {n: [] for n in sizes}  # one client process, a thread per rank
    base = {n: [] for n in sizes}
    with tempfile.TemporaryDirectory(prefix="tensord-bench-") as tmp, \
            dp.local_servers(WORLD, collective_timeout="120s", quiet=True) as addresses:
        gloo = GlooRanks(tmp)
        for store in ("processes", "threads"):  # a rendezvous directory per group
            os.mkdir(f"{tmp}/{store}")
        processes = TensordRankProcesses(addresses, f"file://{tmp}/processes", device)
        ranks = TensordRanks(addresses, f"file://{tmp}/threads", device)
        try:
            for _ in range(rounds):  # tensord and Gloo alternate, so drift hits both
                for n in sizes:
                    ours[n] += processes.run(n, reps, warmup)
                    base[n] += gloo.run(n, reps, warmup)
                    threaded[n] += ranks.run(n, reps, warmup)
        finally:
            ranks.close()
            processes.close()
            gloo.close()
    for n in sizes:
        t_base = statistics.median(base[n])
        mb = n / MiB
        on = f" {device}" if device else ""
        for label, times, note in ((f"all_reduce {mb:g} MiB f32{on} x{WORLD}", ours[n],
                                    "goal >= 0.90"),
                                   (f"  one client, {WORLD} threads", threaded[n],
                                    "the client's GIL shared by the ranks")):
            t = statistics.median(times)
            line(label, f"{ms(t)} {mb / t:7.1f} MiB/s", f"{ms(t_base)} {mb / t_base:7.1f} MiB/s gloo",
                 t_base / t, f"{note}; {len(times)} reps, spread {ms(min(times))}-"
                 f"{ms(max(times))} | {ms(min(base[n]))}-{ms(max(base[n]))}")


# -- data-parallel steps --------------------------------------------------------------------------
def dp_line(name: str, sizes, batch: int, world: int, steps: int, rounds: int,
            threads: int) -> None:
    rng = np.random.default_rng(0)
    x, y = dp.spirals(2048, 3, rng)
    init = dp.init_parameters(sizes, np.float32, rng)
    plan = dp.batches(len(x), batch, steps, rng)
    nparams = sum(v.size for v in init)
    variants = ("during", "after", "none")  # when the buckets are reduced; none: never
    with tempfile.TemporaryDirectory(prefix="tensord-bench-rdv-") as rdv, \
            dp.local_servers(world, collective_timeout="120s", threads=threads,
                             quiet=True) as addresses:
        ranks = dp.join(addresses, f"file://{rdv}", init, lr=0.01, momentum=0.9,
                        bucket_bytes=BUCKET_MB * MiB, mode="program")
        try:
            programs = {}
            for variant in variants:
                for rank in ranks:
                    rank.program = None
                    rank.overlap = variant == "during"
                dp.on_every_rank(lambda r: ranks[r].compile(
                    x[:batch // world], y[:batch // world], reduce=variant != "none"), world)
                programs[variant] = [rank.program for rank in ranks]

            def timed(variant: str) -> float:
                for rank, program in zip(ranks, programs[variant]):
                    rank.program = program
                dp.run_steps(ranks, x, y, plan[:2])  # warm-up
                t0 = time.perf_counter()
                dp.run_steps(ranks, x, y, plan)
                return (time.perf_counter() - t0) / steps
            times = {v: [] for v in variants}
            for k in range(rounds):  # alternating, each first in turn, so drift hits each alike
                for v in variants[k % 3:] + variants[:k % 3]:
                    times[v].append(timed(v))
            t = {v: statistics.median(ts) for v, ts in times.items()}
            bucket = max(sum(init[i].size for i in b) for b in ranks[0].buckets)

            def alone(r):
                s = ranks[r].sess
                g = s.op("full", shape=[bucket], value=1.0, dtype="f32")
                ts = []
                for _ in range(2 + steps):
                    t0 = time.perf_counter()
                    s.release(s.op("all_reduce", g, op="mean"))
                    ts.append(time.perf_counter() - t0)
                return statistics.median(ts[2:])
            t_ar = max(dp.on_every_rank(alone, world))
            buckets = len(ranks[0].buckets)
        finally:
            for rank in ranks:
                rank.program = None  # closing the session frees its programs
                rank.close()

    def share(v):
        return 100 * max(0.0, (t[v] - t["none"]) / t[v])
    line(f"DP step {name} x{world}", f"{ms(t['during'])} {batch / t['during']:7.0f} samples/s",
         f"{ms(t['after'])} reduced after", t["after"] / t["during"],
         f"{ms(t['none'])} without all_reduce; communication {share('during'):4.1f}% of the "
         f"step ({share('after'):4.1f}% reduced after the backward); largest bucket's "
         f"all_reduce alone {ms(t_ar)} ({nparams} parameters, {buckets} bucket(s) of at most "
         f"{BUCKET_MB:g} MiB)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="1 and 16 MiB, fewer repetitions and steps (under a minute)")
    parser.add_argument("--only", choices=["all_reduce", "dp"], action="append",
                        help="run only these sections (repeatable)")
    parser.add_argument("--device", default=None,
                        help="the device of tensord's all_reduce tensors (default: cpu)")
    args = parser.parse_args()
    only = set(args.only or ["all_reduce", "dp"])
    cores = os.cpu_count() or 1
    import torch
    print(f"{cores} cores, torch {torch.__version__} (gloo "
          f"{torch.distributed.is_gloo_available()}), {WORLD} local ranks", flush=True)
    if "all_reduce" in only:
        if args.quick:
            all_reduce_lines([1 * MiB, 16 * MiB], rounds=2, reps=5, warmup=1,
                             device=args.device)
        else:
            all_reduce_lines([1 * MiB, 16 * MiB, 256 * MiB], rounds=3, reps=5, warmup=1,
                             device=args.device)
    if "dp" in only:
        steps, rounds = (10, 1) if args.quick else (20, 3)
        models = [("2-64-64-3 b128", dp.SIZES, 128)]
        if not args.quick:
            models.append(("2-1024-1024-3 b512", (2, 1024, 1024, 3), 512))
        for name, sizes, batch in models:
            for world in (1, 2, 4):
                dp_line(name, sizes, batch, world, steps, rounds,
                        threads=max(1, cores // world))
    return 0


if __name__ == "__main__":
    sys.exit(main())
