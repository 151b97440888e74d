#!/usr/bin/env python3
"""An MLP classifier trained on synthetic data (three interleaved spirals), written as a
PyTorch script with tensord.nn and tensord.optim: every op runs on a tensord server.

    python3 client/python/examples/mlp_classifier.py                   # starts build/tensord
    python3 client/python/examples/mlp_classifier.py --address 127.0.0.1:50051 --steps 600

Prints a progress bar (loss, steps/s) and the accuracy on held-out points; main(argv)
returns the losses.
"""
import sys

import numpy as np

from _common import Progress, parser, training_session

import tensord
import tensord.nn as nn


def spirals(n: int, classes: int, rng: np.random.Generator):
    """n points on `classes` interleaved noisy spiral arms in the plane, labels 0..classes-1."""
    labels = rng.integers(0, classes, n)
    radius = rng.uniform(0.05, 1.0, n)
    angle = 7.0 * radius + labels * (2 * np.pi / classes) + rng.normal(0, 0.2, n)
    x = np.stack([radius * np.cos(angle), radius * np.sin(angle)], 1)
    return x.astype(np.float32), labels.astype(np.int64)


def main(argv=None) -> list:
    args = parser(__doc__.splitlines()[1], steps=400).parse_args(argv)
    rng = np.random.default_rng(args.seed)
    x_train, y_train = spirals(2048, 3, rng)
    x_test, y_test = spirals(512, 3, rng)
    losses = []
    with training_session(args):
        model = nn.Sequential(
            nn.Linear(2, 64), nn.ReLU(),
            nn.Linear(64, 64), nn.ReLU(),
            nn.Linear(64, 3),
        )
        criterion = nn.CrossEntropyLoss()
        optimizer = tensord.optim.Adam(model.parameters(), lr=0.01)
        print(model)
        progress = Progress(args.steps)
        for step in range(1, args.steps + 1):
            batch = rng.integers(0, len(x_train), 128)
            logits = model(x_train[batch])
            loss = criterion(logits, y_train[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            progress.update(step, losses[-1])
        progress.close()
        model.eval()
        with tensord.no_grad():
            predicted = model(x_test).argmax(dim=1).numpy()
        print(f"test accuracy {(predicted == y_test).mean():.3f}", flush=True)
    return losses


if __name__ == "__main__":
    main()
    sys.exit(0)
