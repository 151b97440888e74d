"""What the PyTorch-style examples share: their command line (--address, --steps, --seed), a
tensord server to train on (the one at --address, else build/tensord or $TENSORD_BIN started
for the run, as bench/compare.py does), a session on it, and a progress bar with the loss and
steps/s."""
from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # the checkout's client
import tensord  # noqa: E402

REPO = Path(__file__).resolve().parents[3]


def parser(description: str, steps: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--address", help="a running tensord server (HOST:PORT); without it the "
                   "example starts $TENSORD_BIN, else build/tensord, on a free port")
    p.add_argument("--steps", type=int, default=steps, help="training steps (default %(default)s)")
    p.add_argument("--seed", type=int, default=0)
    return p


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def server(address: str | None):
    """Yields `address`, or that of a server started for the block (and stopped after it)."""
    if address:
        yield address
        return
    binary = os.environ.get("TENSORD_BIN") or str(REPO / "build" / "tensord")
    if not os.path.isfile(binary):
        raise SystemExit(f"no tensord server binary at {binary}: build it (scripts/build.sh), "
                         "set $TENSORD_BIN, or pass --address HOST:PORT")
    address = f"127.0.0.1:{_free_port()}"
    proc = subprocess.Popen([binary, f"--address={address}", "--log_level=warning"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            stdin=subprocess.DEVNULL)
    try:
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
        print(f"started {binary} at {address}", flush=True)
        yield address
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextlib.contextmanager
def training_session(args):
    """A session on the server of --address (or one started for the block), the default one of
    the block, with tensord's random generator seeded from --seed; yields it."""
    with server(args.address) as address, tensord.connect(address) as client, \
            client.session() as sess, tensord.default_session(sess):
        tensord.manual_seed(args.seed)
        yield sess


class Progress:
    """A progress bar: `[#######.......]  step/total  loss  steps/s`, redrawn in place on a
    terminal, else printed as a line every `every` steps (and at the first and last)."""

    def __init__(self, total: int, width: int = 30, every: int | None = None, stream=None):
        self.total, self.width = total, width
        self.stream = stream or sys.stdout
        self.tty = self.stream.isatty()
        self.every = every or max(1, total // 10)
        self.start = time.perf_counter()
        self.recent = []

    def update(self, step: int, loss: float, extra: str = "") -> None:
        self.recent = (self.recent + [loss])[-10:]
        rate = step / max(time.perf_counter() - self.start, 1e-9)
        filled = int(self.width * step / self.total)
        bar = "#" * filled + "." * (self.width - filled)
        digits = len(str(self.total))
        line = (f"[{bar}] {step:>{digits}}/{self.total}  loss {loss:.4f} "
                f"(avg {sum(self.recent) / len(self.recent):.4f})  {rate:5.1f} steps/s{extra}")
        if self.tty:
            self.stream.write("\r" + line)
            self.stream.flush()
        elif step % self.every == 0 or step in (1, self.total):
            print(line, file=self.stream, flush=True)

    def close(self) -> None:
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
