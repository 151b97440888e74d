"""Embedding (torch.nn.Embedding)."""
from __future__ import annotations

import numpy as np

from . import functional as F
from . import init
from .module import Module
from .parameter import Factory, as_array


class Embedding(Module):
    """A lookup table of `num_embeddings` rows of `embedding_dim` (torch.nn.Embedding): weight
    draws normal(0, 1) and the padding_idx row is zero and gets no gradient. max_norm,
    scale_grad_by_freq and sparse gradients are not supported."""

    def __init__(self, num_embeddings: int, embedding_dim: int, padding_idx=None, max_norm=None,
                 norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False,
                 _weight=None, _freeze: bool = False, device=None, dtype=None, *, session=None):
        super().__init__()
        if max_norm is not None or scale_grad_by_freq or sparse:
            raise NotImplementedError("tensord: Embedding supports neither max_norm, "
                                      "scale_grad_by_freq nor sparse gradients")
        if padding_idx is not None:
            if not -num_embeddings <= padding_idx < num_embeddings:
                raise AssertionError("Padding_idx must be within num_embeddings")
            if padding_idx < 0:
                padding_idx += num_embeddings
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx, self.max_norm, self.norm_type = padding_idx, max_norm, norm_type
        self.scale_grad_by_freq, self.sparse = scale_grad_by_freq, sparse
        factory = Factory(session, device, dtype, what="tensord.nn.Embedding")
        if _weight is None:
            weight = init.normal_(np.empty((num_embeddings, embedding_dim)))
            if padding_idx is not None:
                weight[padding_idx] = 0.0
        else:
            weight = as_array(_weight)
            if weight.shape != (num_embeddings, embedding_dim):
                raise AssertionError("Shape of weight does not match num_embeddings and "
                                     "embedding_dim")
        self.weight = factory.parameter(weight, requires_grad=not _freeze)

    @classmethod
    def from_pretrained(cls, embeddings, freeze: bool = True, padding_idx=None, *,
                        session=None, **kwargs):
        """An Embedding holding `embeddings` (2-d: numpy, torch or tensord); frozen by
        default, as PyTorch's."""
        array = as_array(embeddings)
        if array.ndim != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        dtype = kwargs.pop("dtype", array.dtype)
        return cls(array.shape[0], array.shape[1], padding_idx=padding_idx, _weight=array,
                   _freeze=freeze, dtype=dtype, session=session, **kwargs)

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx)

    def extra_repr(self) -> str:
        text = f"{self.num_embeddings}, {self.embedding_dim}"
        return text + (f", padding_idx={self.padding_idx}" if self.padding_idx is not None
                       else "")
