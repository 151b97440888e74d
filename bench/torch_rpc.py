#!/usr/bin/python3
"""A torch.distributed.rpc pair on this machine, the baseline of bench/compare.py's rpc line:
two processes (TensorPipe, world_size 2), rank 0 making timed rpc_sync calls of a [4] f32 add
to rank 1 when asked, driven through a pipe with a deadline on every wait.

    torch_rpc.py RANK PORT TRANSPORT       # one process of the pair (TorchRpcPair starts them)
"""
import os
import select
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def timed_calls(fn, n: int) -> list:
    """Seconds of each of n calls of fn."""
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def rpc_child(rank: int, port: int, transport: str) -> int:
    """A process of the pair (`torch_rpc.py RANK PORT TRANSPORT`). Rank 1
    serves rpc_sync calls until rank 0 shuts down. Rank 0 prints "ready", then for each line N
    read from stdin makes N rpc_sync calls of a [4] f32 add to rank 1 and prints their seconds
    on one line; a line 0 (or the end of stdin) ends it. TRANSPORT "default" leaves TensorPipe
    its choice (between processes of one host: its shared memory transport, tensors through
    cross-memory attach); "tcp" allows only its uv transport on the loopback interface and the
    basic channel, so everything travels over TCP as tensord's gRPC does."""
    import torch.distributed.rpc as rpc
    torch.set_num_threads(1)
    extra = {}
    if transport == "tcp":
        extra = dict(_transports=["uv"], _channels=["basic"])  # TP_SOCKET_IFNAME=lo: the parent
    # rpc_timeout bounds each call and the store's waits after the rendezvous; the parent
    # kills both processes if the rendezvous itself takes longer than RPC_START_S.
    options = rpc.TensorPipeRpcBackendOptions(init_method=f"tcp://127.0.0.1:{port}",
                                              rpc_timeout=30, **extra)
    rpc.init_rpc(f"rank{rank}", rank=rank, world_size=2, rpc_backend_options=options)
    try:
        if rank == 0:
            a, b = torch.ones(4), torch.ones(4)
            assert rpc.rpc_sync("rank1", torch.add, args=(a, b)).tolist() == [2.0] * 4

            def call():
                rpc.rpc_sync("rank1", torch.add, args=(a, b))
            timed_calls(call, 200)  # warm
            print("ready", flush=True)
            for command in sys.stdin:
                n = int(command)
                if n <= 0:
                    break
                print(" ".join(f"{t:.9f}" for t in timed_calls(call, n)), flush=True)
    finally:
        rpc.shutdown()
    return 0


RPC_START_S = 90    # starting both processes and their rendezvous
RPC_ROUND_S = 60    # one round of calls
RPC_STOP_S = 15     # a graceful rpc.shutdown of both


class TorchRpcPair:
    """Two processes of torch.distributed.rpc on this machine (TensorPipe, rendezvous on
    127.0.0.1 and a free port, world_size 2), rank 0 driven from here through a pipe: every
    wait has a deadline and both processes are killed on the way out if they have not ended.

    TensorPipe's shared memory transport and channels poll busily: an idle pair keeps about
    half a core per process busy. pause() stops both processes (SIGSTOP) while other lines
    are measured; times() lets them run for its round only."""

    def __init__(self, transport: str = "default"):
        self.transport = transport
        self.procs, self.logs, self.driver = [], [], None

    def __enter__(self):
        port = free_port()
        env = dict(os.environ, TP_SOCKET_IFNAME="lo") if self.transport == "tcp" else None
        self.logs = [tempfile.TemporaryFile(mode="w+") for _ in range(2)]
        try:
            for rank in (1, 0):
                self.procs.append(subprocess.Popen(
                    [sys.executable, str(Path(__file__).resolve()), str(rank), str(port),
                     self.transport],
                    stdin=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                    stdout=subprocess.PIPE if rank == 0 else subprocess.DEVNULL,
                    stderr=self.logs[rank], text=True, env=env))
            self.driver = self.procs[-1]
            if self._read_line(RPC_START_S) != "ready":
                raise RuntimeError("rank 0 did not get ready")
            self.pause()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def _signal(self, sig) -> None:
        for proc in self.procs:
            if proc.poll() is None:
                os.kill(proc.pid, sig)

    def pause(self) -> None:
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _read_line(self, timeout: float) -> str:
        deadline = time.monotonic() + timeout
        while True:
            if self.driver.poll() is not None:
                raise RuntimeError(f"rank 0 exited with status {self.driver.returncode}: "
                                   f"{self.error()}")
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError(f"rank 0 did not answer in {timeout} s")
            ready, _, _ = select.select([self.driver.stdout], [], [], min(left, 1.0))
            if ready:
                text = self.driver.stdout.readline()
                if text:
                    return text.strip()

    def times(self, n: int) -> list:
        """Seconds of each of n rpc_sync calls made by rank 0 (the pair runs meanwhile)."""
        self.resume()
        try:
            self.driver.stdin.write(f"{n}\n")
            self.driver.stdin.flush()
            return [float(v) for v in self._read_line(RPC_ROUND_S).split()]
        finally:
            self.pause()

    def error(self) -> str:
        """The last line either process wrote to stderr."""
        lines = []
        for log in self.logs:
            log.seek(0)
            lines += [text.strip() for text in log if text.strip()]
        return lines[-1] if lines else ""

    def __exit__(self, *exc):
        self.resume()
        if self.driver is not None and self.driver.poll() is None:
            try:
                self.driver.stdin.write("0\n")
                self.driver.stdin.close()
            except OSError:
                pass
        deadline = time.monotonic() + RPC_STOP_S
        for proc in self.procs:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for proc in self.procs:
            if proc.stdout is not None:
                proc.stdout.close()
        for log in self.logs:
            log.close()


if __name__ == "__main__":
    sys.exit(rpc_child(int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]))
