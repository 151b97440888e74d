#!/usr/bin/env python3
"""A character-level LSTM language model (an embedding, a 2-layer LSTM, a linear head)
trained on a text file found on this machine, with the gradients' norm clipped, then asked to
write some text one character at a time, carrying its state; a PyTorch script with tensord.nn
and tensord.optim, every op on a tensord server.

    python3 client/python/examples/char_lstm.py                  # starts build/tensord
    python3 client/python/examples/char_lstm.py --address 127.0.0.1:50051 --steps 1500

The text is found as char_transformer.py finds it (--text, else a license or copyright file
of this machine). Each model(x) is one round trip however many steps the LSTM unrolls (a
module call sends its forward as one Execute). Prints a progress bar (loss in nats per
character, steps/s) and the sampled text; main(argv) returns the losses.
"""
import sys

import numpy as np

from _common import Progress, parser, training_session
from char_transformer import encode, load_text, print_sample, windows

import tensord
import tensord.nn as nn
import tensord.nn.functional as F


class CharLSTM(nn.Module):
    def __init__(self, vocab: int, embed: int = 32, hidden: int = 128, layers: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab, embed)
        self.lstm = nn.LSTM(embed, hidden, num_layers=layers, batch_first=True)
        self.head = nn.Linear(hidden, vocab)

    def forward(self, idx, state=None):  # idx: [batch, time] int64
        out, state = self.lstm(self.embed(idx), state)
        return self.head(out), state


@tensord.no_grad()
def sample(model, prompt_ids, n: int, temperature: float, rng) -> list:
    """n more characters after prompt_ids: the prompt read once, then one character per
    module call with the LSTM's (h, c) carried over (one round trip each)."""
    model.eval()
    logits, state = model(np.array([prompt_ids], dtype=np.int64))
    last = logits[0, -1]
    out = []
    for _ in range(n):
        p = F.softmax(last / temperature, dim=-1).numpy().astype(np.float64)
        out.append(int(rng.choice(len(p), p=p / p.sum())))
        logits, state = model(np.array([[out[-1]]], dtype=np.int64), state)
        last = logits[0, -1]
    model.train()
    return out


def main(argv=None) -> list:
    p = parser(__doc__.splitlines()[0], steps=600)
    p.add_argument("--text", help="the text file to learn (default: one found on the machine)")
    p.add_argument("--block", type=int, default=48, help="characters per sequence")
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--lr", type=float, default=5e-3)
    p.add_argument("--clip", type=float, default=1.0, help="the gradients' largest norm")
    p.add_argument("--sample", type=int, default=200, help="characters to write at the end")
    p.add_argument("--temperature", type=float, default=0.8)
    args = p.parse_args(argv)
    rng = np.random.default_rng(args.seed)
    text, source = load_text(args.text)
    chars, data = encode(text)
    print(f"text: {source}, {len(text)} characters, {len(chars)} distinct", flush=True)
    losses = []
    with training_session(args):
        model = CharLSTM(len(chars), hidden=args.hidden)
        print(f"{sum(p.numel() for p in model.parameters())} parameters", flush=True)
        optimizer = tensord.optim.Adam(model.parameters(), lr=args.lr)
        criterion = nn.CrossEntropyLoss()
        progress = Progress(args.steps)
        for step in range(1, args.steps + 1):
            x, y = windows(data, rng, args.batch, args.block)
            logits, _ = model(x)
            loss = criterion(logits.reshape(-1, len(chars)), y.reshape(-1))
            optimizer.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), args.clip)
            optimizer.step()
            losses.append(loss.item())
            progress.update(step, losses[-1])
        progress.close()
        if args.sample > 0:
            start = int(rng.integers(0, len(data) - args.block))
            prompt = data[start:start + args.block // 2]
            print_sample(chars, prompt, sample(model, prompt, args.sample, args.temperature, rng))
    return losses


if __name__ == "__main__":
    main()
    sys.exit(0)
