#!/usr/bin/env python3
"""A character-level transformer language model (token and position embeddings, a causal
TransformerEncoder, a linear head) trained on a text file found on this machine, then asked
to write some text; a PyTorch script with tensord.nn and tensord.optim, every op on a tensord
server.

    python3 client/python/examples/char_transformer.py                  # starts build/tensord
    python3 client/python/examples/char_transformer.py --address 127.0.0.1:50051 --steps 1500
    python3 client/python/examples/char_transformer.py --text my.txt --sample 500

The text is --text, else the first of /usr/share/common-licenses/GPL-3 and a few other files
that exist (a README or copyright file under /usr/share/doc), else a paragraph this script
carries. Prints a progress bar (loss in nats per character, steps/s) and the sampled text;
main(argv) returns the losses.
"""
import glob
import os
import sys

import numpy as np

from _common import Progress, parser, training_session

import tensord
import tensord.nn as nn
import tensord.nn.functional as F

CANDIDATES = ["/usr/share/common-licenses/GPL-3", "/usr/share/common-licenses/Apache-2.0",
              "/usr/share/doc/python3/README.Debian",
              *sorted(glob.glob("/usr/share/doc/*/copyright"))]
FALLBACK = """\
Tensors live on the server, and the client only names them. A model is a tree of modules;
each module holds its parameters, and each parameter is a tensor of the session. The forward
pass records every op on the tape, the backward pass walks the tape in reverse, and the
optimizer moves every parameter a little way down its gradient. Then it starts again.
""" * 20


def load_text(path=None) -> tuple:
    for candidate in ([path] if path else CANDIDATES):
        if candidate and os.path.isfile(candidate):
            with open(candidate, encoding="utf-8", errors="replace") as f:
                text = f.read()
            if len(text) > 2000:
                return text, candidate
    return FALLBACK, "(the paragraph in char_transformer.py)"


def encode(text: str) -> tuple:
    """The text's distinct characters (sorted) and the text as their indices."""
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    return chars, np.array([stoi[c] for c in text], dtype=np.int64)


def windows(data, rng, batch: int, block: int) -> tuple:
    """`batch` random windows of `block` characters, and the characters that follow each."""
    starts = rng.integers(0, len(data) - block - 1, batch)
    x = np.stack([data[s:s + block] for s in starts])
    y = np.stack([data[s + 1:s + block + 1] for s in starts])
    return x, y


def print_sample(chars, prompt, written) -> None:
    print("\n--- prompt ---\n" + "".join(chars[i] for i in prompt))
    print("--- the model goes on ---\n" + "".join(chars[i] for i in written), flush=True)


class CharTransformer(nn.Module):
    def __init__(self, vocab: int, block: int, d_model: int = 64, nhead: int = 4,
                 layers: int = 2, dropout: float = 0.0):
        super().__init__()
        self.block = block
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(block, d_model)
        layer = nn.TransformerEncoderLayer(d_model, nhead, dim_feedforward=4 * d_model,
                                           dropout=dropout, activation="gelu",
                                           batch_first=True, norm_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, norm=nn.LayerNorm(d_model))
        self.head = nn.Linear(d_model, vocab)

    def forward(self, idx):  # idx: [batch, time] int64
        t = idx.shape[1]
        causal = np.triu(np.ones((t, t), dtype=bool), k=1)  # True: may not attend
        x = self.tokens(idx) + self.positions(np.arange(t))
        x = self.encoder(x, mask=causal, is_causal=True)
        return self.head(x)


@tensord.no_grad()
def sample(model, sess, prompt_ids, n: int, temperature: float, rng) -> list:
    """n more characters after prompt_ids, each drawn from the model's next-character
    distribution (one batched forward, one round trip, per character)."""
    model.eval()
    ids = list(prompt_ids)
    for _ in range(n):
        context = np.array([ids[-model.block:]], dtype=np.int64)
        with sess.batch():
            logits = model(context)[0, -1]
            probs = F.softmax(logits / temperature, dim=-1)
        p = probs.numpy().astype(np.float64)
        ids.append(int(rng.choice(len(p), p=p / p.sum())))
    model.train()
    return ids[len(prompt_ids):]


def main(argv=None) -> list:
    p = parser(__doc__.splitlines()[0], steps=600)
    p.add_argument("--text", help="the text file to learn (default: one found on the machine)")
    p.add_argument("--block", type=int, default=64, help="context length")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--d-model", type=int, default=64)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--sample", type=int, default=300, help="characters to write at the end")
    p.add_argument("--temperature", type=float, default=0.8)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    text, source = load_text(args.text)
    chars, data = encode(text)
    print(f"text: {source}, {len(text)} characters, {len(chars)} distinct", flush=True)
    losses = []
    with training_session(args) as sess:
        model = CharTransformer(len(chars), args.block, args.d_model, layers=args.layers)
        print(f"{sum(p.numel() for p in model.parameters())} parameters", flush=True)
        optimizer = tensord.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
        criterion = nn.CrossEntropyLoss()
        progress = Progress(args.steps)
        for step in range(1, args.steps + 1):
            x, y = windows(data, rng, args.batch, args.block)
            with sess.batch():  # tensord: the forward's 43 ops in one round trip
                logits = model(x)
                loss = criterion(logits.view(-1, len(chars)), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            progress.update(step, losses[-1])
        progress.close()
        if args.sample > 0:
            start = int(rng.integers(0, len(data) - args.block))
            prompt = data[start:start + args.block // 2]
            print_sample(chars, prompt, sample(model, sess, prompt, args.sample,
                                               args.temperature, rng))
    return losses


if __name__ == "__main__":
    main()
    sys.exit(0)
