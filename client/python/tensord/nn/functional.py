"""tensord.nn.functional: torch.nn.functional's signatures over the server's ops.

    import tensord.nn.functional as F
    y = F.relu(F.linear(x, w, b))
    loss = F.cross_entropy(logits, labels)

Each function is one op of the server's catalog (a few, where PyTorch's optional arguments need
it, two): its arguments become the op's attributes, named as the catalog names them. Operands
are Tensors, numpy arrays or numbers; the session is the first Tensor operand's, else the
default one (tensord.set_session). Inside `with sess.batch():` every function is lazy as any op.
`inplace=True` is accepted and ignored (tensord tensors are immutable: the result is new).
"""
from __future__ import annotations

import numpy as np

from .. import defaults
from ..tensor import Tensor
from ._call import op as _op
from ._call import trailing as _trailing
from ._loss import (binary_cross_entropy, binary_cross_entropy_with_logits, cross_entropy,
                    huber_loss, kl_div, l1_loss, mse_loss, nll_loss, smooth_l1_loss)

# A [0]-shaped operand: batch_norm's "absent" running statistics.
_ABSENT = np.zeros((0,), np.float32)


def _ints(value, n: int) -> list:
    if isinstance(value, (list, tuple)):
        return [int(v) for v in value]
    return [int(value)] * n


def _padding(value, n: int):
    return value if isinstance(value, str) else _ints(value, n)


def _stride(value, n: int):
    # PyTorch's stride=None (or []) of pooling: the kernel size, the op's default.
    return None if value is None or (isinstance(value, (list, tuple)) and not value) \
        else _ints(value, n)


def _ndim(t, what: str) -> int:
    if isinstance(t, Tensor):
        if t.is_lazy and not t._sendable:
            raise ValueError(f"tensord: {what} needs the input's shape, which a pending batch "
                             "output does not have yet: pass dim=")
        return t.ndim
    return np.ndim(t)


def _weight_for(weight, bias):
    # The norm ops take weight before bias and no empty weight: ones where only a bias is given.
    if weight is None and bias is not None:
        return _op("ones_like", bias)
    return weight


# -- linear, convolution ----------------------------------------------------------------------
def linear(input, weight, bias=None):
    return _op("linear", *_trailing([input, weight, bias]))


def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _op("conv1d", *_trailing([input, weight, bias]), stride=_ints(stride, 1),
               padding=_padding(padding, 1), dilation=_ints(dilation, 1), groups=int(groups))


def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _op("conv2d", *_trailing([input, weight, bias]), stride=_ints(stride, 2),
               padding=_padding(padding, 2), dilation=_ints(dilation, 2), groups=int(groups))


def conv3d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    return _op("conv3d", *_trailing([input, weight, bias]), stride=_ints(stride, 3),
               padding=_padding(padding, 3), dilation=_ints(dilation, 3), groups=int(groups))


def conv_transpose1d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _op("conv_transpose1d", *_trailing([input, weight, bias]), stride=_ints(stride, 1),
               padding=_ints(padding, 1), output_padding=_ints(output_padding, 1),
               groups=int(groups), dilation=_ints(dilation, 1))


def conv_transpose2d(input, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1,
                     dilation=1):
    return _op("conv_transpose2d", *_trailing([input, weight, bias]), stride=_ints(stride, 2),
               padding=_ints(padding, 2), output_padding=_ints(output_padding, 2),
               groups=int(groups), dilation=_ints(dilation, 2))


# -- pooling ----------------------------------------------------------------------------------
def max_pool1d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _op("max_pool1d", input, kernel_size=_ints(kernel_size, 1),
               stride=_stride(stride, 1), padding=_ints(padding, 1),
               dilation=_ints(dilation, 1), ceil_mode=bool(ceil_mode),
               return_indices=bool(return_indices))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    return _op("max_pool2d", input, kernel_size=_ints(kernel_size, 2),
               stride=_stride(stride, 2), padding=_ints(padding, 2),
               dilation=_ints(dilation, 2), ceil_mode=bool(ceil_mode),
               return_indices=bool(return_indices))


def avg_pool1d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True):
    return _op("avg_pool1d", input, kernel_size=_ints(kernel_size, 1),
               stride=_stride(stride, 1), padding=_ints(padding, 1), ceil_mode=bool(ceil_mode),
               count_include_pad=bool(count_include_pad))


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False,
               count_include_pad=True, divisor_override=None):
    return _op("avg_pool2d", input, kernel_size=_ints(kernel_size, 2),
               stride=_stride(stride, 2), padding=_ints(padding, 2), ceil_mode=bool(ceil_mode),
               count_include_pad=bool(count_include_pad), divisor_override=divisor_override)


def _output_size(value):
    return list(value) if isinstance(value, (list, tuple)) else [int(value), int(value)]


def adaptive_avg_pool2d(input, output_size):
    return _op("adaptive_avg_pool2d", input, output_size=_output_size(output_size))


def adaptive_max_pool2d(input, output_size, return_indices=False):
    return _op("adaptive_max_pool2d", input, output_size=_output_size(output_size),
               return_indices=bool(return_indices))


# -- normalization, embedding, dropout --------------------------------------------------------
def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    operands = [input, _ABSENT if running_mean is None else running_mean,
                _ABSENT if running_var is None else running_var, _weight_for(weight, bias), bias]
    return _op("batch_norm", *_trailing(operands), training=bool(training),
               momentum=float(momentum), eps=float(eps))


