#!/usr/bin/python3
"""Per-call overhead of nginx in front of tensord: the same calls through the balancer and on a
direct channel to the replica, measured in one run; prints each figure, its baseline and the
ratio (never asserted).

    bench/balancer.py            # starts build/tensord (or $TENSORD_BIN) and /usr/sbin/nginx
    bench/balancer.py --quick    # fewer calls (under 30 s)

One replica (--log_level=warning) and Debian's nginx in the foreground, configured as
tests/python/test_balancer.py does it (deploy/nginx/tensord.conf rendered with a free loopback
port; the replica's address fills each of its `server` lines), with that test's helpers
(tests/python: pytest must be importable). Two clients, one session each:
through nginx (the client sends the session's affinity key, x-tensord-session, with every call;
nginx hashes on it) and straight to the replica. Both sessions live on the same replica.

Lines (through nginx | direct), each timed by the client from the call to its answer:
  Execute add [4]     one Execute of add of two resident [4] f32 tensors (the output released
                      after the timing, untimed)
  put+get 1 MiB       PutTensor (client stream) of 1 MiB of f32, then GetTensor (server stream)
                      of it (released untimed)
  GetSessionInfo      the session's info, nothing queued to release
  KeepAlive           the cheapest unary call of a session
Figures: median and p90 over the calls; ratio: nginx's median over the direct one (goal
≤ 1.2×), the note gives the p90 ratio and the added time per call. Rounds alternate the two
paths (3 rounds of 100 calls after 30 warm-up calls; --quick: 2 of 50 after 10), so drift on a
noisy machine hits both.
"""
import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(ROOT / "tests" / "python"))
import tensord  # noqa: E402
from conftest import ServerProcess, server_binary  # noqa: E402
from test_balancer import NGINX, Nginx  # noqa: E402

MiB = 2**20


def line(what: str, ours: str, base: str, ratio, note: str = ""):
    shown = f"ratio {ratio:6.2f}" if ratio is not None else " " * 12
    print(f"{what:<18} {ours:>30}   {base:>30}   {shown}  {note}", flush=True)


def us(s: float) -> str:
    return f"{s * 1e6:.0f} µs"


def p90(xs) -> float:
    return statistics.quantiles(xs, n=10)[-1]


class Calls:
    """The measured calls of one session: each method does one call and returns its seconds
    (anything the call leaves behind is released after the timing)."""

    def __init__(self, sess):
        self.sess = sess
        self.a = sess.tensor(np.arange(4, dtype=np.float32))
        self.b = sess.tensor(np.ones(4, np.float32))
        self.big = np.random.default_rng(0).standard_normal(MiB // 4, dtype=np.float32)

    def execute(self) -> float:
        t0 = time.perf_counter()
        y = self.sess.op("add", self.a, self.b)
        t = time.perf_counter() - t0
        self.sess.release(y)
        return t

    def put_get(self) -> float:
        t0 = time.perf_counter()
        x = self.sess.tensor(self.big)
        x.numpy()
        t = time.perf_counter() - t0
        self.sess.release(x)
        return t

    def info(self) -> float:
        t0 = time.perf_counter()
        self.sess.info()
        return time.perf_counter() - t0

    def keep_alive(self) -> float:
        t0 = time.perf_counter()
        self.sess.keep_alive()
        return time.perf_counter() - t0


def measure(via: Calls, direct: Calls, name: str, rounds: int, inner: int, warmup: int):
    """Seconds per call of `name` through each path, the paths alternating by rounds."""
    for _ in range(warmup):
        getattr(via, name)()
        getattr(direct, name)()
    tv, td = [], []
    for _ in range(rounds):
        tv += [getattr(via, name)() for _ in range(inner)]
        td += [getattr(direct, name)() for _ in range(inner)]
    return tv, td


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="fewer calls (under 30 s)")
    args = ap.parse_args()
    rounds, inner, warmup = (2, 50, 10) if args.quick else (3, 100, 30)
    if not NGINX.is_file():
        raise SystemExit(f"{NGINX} not installed (Debian: apt-get install nginx-light)")
    binary = server_binary()
    if not binary.is_file():
        raise SystemExit(f"tensord server binary not found at {binary}: build it or set "
                         "TENSORD_BIN")

    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="tensord-bench-") as tmp:
        tmp = Path(tmp)
        replica = ServerProcess(binary, tmp / "replica.log", ["--log_level=warning"])
        (tmp / "nginx").mkdir()
        nginx = None
        try:
            replica.start()
            # The template has a `server` line per replica of three; one replica fills them all.
            nginx = Nginx(tmp / "nginx", [replica.address] * 3)
            nginx.start()
            with tensord.connect(nginx.address) as cv, tensord.connect(replica.address) as cd, \
                    cv.session() as sv, cd.session() as sd:
                via, direct = Calls(sv), Calls(sd)
                print(f"tensord {replica.address} behind nginx {nginx.address} "
                      f"({NGINX}, 1 worker); {rounds} x {inner} calls per path after "
                      f"{warmup} warm-up", flush=True)
                line("", "through nginx: median / p90", "direct: median / p90", None)
                for what, name in (("Execute add [4]", "execute"),
                                   ("put+get 1 MiB", "put_get"),
                                   ("GetSessionInfo", "info"),
                                   ("KeepAlive", "keep_alive")):
                    tv, td = measure(via, direct, name, rounds, inner, warmup)
                    mv, md, pv, pd = (statistics.median(tv), statistics.median(td),
                                      p90(tv), p90(td))
                    line(what, f"{us(mv)} / {us(pv)}", f"{us(md)} / {us(pd)}", mv / md,
                         f"goal ≤ 1.2×; p90 ratio {pv / pd:.2f}, {(mv - md) * 1e6:+.0f} µs "
                         "a call")
                key = sv.affinity_key
            # Every call of the nginx session reached the replica with its key (nginx's log).
            logged = [ln.split() for ln in nginx.access_log.read_text().splitlines()]
            ours = [ln for ln in logged if f"key={key}" in ln]
            statuses = sorted({ln[1] for ln in ours})
            print(f"nginx logged {len(ours)} calls with the session's key (status "
                  f"{', '.join(statuses)}), {len(logged) - len(ours)} others; "
                  f"{time.monotonic() - start:.1f} s in all", flush=True)
        finally:
            if nginx is not None:
                nginx.stop()
            replica.stop()


if __name__ == "__main__":
    main()
