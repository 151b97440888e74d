"""BatchNorm1d, BatchNorm2d, LayerNorm and GroupNorm (torch.nn's)."""
from __future__ import annotations

import numpy as np

from ..tensor import Tensor
from . import functional as F
from .module import Module
from .parameter import Factory


class _BatchNorm(Module):
    """running_mean and running_var are buffers (tensors of the session, updated in place by
    the batch_norm op in training mode); num_batches_tracked is a buffer kept in the client (a
    0-d int64 numpy array), counted at every training forward as PyTorch does."""

    _dims = ()

    def __init__(self, num_features: int, eps: float = 1e-5, momentum=0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *, session=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        factory = Factory(session, device, dtype, what=f"tensord.nn.{type(self).__name__}")
        factory.register(self, weight=np.ones(num_features) if affine else None,
                         bias=np.zeros(num_features) if affine else None)
        if track_running_stats:
            self.register_buffer("running_mean", factory.buffer(np.zeros(num_features)))
            self.register_buffer("running_var", factory.buffer(np.ones(num_features)))
            self.register_buffer("num_batches_tracked", np.array(0, np.int64))
        else:
            for name in ("running_mean", "running_var", "num_batches_tracked"):
                self.register_buffer(name, None)

    def reset_running_stats(self) -> None:
        if self.track_running_stats:
            n = self.num_features
            self.load_state_dict({"running_mean": np.zeros(n), "running_var": np.ones(n),
                                  "num_batches_tracked": np.array(0, np.int64)}, strict=False)

    def reset_parameters(self) -> None:
        self.reset_running_stats()
        if self.affine:
            n = self.num_features
            self.load_state_dict({"weight": np.ones(n), "bias": np.zeros(n)}, strict=False)

    def _check_input_dim(self, input) -> None:
        if isinstance(input, Tensor) and input.is_lazy:
            return  # a pending batch output: the op checks the shape when the batch runs
        ndim = input.ndim if isinstance(input, Tensor) else np.ndim(input)
        if ndim not in self._dims:
            want = " or ".join(f"{d}D" for d in self._dims)
            raise ValueError(f"expected {want} input (got {ndim}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            self.num_batches_tracked = np.array(self.num_batches_tracked + 1, np.int64)
            if self.momentum is None:  # a cumulative moving average
                factor = 1.0 / float(self.num_batches_tracked)
        batch_stats = self.training or (self.running_mean is None and self.running_var is None)
        use_running = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if use_running else None,
                            self.running_var if use_running else None, self.weight, self.bias,
                            batch_stats, factor, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, "
                f"affine={self.affine}, track_running_stats={self.track_running_stats}")


class BatchNorm1d(_BatchNorm):
    """torch.nn.BatchNorm1d over [N, C] or [N, C, L]."""

    _dims = (2, 3)


class BatchNorm2d(_BatchNorm):
    """torch.nn.BatchNorm2d over [N, C, H, W]."""

    _dims = (4,)


class LayerNorm(Module):
    """torch.nn.LayerNorm over the trailing `normalized_shape` dims; weight ones, bias zeros."""

    def __init__(self, normalized_shape, eps: float = 1e-5, elementwise_affine: bool = True,
                 bias: bool = True, device=None, dtype=None, *, session=None):
        super().__init__()
        if isinstance(normalized_shape, int):
            normalized_shape = (normalized_shape,)
        self.normalized_shape = tuple(int(d) for d in normalized_shape)
        self.eps, self.elementwise_affine = eps, elementwise_affine
        if elementwise_affine:
            factory = Factory(session, device, dtype, what="tensord.nn.LayerNorm")
            self.weight = factory.parameter(np.ones(self.normalized_shape))
            if bias:
                self.bias = factory.parameter(np.zeros(self.normalized_shape))
            else:
                self.register_parameter("bias", None)
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.layer_norm(input, self.normalized_shape, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return (f"{self.normalized_shape}, eps={self.eps}, "
                f"elementwise_affine={self.elementwise_affine}")


class GroupNorm(Module):
    """torch.nn.GroupNorm: statistics per sample and group of num_channels / num_groups."""

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5,
                 affine: bool = True, device=None, dtype=None, *, session=None):
        super().__init__()
        if num_channels % num_groups != 0:
            raise ValueError("num_channels must be divisible by num_groups")
        self.num_groups, self.num_channels, self.eps, self.affine = \
            num_groups, num_channels, eps, affine
        if affine:
            factory = Factory(session, device, dtype, what="tensord.nn.GroupNorm")
            self.weight = factory.parameter(np.ones(num_channels))
            self.bias = factory.parameter(np.zeros(num_channels))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)

    def forward(self, input):
        return F.group_norm(input, self.num_groups, self.weight, self.bias, self.eps)

    def extra_repr(self) -> str:
        return f"{self.num_groups}, {self.num_channels}, eps={self.eps}, affine={self.affine}"
