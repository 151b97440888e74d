"""Loss modules (torch.nn's MSELoss, L1Loss, CrossEntropyLoss, NLLLoss, BCEWithLogitsLoss,
...): `criterion(input, target)` is the tensord.nn.functional loss with the module's arguments.
A class weight (and pos_weight) is a buffer: a Tensor of the session, or uploaded from numpy /
torch at construction."""
from __future__ import annotations

from ..tensor import Tensor
from . import functional as F
from ._loss import _reduction
from .module import Module
from .parameter import as_array


class _Loss(Module):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean"):
        super().__init__()
        # Checked at the call, as PyTorch does (KLDivLoss also takes "batchmean").
        self.reduction = reduction if size_average is None and reduce is None \
            else _reduction(size_average, reduce, reduction)


class _WeightedLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean",
                 *, session=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _buffer(weight, session))


def _buffer(value, session):
    """A Tensor of `value` (None stays None; a Tensor is used as it is)."""
    if value is None or isinstance(value, Tensor):
        return value
    from .. import defaults
    sess = session or defaults.get_session(required=True, what="a loss with a weight")
    return sess.tensor(as_array(value))


class MSELoss(_Loss):
    def forward(self, input, target):
        return F.mse_loss(input, target, reduction=self.reduction)


class L1Loss(_Loss):
    def forward(self, input, target):
        return F.l1_loss(input, target, reduction=self.reduction)


class SmoothL1Loss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 beta: float = 1.0):
        super().__init__(size_average, reduce, reduction)
        self.beta = beta

    def forward(self, input, target):
        return F.smooth_l1_loss(input, target, reduction=self.reduction, beta=self.beta)


class HuberLoss(_Loss):
    def __init__(self, reduction: str = "mean", delta: float = 1.0):
        super().__init__(reduction=reduction)
        self.delta = delta

    def forward(self, input, target):
        return F.huber_loss(input, target, reduction=self.reduction, delta=self.delta)


class CrossEntropyLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", label_smoothing: float = 0.0, *, session=None):
        super().__init__(weight, size_average, reduce, reduction, session=session)
        self.ignore_index, self.label_smoothing = ignore_index, label_smoothing

    def forward(self, input, target):
        return F.cross_entropy(input, target, weight=self.weight, ignore_index=self.ignore_index,
                               reduction=self.reduction, label_smoothing=self.label_smoothing)


class NLLLoss(_WeightedLoss):
    def __init__(self, weight=None, size_average=None, ignore_index: int = -100, reduce=None,
                 reduction: str = "mean", *, session=None):
        super().__init__(weight, size_average, reduce, reduction, session=session)
        self.ignore_index = ignore_index

    def forward(self, input, target):
        return F.nll_loss(input, target, weight=self.weight, ignore_index=self.ignore_index,
                          reduction=self.reduction)


class BCELoss(_WeightedLoss):
    def forward(self, input, target):
        return F.binary_cross_entropy(input, target, weight=self.weight,
                                      reduction=self.reduction)


class BCEWithLogitsLoss(_Loss):
    def __init__(self, weight=None, size_average=None, reduce=None, reduction: str = "mean",
                 pos_weight=None, *, session=None):
        super().__init__(size_average, reduce, reduction)
        self.register_buffer("weight", _buffer(weight, session))
        self.register_buffer("pos_weight", _buffer(pos_weight, session))

    def forward(self, input, target):
        return F.binary_cross_entropy_with_logits(input, target, self.weight,
                                                  reduction=self.reduction,
                                                  pos_weight=self.pos_weight)


class KLDivLoss(_Loss):
    def __init__(self, size_average=None, reduce=None, reduction: str = "mean",
                 log_target: bool = False):
        super().__init__(size_average, reduce, reduction)
        self.log_target = log_target

    def forward(self, input, target):
        return F.kl_div(input, target, reduction=self.reduction, log_target=self.log_target)
