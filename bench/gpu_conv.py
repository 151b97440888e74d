#!/usr/bin/python3
"""conv2d on a GPU through tensord beside PyTorch (cuDNN) on the same GPU, in one run: the
convolution shapes of ResNet-50 (batch 32), forward and forward + backward in f32 (no TF32 on
either side). With a second server started with TENSORD_CUDNN=off, each line also gives the
time of tensord's own passes (im2col and cuBLASLt's GEMM, or direct kernels): the figure that
decides whether cuDNN runs a shape. Each line gives the times, torch's time over tensord's (never
asserted) and the largest error of tensord's output and weight gradient against an f64
convolution of the same operands; the script exits 1 when an error is over its bound.
scripts/device-check.sh runs it on a GPU machine.

    bench/gpu_conv.py HOST:PORT [--own-passes HOST:PORT] [--device cuda:0] [--batch 32]
"""
import argparse
import sys

import numpy as np
import torch

import tensord
from timing import synced

REPS = 5
BOUND = 1e-4  # relative to the largest value: f32 sums of up to 4,608 products
# (input channels, size, output channels, kernel, stride, padding) of ResNet-50's convolutions.
SHAPES = [(3, 224, 64, 7, 2, 3), (64, 56, 64, 3, 1, 1), (64, 56, 256, 1, 1, 0),
          (128, 56, 128, 3, 2, 1), (256, 14, 256, 3, 1, 1), (512, 7, 512, 3, 1, 1)]


def error(got: np.ndarray, exact: torch.Tensor) -> float:
    want = exact.cpu().numpy()
    return float(np.abs(got - want).max() / max(np.abs(want).max(), 1e-30))


class Served:
    """One server's session with the operands of a shape, timing its forward and backward."""

    def __init__(self, sess, xn, wn, gyn, stride, padding):
        self.sess, self.attrs = sess, {"stride": stride, "padding": padding}
        self.x, self.w = sess.tensor(xn), sess.tensor(wn)
        self.gy = sess.tensor(gyn)

    def sync(self, t):  # a value read back ends the work the device queued
        self.sess.op("sum", t, fetch=True).item()

    def forward(self):
        return self.sess.op("conv2d", self.x, self.w, **self.attrs)

    def forward_backward(self, ctx, xg, wg):
        return ctx.backward(self.sess.op("conv2d", xg, wg, **self.attrs), seed=self.gy)[wg]

    def times(self, xn, wn):
        fwd = synced(self.forward, self.sync, REPS)
        with self.sess.autodiff() as ctx:
            xg = self.sess.tensor(xn, requires_grad=True)
            wg = self.sess.tensor(wn, requires_grad=True)
            both = synced(lambda: self.forward_backward(ctx, xg, wg), self.sync, REPS)
            grad = self.forward_backward(ctx, xg, wg).numpy()
        return fwd, both, self.forward().numpy(), grad


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("address")
    parser.add_argument("--own-passes", help="a server started with TENSORD_CUDNN=off")
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--batch", type=int, default=32)
    args = parser.parse_args()
    # --device cpu runs the same lines against PyTorch on the CPU (a check of the script).
    gpu = "cpu" if args.device == "cpu" else "cuda:" + args.device.split(":")[1]

    def torch_sync(_):
        if gpu != "cpu":
            torch.cuda.synchronize()
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cudnn.deterministic = True
    F = torch.nn.functional
    rng = np.random.default_rng(5)
    ok = True
    clients = [tensord.connect(args.address)]
    if args.own_passes:
        clients.append(tensord.connect(args.own_passes))
    sessions = [c.session(device=args.device) for c in clients]
    try:
        for cin, size, cout, k, stride, padding in SHAPES:
            xn = rng.standard_normal((args.batch, cin, size, size)).astype(np.float32)
            wn = (rng.standard_normal((cout, cin, k, k)) / np.sqrt(cin * k * k)).astype(np.float32)
            tx, tw = torch.tensor(xn, device=gpu), torch.tensor(wn, device=gpu)
            with torch.no_grad():
                exact = F.conv2d(tx.double(), tw.double(), stride=stride, padding=padding)
            gyn = rng.standard_normal(tuple(exact.shape)).astype(np.float32)
            tgy = torch.tensor(gyn, device=gpu)
            exact_gw = torch.nn.grad.conv2d_weight(tx.double(), tw.shape, tgy.double(),
                                                   stride=stride, padding=padding)
            figures = []
            for sess in sessions:
                served = Served(sess, xn, wn, gyn, stride, padding)
                figures.append(served.times(xn, wn))
            with torch.no_grad():
                torch_fwd = synced(lambda: F.conv2d(tx, tw, stride=stride, padding=padding),
                                   torch_sync, REPS)
            txg, twg = tx.clone().requires_grad_(), tw.clone().requires_grad_()

            def torch_both():
                F.conv2d(txg, twg, stride=stride, padding=padding).backward(tgy)
                grad = twg.grad
                txg.grad = twg.grad = None
                return grad

            torch_both_s = synced(torch_both, torch_sync, REPS)
            name = f"{args.batch}x{cin}x{size}x{size} * {cout}x{cin}x{k}x{k} s{stride}"
            fwd, both, out, gw = figures[0]
            err_y, err_w = error(out, exact), error(gw, exact_gw)
            ok = ok and err_y < BOUND and err_w < BOUND
            own = ""
            if len(figures) > 1:
                own = (f", own passes {figures[1][0] * 1e3:.2f} / {figures[1][1] * 1e3:.2f} ms"
                       f" (cuDNN {figures[1][0] / fwd:.2f}x / {figures[1][1] / both:.2f}x them)")
            print(f"conv {name}: fwd / fwd+bwd tensord {fwd * 1e3:.2f} / {both * 1e3:.2f} ms, "
                  f"torch {torch_fwd * 1e3:.2f} / {torch_both_s * 1e3:.2f} ms, ratio "
                  f"{torch_fwd / fwd:.2f} / {torch_both_s / both:.2f}{own}; max error "
                  f"{err_y:.1e} / {err_w:.1e} (bound {BOUND:.0e})", flush=True)
    finally:
        for sess in sessions:
            sess.close()
        for client in clients:
            client.close()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
