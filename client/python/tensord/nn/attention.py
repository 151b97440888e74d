"""MultiheadAttention (torch.nn's).

Parameters carry PyTorch's names (in_proj_weight, in_proj_bias, out_proj.weight, bias_k,
bias_v), so a torch state_dict loads as it is. The attention is computed over the server's ops
in the [batch, heads, length, head_dim] layout, without reading any activation's shape, so a
forward also runs inside `sess.batch()`:

- the heads are split by multiplying the input with the projection weight seen as [heads,
  embed, head_dim] (a broadcast `matmul`: one for query, key and value together in
  self-attention), and merged again by `transpose` + `flatten` before out_proj;
- add_bias_kv / add_zero_attn append their key and value rows with `cat` (the masks get as
  many unmasked columns);
- need_weights=False (what the encoder and decoder layers ask for) is the
  `scaled_dot_product_attention` op; need_weights=True, or dropout > 0 in training mode, is
  softmax(Q K^T / sqrt(head_dim) + mask) V written out, which returns the weights (averaged
  over the heads unless average_attn_weights=False).
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from . import functional as F
from . import init
from ._call import op as _op
from .linear import Linear
from .module import Module
from .parameter import Factory, as_array



class NonDynamicallyQuantizableLinear(Linear):
    """MultiheadAttention's out_proj: a Linear under PyTorch's class name (so reprs match)."""


def _ndim(value):
    """ndim of an operand; None for a pending batch output (its shape is not known yet; a
    module call's pending output is sent for it)."""
    if isinstance(value, Tensor):
        return None if value.is_lazy and not value._sendable else value.ndim
    return np.ndim(value)


def _is_torch(value) -> bool:
    return type(value).__module__.split(".")[0] == "torch"


class _Mask:
    """An attention mask as an operand the scores broadcast with: `boolean` True means "masked"
    (PyTorch's convention for MultiheadAttention), else it is added to the scores."""

    def __init__(self, value, boolean: bool):
        self.value, self.boolean = value, boolean

    @staticmethod
    def make(mask, dtype, what: str):
        """`mask` (numpy, torch, list or Tensor; bool, uint8 or floating) as a _Mask whose float
        values have `dtype` (the layer's parameters')."""
        if isinstance(mask, Tensor):
            dt = mask.dtype
            if dt == np.uint8:  # a byte mask means what a bool one does, as in torch
                mask, dt = _op("to_dtype", mask, dtype="bool"), np.dtype(np.bool_)
            if dt == np.bool_:
                return _Mask(mask, True)
            if not (dtypes.is_bfloat16(dt) or np.dtype(dt).kind == "f"):
                raise AssertionError(f"only bool and floating types of {what} are supported")
            if dtypes.name(dt) != dtypes.name(dtype):
                mask = _op("to_dtype", mask, dtype=dtypes.name(dtype))
            return _Mask(mask, False)
        array = as_array(mask)
        if array.dtype == np.uint8:
            array = array.astype(np.bool_)
        if array.dtype == np.bool_:
            return _Mask(array, True)
        if array.dtype.kind != "f":
            raise AssertionError(f"only bool and floating types of {what} are supported")
        if dtypes.is_bfloat16(dtype):
            return _Mask(_op("to_dtype", array.astype(np.float32), dtype="bf16"), False)
        return _Mask(array.astype(dtypes.to_numpy_dtype(dtype), copy=False), False)

    def reshaped(self, fn_numpy, fn_tensor):
        value = fn_numpy(self.value) if isinstance(self.value, np.ndarray) else \
            fn_tensor(self.value)
        return _Mask(value, self.boolean)

    def additive(self, dtype):
        """The mask as a float operand to add: -inf where a bool mask is True, else 0."""
        if not self.boolean:
            return self.value
        if isinstance(self.value, np.ndarray):
            if dtypes.is_bfloat16(dtype):
                return _op("to_dtype", np.where(self.value, -np.inf, 0.0).astype(np.float32),
                           dtype="bf16")
            return np.where(self.value, -np.inf, 0.0).astype(dtypes.to_numpy_dtype(dtype))
        zeros_ones = _op("to_dtype", self.value, dtype=dtypes.name(dtype))
        return _op("masked_fill", zeros_ones, self.value, value=-math.inf)

    def keep(self):
        """A bool mask as the scaled_dot_product_attention op takes it: True where kept."""
        if isinstance(self.value, np.ndarray):
            return ~self.value
        return _op("logical_not", self.value)

    def padded(self, n: int):
        """The mask with `n` more key columns (last dim) that are not masked: False, or 0 added
        (PyTorch's pad(mask, (0, 1)) for add_bias_kv's and add_zero_attn's keys)."""
        value = self.value
        if isinstance(value, np.ndarray):
            return _Mask(np.pad(value, [(0, 0)] * (value.ndim - 1) + [(0, n)]), self.boolean)
        if not self.boolean:
            return _Mask(F.pad(value, [0, n]), False)
        # The pad op takes floating tensors: a bool mask travels as 0 / 1 (exactly).
        as_float = F.pad(_op("to_dtype", value, dtype="f32"), [0, n])
        return _Mask(_op("to_dtype", as_float, dtype="bool"), True)

    def apply(self, scores):
        if self.boolean:
            return _op("masked_fill", scores, self.value, value=-math.inf)
        return scores + self.value


def _split_heads(x, weight, bias, heads: int, head_dim: int, in_features: int):
    """x [..., L, in_features] times weight [heads * head_dim, in_features] (+ bias), as
    [..., heads, L, head_dim]: the weight seen as [heads, in_features, head_dim], a broadcast
    matmul. (Sizes are given: the weight may be a pending slice inside a batch.)"""
    w = _op("transpose", weight.reshape(heads, head_dim, in_features), dim0=-1, dim1=-2)
    y = _op("unsqueeze", x, dim=-3) @ w
    if bias is not None:
        y = y + bias.reshape(heads, 1, head_dim)
    return y


class MultiheadAttention(Module):
    """torch.nn.MultiheadAttention: forward(query, key, value, key_padding_mask=None,
    need_weights=True, attn_mask=None, average_attn_weights=True, is_causal=False) returns
    (attn_output, attn_weights or None). Inputs are [L, N, E] ([N, L, E] with batch_first) or
    unbatched [L, E]. in_proj_weight draws xavier_uniform, the biases are zeros, as PyTorch's.
    kdim/vdim other than embed_dim give q_proj_weight, k_proj_weight and v_proj_weight instead
    of in_proj_weight, as PyTorch. add_bias_kv=True adds the parameters bias_k and bias_v
    ([1, 1, embed_dim], xavier_normal) as one more key and value after the projected ones;
    add_zero_attn=True adds a key and a value of zeros after those: each extra key is attended
    by every query (the masks get unmasked columns for them), and the weights returned have
    their columns too, as PyTorch's.

    Masks: attn_mask [L, S] or [N * num_heads, L, S]; key_padding_mask [N, S] ([S] unbatched);
    a bool mask is True where attention is not allowed, a float one is added to the scores.
    is_causal is a hint about attn_mask, as in PyTorch 2 (attn_mask is still required)."""

    def __init__(self, embed_dim: int, num_heads: int, dropout: float = 0.0, bias: bool = True,
                 add_bias_kv: bool = False, add_zero_attn: bool = False, kdim=None, vdim=None,
                 batch_first: bool = False, device=None, dtype=None, *, session=None):
        super().__init__()
        if embed_dim <= 0 or num_heads <= 0:
            raise ValueError(f"embed_dim and num_heads must be greater than 0, got "
                             f"embed_dim={embed_dim} and num_heads={num_heads} instead")
        self.embed_dim = embed_dim
        self.kdim = kdim if kdim is not None else embed_dim
        self.vdim = vdim if vdim is not None else embed_dim
        self._qkv_same_embed_dim = self.kdim == embed_dim and self.vdim == embed_dim
        self.num_heads, self.dropout, self.batch_first = num_heads, dropout, batch_first
        self.head_dim = embed_dim // num_heads
        if self.head_dim * num_heads != embed_dim:
            raise AssertionError("embed_dim must be divisible by num_heads")
        factory = Factory(session, device, dtype, what="tensord.nn.MultiheadAttention")
        if self._qkv_same_embed_dim:
            self.in_proj_weight = factory.parameter(
                init.xavier_uniform_(np.empty((3 * embed_dim, embed_dim))))
            for name in ("q_proj_weight", "k_proj_weight", "v_proj_weight"):
                self.register_parameter(name, None)
        else:
            for name, dim in (("q", embed_dim), ("k", self.kdim), ("v", self.vdim)):
                setattr(self, f"{name}_proj_weight", factory.parameter(
                    init.xavier_uniform_(np.empty((embed_dim, dim)))))
            self.register_parameter("in_proj_weight", None)
        if bias:
            self.in_proj_bias = factory.parameter(np.zeros(3 * embed_dim))
        else:
            self.register_parameter("in_proj_bias", None)
        self.out_proj = NonDynamicallyQuantizableLinear(embed_dim, embed_dim, bias=bias,
                                                        device=device, dtype=dtype,
                                                        session=factory.session)
        if bias:
            self.out_proj.load_state_dict({"bias": np.zeros(embed_dim)}, strict=False)
        if add_bias_kv:
            self.bias_k = factory.parameter(init.xavier_normal_(np.empty((1, 1, embed_dim))))
            self.bias_v = factory.parameter(init.xavier_normal_(np.empty((1, 1, embed_dim))))
        else:
            self.bias_k = self.bias_v = None
        self.add_zero_attn = add_zero_attn

    def _extra_keys(self, k, v):
        """k and v ([..., heads, S, head_dim]) with bias_k / bias_v and then a zero key / value
        appended along S (no shape is read: each extra row is zeros_like of a one-row slice,
        plus the bias seen as [heads, 1, head_dim]); and how many keys were added."""
        added = 0
        if self.bias_k is not None:
            h, d = self.num_heads, self.head_dim
            k, v = (_op("cat", x, _op("zeros_like", _op("slice", x, dim=-2, start=0, end=1)) +
                        b.reshape(h, 1, d), dim=-2)
                    for x, b in ((k, self.bias_k), (v, self.bias_v)))
            added += 1
        if self.add_zero_attn:
            k, v = (_op("cat", x, _op("zeros_like", _op("slice", x, dim=-2, start=0, end=1)),
                        dim=-2) for x in (k, v))
            added += 1
        return k, v, added

    def _projections(self, query, key, value):
        """q, k, v as [..., heads, L or S, head_dim]."""
        h, e = self.num_heads, self.embed_dim
        b = self.in_proj_bias
        if self._qkv_same_embed_dim and query is key and key is value:
            qkv = _split_heads(query, self.in_proj_weight, b, 3 * h, self.head_dim, e)
            return _op("chunk", qkv, chunks=3, dim=-3, num_outputs=3)
        if self._qkv_same_embed_dim:
            w = self.in_proj_weight
            weights = [w[0:e], w[e:2 * e], w[2 * e:]]
        else:
            weights = [self.q_proj_weight, self.k_proj_weight, self.v_proj_weight]
        biases = [None] * 3 if b is None else [b[0:e], b[e:2 * e], b[2 * e:]]
        return tuple(_split_heads(x, w, bb, h, self.head_dim, d) for x, w, bb, d in
                     zip((query, key, value), weights, biases, (e, self.kdim, self.vdim)))

    def _masks(self, attn_mask, key_padding_mask, batched: bool, dtype, added: int = 0):
        masks = []
        h = self.num_heads
        if attn_mask is not None:
            # The given mask's rank and shape (a converted or padded one may be pending).
            nd, shape = _ndim(attn_mask), _shape(attn_mask)
            mask = _Mask.make(attn_mask, dtype, "attn_mask")
            if added:
                mask = mask.padded(added)
            if nd == 3 and batched:  # [N * heads, L, S] -> [N, heads, L, S]
                rows, cols = shape[-2], shape[-1] + added
                mask = mask.reshaped(lambda a: a.reshape(-1, h, *a.shape[-2:]),
                                     lambda t: t.reshape(-1, h, rows, cols))
            elif nd not in (2, 3):
                raise RuntimeError(f"attn_mask's dimension {nd} is not supported")
            masks.append(mask)
        if key_padding_mask is not None:
            mask = _Mask.make(key_padding_mask, dtype, "key_padding_mask")
            if added:
                mask = mask.padded(added)
            if batched:  # [N, S] -> [N, 1, 1, S]
                mask = mask.reshaped(lambda a: a[:, None, None, :],
                                     lambda t: _op("unsqueeze", _op("unsqueeze", t, dim=1),
                                                   dim=1))
            masks.append(mask)
        return masks

    def forward(self, query, key, value, key_padding_mask=None, need_weights: bool = True,
                attn_mask=None, average_attn_weights: bool = True, is_causal: bool = False):
        if is_causal and attn_mask is None:
            raise RuntimeError("Need attn_mask if specifying the is_causal hint.")
        nd = _ndim(query)
        batched = nd is None or nd == 3  # a pending batch output is taken as batched
        if nd is not None and nd not in (2, 3):
            raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but "
                                 f"received {nd}-D query tensor")
        dtype = self.out_proj.weight.dtype
        if batched and not self.batch_first:  # [L, N, E] -> [N, L, E], keeping `is`
            same_kv, same_qk = key is value, query is key
            query = _op("transpose", query, dim0=0, dim1=1)
            key = query if same_qk else _op("transpose", key, dim0=0, dim1=1)
            value = key if same_kv else _op("transpose", value, dim0=0, dim1=1)
        q, k, v = self._projections(query, key, value)
        k, v, added = self._extra_keys(k, v)
        masks = self._masks(attn_mask, key_padding_mask, batched, dtype, added)
        dropout = self.dropout if self.training else 0.0
        weights = None
        if need_weights or dropout > 0.0:
            scores = (q / math.sqrt(self.head_dim)) @ _op("transpose", k, dim0=-2, dim1=-1)
            for mask in masks:
                scores = mask.apply(scores)
            weights = F.softmax(scores, dim=-1)
            attended = F.dropout(weights, dropout, training=True) if dropout > 0 else weights
            out = attended @ v
        else:
            if not masks:
                operand = None
            elif len(masks) == 1:
                operand = masks[0].keep() if masks[0].boolean else masks[0].value
            elif all(m.boolean for m in masks) and all(isinstance(m.value, np.ndarray)
                                                       for m in masks):
                operand = ~(masks[0].value | masks[1].value)
            else:  # one additive mask (numpy + numpy stays in the client)
                operand = masks[0].additive(dtype) + masks[1].additive(dtype)
            out = F.scaled_dot_product_attention(q, k, v, operand)
        # [..., heads, L, head_dim] -> [..., L, E] -> out_proj
        out = _op("flatten", _op("transpose", out, dim0=-3, dim1=-2), start_dim=-2)
        out = self.out_proj(out)
        if batched and not self.batch_first:
            out = _op("transpose", out, dim0=0, dim1=1)
        if not need_weights:
            return out, None
        if average_attn_weights:
            weights = _op("mean", weights, dim=[-3])
        return out, weights


def _shape(value):
    """The shape of an operand; None for a pending batch output (a module call's is sent)."""
    if isinstance(value, Tensor):
        return None if value.is_lazy and not value._sendable else tuple(value.shape)
    return tuple(np.shape(value))


__all__ = ["MultiheadAttention", "NonDynamicallyQuantizableLinear"]
