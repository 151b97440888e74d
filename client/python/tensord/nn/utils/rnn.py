"""torch.nn.utils.rnn for tensord: pad_sequence (PackedSequence is not supported: recurrent
layers take the padded batch)."""
from __future__ import annotations

import numpy as np

from ... import defaults
from ...tensor import Tensor


def pad_sequence(sequences, batch_first: bool = False, padding_value: float = 0.0):
    """torch.nn.utils.rnn.pad_sequence: tensors (or arrays) of shape [L_i, *] padded at the
    end of their first dim to the longest and stacked, [max L, B, *] ([B, max L, *] with
    batch_first), in one Execute."""
    sequences = list(sequences)
    if not sequences:
        raise RuntimeError("received an empty list of sequences")
    sess = next((s.session for s in sequences if isinstance(s, Tensor)), None) or \
        defaults.get_session(required=True, what="pad_sequence of arrays")
    shapes = [tuple(s.shape) if isinstance(s, Tensor) else np.shape(s) for s in sequences]
    if any(len(shape) == 0 for shape in shapes):
        raise RuntimeError("pad_sequence: every sequence needs at least one dimension")
    longest = max(shape[0] for shape in shapes)
    with sess.batch():
        padded = []
        for seq, shape in zip(sequences, shapes):
            if shape[0] == longest:
                padded.append(seq)
                continue
            # pad lists the last dim first: only the first dim grows, at its end.
            spec = [0, 0] * (len(shape) - 1) + [0, longest - shape[0]]
            padded.append(sess.op("pad", seq, pad=spec, mode="constant",
                                  value=float(padding_value)))
        return sess.op("stack", *padded, dim=0 if batch_first else 1)


__all__ = ["pad_sequence"]
