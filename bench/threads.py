#!/usr/bin/python3
"""Products of growing size on servers of one thread and of every core, in the same run.

Prints, for each size, the time of one f32 matmul inside a compiled program (40 chained
products a run, resident operands, the round trip divided among them) on a server started with
--threads 1 and on one with the default team (every core), and their ratio; never asserted.
Where a product holds too little work for the team, the server runs it on fewer threads
(docs/architecture.md, the CPU backend), so the default line should never be far above the
one-thread line; where it holds enough, it should be below it. Then the same for bench/compare.py's
compiled tensord.nn training steps (Transformer, CNN, LSTM): steps per second on each server.

    bench/threads.py            # starts build/tensord (or $TENSORD_BIN) twice
    bench/threads.py --quick    # fewer runs
"""
import argparse
import os
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "client" / "python"))
sys.path.insert(0, str(ROOT / "bench"))
import tensord  # noqa: E402
from models import NN_LOSSES, nn_data, nn_modules, nn_optimizer, nn_train_step  # noqa: E402
from timing import best_of, line  # noqa: E402

SIZES = [(512, 64, 64), (512, 64, 128), (512, 128, 128), (512, 256, 256), (2048, 256, 256)]
CHAIN = 20  # pairs of products per run: x @ w then @ w2, back to x's shape


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def per_product(sess, m: int, k: int, n: int, rounds: int, inner: int) -> float:
    rng = np.random.default_rng(0)
    a = sess.tensor(rng.standard_normal((m, k)).astype(np.float32))
    w = sess.tensor((rng.standard_normal((k, n)) / 8).astype(np.float32))
    w2 = sess.tensor((rng.standard_normal((n, k)) / 8).astype(np.float32))

    def chain(x):
        for _ in range(CHAIN):
            x = (x @ w) @ w2
        return x

    program = sess.compile(chain, a)
    program(a)
    seconds = best_of(lambda: program(a), rounds, inner)
    program.release()
    return seconds / (2 * CHAIN)


def nn_step(sess, name: str):
    """bench/compare.py's compiled tensord.nn training step of model `name`."""
    xn, yn = nn_data()[name]
    with tensord.default_session(sess):
        model = nn_modules(tensord.nn)[name]
        opt = nn_optimizer(tensord.optim, name, model.parameters())
        compiled = tensord.compile(
            nn_train_step(model, opt, getattr(tensord.nn, NN_LOSSES[name])()))
        x, y = sess.tensor(xn), sess.tensor(yn)
        compiled(x, y)
    return lambda: compiled(x, y)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    rounds, inner = (2, 5) if args.quick else (5, 20)
    binary = os.environ.get("TENSORD_BIN", str(ROOT / "build" / "tensord"))
    servers = {}
    for name, flags in (("one thread", ["--threads=1"]), ("every core", [])):
        address = f"127.0.0.1:{free_port()}"
        proc = subprocess.Popen([binary, f"--address={address}", "--log_level=warning", *flags],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        servers[name] = (address, proc)
    try:
        clients = {name: tensord.connect(address) for name, (address, _) in servers.items()}
        for c in clients.values():
            c.wait_ready()
        sessions = {name: c.session() for name, c in clients.items()}
        print(f"{os.cpu_count()} cores; f32 matmul in a program, per product", flush=True)
        for m, k, n in SIZES:
            # Alternating the two servers round by round, so drift hits both.
            best = {name: float("inf") for name in sessions}
            for _ in range(rounds):
                for name, sess in sessions.items():
                    best[name] = min(best[name], per_product(sess, m, k, n, 1, inner))
            one, team = best["one thread"], best["every core"]
            line(f"[{m}, {k}] x [{k}, {n}] ({2 * m * k * n / 1e6:.1f} MFLOP)",
                 f"{team * 1e6:.1f} µs every core", f"{one * 1e6:.1f} µs one thread", one / team,
                 "above 1: the team is faster")
        for name in ("Transformer", "CNN", "LSTM"):
            steps = {server: nn_step(sess, name) for server, sess in sessions.items()}
            best = {server: float("inf") for server in steps}
            for _ in range(rounds):
                for server, step in steps.items():
                    best[server] = min(best[server], best_of(step, 1, inner))
            one, team = best["one thread"], best["every core"]
            line(f"nn {name} step, tensord.compile", f"{1 / team:.1f} steps/s every core",
                 f"{1 / one:.1f} steps/s one thread", one / team, "above 1: the team is faster")
        for c in clients.values():
            c.close()
    finally:
        for _, proc in servers.values():
            proc.terminate()
            proc.wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
