"""Dropout (torch.nn.Dropout)."""
from __future__ import annotations

from . import functional as F
from .module import Module


class Dropout(Module):
    """Zeroes each element with probability p in training mode and scales the others by
    1 / (1 - p); the identity in eval mode. Each mask is the server's dropout op with a seed
    drawn from tensord's generator (tensord.manual_seed): not torch's masks."""

    def __init__(self, p: float = 0.5, inplace: bool = False):
        super().__init__()
        if p < 0 or p > 1:
            raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
        self.p, self.inplace = p, inplace

    def forward(self, input):
        return F.dropout(input, self.p, self.training, self.inplace)

    def extra_repr(self) -> str:
        return f"p={self.p}, inplace={self.inplace}"
