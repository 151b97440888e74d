"""The loss functions of tensord.nn.functional (torch.nn.functional's signatures, including
the legacy size_average / reduce arguments, which map to reduction as in PyTorch)."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from ._call import op, trailing

_REDUCTIONS = ("none", "mean", "sum")


def _reduction(size_average, reduce, reduction: str) -> str:
    if size_average is not None or reduce is not None:
        # torch.nn._reduction.legacy_get_string
        size_average = True if size_average is None else size_average
        reduce = True if reduce is None else reduce
        return "mean" if reduce and size_average else "sum" if reduce else "none"
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")
    return reduction


def mse_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return op("mse_loss", input, target, reduction=_reduction(size_average, reduce, reduction))


def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    return op("l1_loss", input, target, reduction=_reduction(size_average, reduce, reduction))


def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    return op("smooth_l1_loss", input, target,
              reduction=_reduction(size_average, reduce, reduction), beta=float(beta))


def huber_loss(input, target, reduction="mean", delta=1.0):
    return op("huber_loss", input, target, reduction=_reduction(None, None, reduction),
              delta=float(delta))


def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    return op("cross_entropy", *trailing([input, target, weight]),
              ignore_index=int(ignore_index),
              reduction=_reduction(size_average, reduce, reduction),
              label_smoothing=float(label_smoothing))


def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    return op("nll_loss", *trailing([input, target, weight]), ignore_index=int(ignore_index),
              reduction=_reduction(size_average, reduce, reduction))


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None,
                         reduction="mean"):
    return op("binary_cross_entropy", *trailing([input, target, weight]),
              reduction=_reduction(size_average, reduce, reduction))


def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    # The op's optional inputs are positional: a pos_weight without a weight takes weight 1.
    if pos_weight is not None and weight is None:
        weight = 1.0
    return op("binary_cross_entropy_with_logits", *trailing([input, target, weight, pos_weight]),
              reduction=_reduction(size_average, reduce, reduction))


def kl_div(input, target, size_average=None, reduce=None, reduction="mean", log_target=False):
    if reduction == "batchmean" and size_average is None and reduce is None:
        # PyTorch's batchmean: the sum over the size of the first dim (needs the input's shape).
        shape = np.shape(input) if not isinstance(input, Tensor) else input.shape
        total = op("kl_div", input, target, reduction="sum", log_target=bool(log_target))
        return total / float(shape[0]) if shape else total
    return op("kl_div", input, target, reduction=_reduction(size_average, reduce, reduction),
              log_target=bool(log_target))


__all__ = ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "cross_entropy", "nll_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "kl_div"]