def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    return _op("layer_norm", *_trailing([input, _weight_for(weight, bias), bias]),
               normalized_shape=_ints(normalized_shape, 1), eps=float(eps))


def group_norm(input, num_groups, weight=None, bias=None, eps=1e-5):
    return _op("group_norm", *_trailing([input, _weight_for(weight, bias), bias]),
               num_groups=int(num_groups), eps=float(eps))


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0,
              scale_grad_by_freq=False, sparse=False):
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("tensord: embedding supports neither max_norm, "
                                  "scale_grad_by_freq nor sparse gradients")
    if padding_idx is not None and padding_idx < 0:
        padding_idx += weight.shape[0]
    return _op("embedding", input, weight, padding_idx=padding_idx)


def dropout(input, p=0.5, training=True, inplace=False):
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    # The mask is a function of the seed: drawn from tensord's generator (tensord.manual_seed).
    seed = int(defaults.generator().integers(0, 2 ** 62))
    return _op("dropout", input, p=float(p), training=True, seed=seed)


# -- activations ------------------------------------------------------------------------------
def relu(input, inplace=False):
    return _op("relu", input)


def relu6(input, inplace=False):
    return _op("relu6", input)


def elu(input, alpha=1.0, inplace=False):
    return _op("elu", input, alpha=float(alpha))


def celu(input, alpha=1.0, inplace=False):
    return _op("celu", input, alpha=float(alpha))


def selu(input, inplace=False):
    return _op("selu", input)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    return _op("leaky_relu", input, negative_slope=float(negative_slope))


def gelu(input, approximate="none"):
    return _op("gelu", input, approximate=approximate)


def silu(input, inplace=False):
    return _op("silu", input)


def mish(input, inplace=False):
    return _op("mish", input)


def sigmoid(input):
    return _op("sigmoid", input)


def tanh(input):
    return _op("tanh", input)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    return _op("hardtanh", input, min_val=float(min_val), max_val=float(max_val))


def hardsigmoid(input, inplace=False):
    return _op("hardsigmoid", input)


def hardswish(input, inplace=False):
    return _op("hardswish", input)


def softplus(input, beta=1.0, threshold=20.0):
    return _op("softplus", input, beta=float(beta), threshold=float(threshold))


def softsign(input):
    return _op("softsign", input)


def logsigmoid(input):
    return _op("logsigmoid", input)


def glu(input, dim=-1):
    return _op("glu", input, dim=int(dim))


def prelu(input, weight):
    return _op("prelu", input, weight)


def _softmax_dim(input, dim, name: str) -> int:
    if dim is not None:
        return int(dim)
    # PyTorch's implicit choice (deprecated there too): 0 for 0-, 1- and 3-d inputs, else 1.
    return 0 if _ndim(input, f"{name}(dim=None)") in (0, 1, 3) else 1


def softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _op("softmax", input, dim=_softmax_dim(input, dim, "softmax"), dtype=dtype)


def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    return _op("log_softmax", input, dim=_softmax_dim(input, dim, "log_softmax"), dtype=dtype)


def softmin(input, dim=None, _stacklevel=3, dtype=None):
    return _op("softmin", input, dim=_softmax_dim(input, dim, "softmin"), dtype=dtype)


# -- others -----------------------------------------------------------------------------------
def pad(input, pad, mode="constant", value=None):
    return _op("pad", input, pad=_ints(pad, 1), mode=mode,
               value=None if value is None else float(value))


def one_hot(tensor, num_classes=-1):
    return _op("one_hot", tensor, num_classes=int(num_classes))


def cosine_similarity(x1, x2, dim=1, eps=1e-8):
    return _op("cosine_similarity", x1, x2, dim=int(dim), eps=float(eps))


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None):
    return _op("scaled_dot_product_attention", *_trailing([query, key, value, attn_mask]),
               dropout_p=float(dropout_p), is_causal=bool(is_causal), scale=scale)


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    if antialias:
        raise NotImplementedError("tensord: interpolate(antialias=True) is not supported")
    if scale_factor is not None and not isinstance(scale_factor, (list, tuple)):
        scale_factor = [float(scale_factor)]
    if size is not None and not isinstance(size, (list, tuple)):
        size = [int(size)]
    return _op("interpolate", input, size=size, scale_factor=scale_factor, mode=mode,
               align_corners=align_corners, recompute_scale_factor=recompute_scale_factor)


__all__ = ["linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
           "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "adaptive_avg_pool2d",
           "adaptive_max_pool2d",
           "batch_norm", "layer_norm", "group_norm", "embedding", "dropout", "relu", "relu6",
           "elu", "celu", "selu", "leaky_relu", "gelu", "silu", "mish", "sigmoid", "tanh",
           "hardtanh", "hardsigmoid", "hardswish", "softplus", "softsign", "logsigmoid", "glu",
           "prelu", "softmax", "log_softmax", "softmin", "pad", "one_hot", "cosine_similarity",
           "scaled_dot_product_attention", "interpolate", "mse_loss", "l1_loss", "smooth_l1_loss",
           "huber_loss", "cross_entropy", "nll_loss", "binary_cross_entropy",
           "binary_cross_entropy_with_logits", "kl_div"]
