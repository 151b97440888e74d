#!/usr/bin/python3
"""GEMM on a GPU through tensord beside PyTorch on the same GPU, in one run: 4096² in f32,
TF32 (a session with float32_matmul_precision="high" | torch's allow_tf32) and bf16. Each
line gives both times, the ratio (never asserted) and the product's largest error against an
f64 product of the same operands; the script exits 1 when an error is over its bound (an f32
product that used TF32 would be). scripts/device-check.sh runs it on a GPU machine.

    bench/gpu_gemm.py HOST:PORT [DEVICE]     # a running server; DEVICE defaults to cuda:0
"""
import sys

import numpy as np
import torch

import tensord
from timing import synced

N, REPS = 4096, 10
BOUNDS = {"f32": 1e-5, "tf32": 5e-3, "bf16": 2e-2}


def main() -> int:
    address = sys.argv[1]
    device = sys.argv[2] if len(sys.argv) > 2 else "cuda:0"
    gpu = "cuda:" + device.split(":")[1]
    x, y = torch.randn(N, N, device=gpu), torch.randn(N, N, device=gpu)
    exact = (x.double() @ y.double()).cpu().numpy()
    ok = True
    for label, precision, dtype in (("f32", "highest", "f32"), ("tf32", "high", "f32"),
                                    ("bf16", "highest", "bf16")):
        with tensord.connect(address) as client, \
                client.session(device=device, float32_matmul_precision=precision) as s:
            a, b = s.tensor(x.cpu().numpy()), s.tensor(y.cpu().numpy())
            if dtype == "bf16":
                a, b = s.op("to_dtype", a, dtype="bf16"), s.op("to_dtype", b, dtype="bf16")
            # A fetch of the last product waits for the session's stream.
            ours = synced(lambda: s.op("mm", a, b), lambda out: out.numpy(), REPS)
            got = s.op("to_dtype", s.op("mm", a, b), dtype="f32").numpy()
        torch.backends.cuda.matmul.allow_tf32 = precision == "high"
        tx, ty = (x, y) if dtype == "f32" else (x.bfloat16(), y.bfloat16())
        theirs = synced(lambda: tx @ ty, lambda out: torch.cuda.synchronize(), REPS)
        err = float(np.abs(got - exact).max() / np.abs(exact).max())
        ok = ok and err < BOUNDS[label]
        print(f"gemm {N} {label}: tensord {ours * 1e3:.2f} ms (with one fetch), torch "
              f"{theirs * 1e3:.2f} ms, ratio {theirs / ours:.2f}, max error {err:.1e} "
              f"(bound {BOUNDS[label]:.0e})", flush=True)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
