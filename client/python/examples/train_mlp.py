#!/usr/bin/env python3
"""Trains a two-layer MLP on two interleaved moons, entirely on a tensord server.

The data is made with numpy; weights live on the server as requires-grad leaves of one
autodiff context. Each step is three round trips: the forward pass as one batch, Backward, and
an Adam update (tensord.optim.Adam: one fused adam op per weight, in one no_grad batch, with
the moment estimates kept on the server). Only the loss is fetched.

    python3 client/python/examples/train_mlp.py --address 127.0.0.1:50051
"""
import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import tensord  # noqa: E402


def make_moons(n: int, noise: float, rng: np.random.Generator):
    """Two interleaving half circles (as sklearn.datasets.make_moons), labels 0 and 1."""
    n0 = n // 2
    n1 = n - n0
    t0 = rng.uniform(0, np.pi, n0)
    t1 = rng.uniform(0, np.pi, n1)
    upper = np.stack([np.cos(t0), np.sin(t0)], 1)
    lower = np.stack([1 - np.cos(t1), 0.5 - np.sin(t1)], 1)
    x = np.concatenate([upper, lower]) + rng.normal(0, noise, (n, 2))
    y = np.concatenate([np.zeros(n0, np.int64), np.ones(n1, np.int64)])
    perm = rng.permutation(n)
    x = (x[perm] - x.mean(0)) / x.std(0)
    return x.astype(np.float32), y[perm]


def init_params(sess, rng, sizes):
    params = []
    for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
        bound = np.sqrt(6.0 / (fan_in + fan_out))
        w = rng.uniform(-bound, bound, (fan_in, fan_out)).astype(np.float32)
        params.append(sess.tensor(w, requires_grad=True))
        params.append(sess.tensor(np.zeros(fan_out, np.float32), requires_grad=True))
    return params


def forward(sess, x, params):
    h = x
    for i in range(0, len(params), 2):
        h = h @ params[i] + params[i + 1]
        if i + 2 < len(params):
            h = sess.op("tanh", h)
    return h


def train(address: str, steps: int = 300, hidden: int = 32, samples: int = 512,
          lr: float = 0.03, seed: int = 0, log_every: int = 25, checkpointing: str = "none"):
    rng = np.random.default_rng(seed)
    x_np, y_np = make_moons(samples, 0.1, rng)
    with tensord.connect(address) as client, client.session() as sess:
        x, y = sess.tensor(x_np), sess.tensor(y_np)
        with sess.autodiff(checkpointing=checkpointing) as ctx:
            params = init_params(sess, rng, [2, hidden, hidden, 2])
            opt = tensord.optim.Adam(params, lr=lr)
            start = time.perf_counter()
            for step in range(1, steps + 1):
                with sess.batch():
                    loss = sess.op("cross_entropy", forward(sess, x, params), y)
                grads = ctx.backward(loss)
                opt.step(grads)
                if step % log_every == 0 or step == 1:
                    print(f"step {step:4d}  loss {loss.item():.4f}  "
                          f"({time.perf_counter() - start:.1f}s)", flush=True)
            with sess.no_grad():
                pred = sess.op("argmax", forward(sess, x, params), dim=1).numpy()
    accuracy = float((pred == y_np).mean())
    print(f"final accuracy {accuracy:.4f}", flush=True)
    return accuracy


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--address", default=os.environ.get("TENSORD_ADDRESS", "127.0.0.1:50051"))
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--hidden", type=int, default=32)
    parser.add_argument("--samples", type=int, default=512)
    parser.add_argument("--lr", type=float, default=0.03)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--checkpointing", choices=["none", "balanced"], default="none")
    parser.add_argument("--min-accuracy", type=float, default=0.0,
                        help="exit with status 1 below this accuracy")
    args = parser.parse_args(argv)
    acc = train(args.address, args.steps, args.hidden, args.samples, args.lr, args.seed,
                checkpointing=args.checkpointing)
    return 0 if acc >= args.min_accuracy else 1


if __name__ == "__main__":
    sys.exit(main())
