#!/usr/bin/env python3
"""A small CNN trained to tell generated 16x16 images apart (horizontal bars, vertical bars,
rings and filled squares, at random places and sizes, in noise), written as a PyTorch script
with tensord.nn and tensord.optim: every op runs on a tensord server.

    python3 client/python/examples/cnn_images.py                   # starts build/tensord
    python3 client/python/examples/cnn_images.py --address 127.0.0.1:50051 --steps 300

Prints a progress bar (loss, steps/s), the test accuracy and one test image per class as
text with its prediction; main(argv) returns the losses.
"""
import sys

import numpy as np

from _common import Progress, parser, training_session

import tensord
import tensord.nn as nn

CLASSES = ["horizontal bar", "vertical bar", "ring", "square"]
SIZE = 16


def make_images(n: int, rng: np.random.Generator):
    """n [1, 16, 16] float32 images and their labels (indices of CLASSES)."""
    labels = rng.integers(0, len(CLASSES), n)
    images = rng.normal(0.0, 0.3, (n, 1, SIZE, SIZE)).astype(np.float32)
    rows, cols = np.mgrid[0:SIZE, 0:SIZE]
    for image, label in zip(images[:, 0], labels):
        length = rng.integers(6, 14)
        a, b = rng.integers(1, SIZE - 1), rng.integers(0, SIZE - length)
        if label == 0:
            image[a, b:b + length] += 1.0
        elif label == 1:
            image[b:b + length, a] += 1.0
        elif label == 2:
            r = rng.uniform(3.0, 6.0)
            cy, cx = rng.uniform(r, SIZE - 1 - r, 2)
            ring = np.abs(np.hypot(rows - cy, cols - cx) - r) < 0.7
            image[ring] += 1.0
        else:
            side = rng.integers(3, 8)
            y, x = rng.integers(0, SIZE - side, 2)
            image[y:y + side, x:x + side] += 1.0
    return images, labels.astype(np.int64)


def show(image) -> str:
    """An image as text: '#' for bright pixels, '+' for middling ones (the noise mostly)."""
    return "\n".join("".join("##" if p > 0.75 else "++" if p > 0.4 else "  " for p in row)
                     for row in image)


def main(argv=None) -> list:
    args = parser(__doc__.splitlines()[1], steps=200).parse_args(argv)
    rng = np.random.default_rng(args.seed)
    x_train, y_train = make_images(4096, rng)
    x_test, y_test = make_images(512, rng)
    losses = []
    with training_session(args):
        model = nn.Sequential(
            nn.Conv2d(1, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(8, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Dropout(0.2), nn.Linear(16 * 4 * 4, len(CLASSES)),
        )
        criterion = nn.CrossEntropyLoss()
        optimizer = tensord.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        scheduler = tensord.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.steps)
        print(model)
        progress = Progress(args.steps)
        model.train()
        for step in range(1, args.steps + 1):
            batch = rng.integers(0, len(x_train), 64)
            loss = criterion(model(x_train[batch]), y_train[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            scheduler.step()
            losses.append(loss.item())
            progress.update(step, losses[-1])
        progress.close()
        model.eval()
        with tensord.no_grad():
            predicted = model(x_test).argmax(dim=1).numpy()
        print(f"test accuracy {(predicted == y_test).mean():.3f}")
        for label, name in enumerate(CLASSES):
            i = int(np.flatnonzero(y_test == label)[0])
            print(f"\n{name!r}, predicted {CLASSES[predicted[i]]!r}:\n{show(x_test[i, 0])}")
    return losses


if __name__ == "__main__":
    main()
    sys.exit(0)
