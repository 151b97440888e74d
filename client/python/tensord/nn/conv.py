"""Conv1d, Conv2d, Conv3d, ConvTranspose1d and ConvTranspose2d (torch.nn's)."""
from __future__ import annotations

import math

import numpy as np

from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Factory

_PADDING_MODES = ("zeros", "reflect", "replicate", "circular")


def _tuple(value, n: int) -> tuple:
    return tuple(int(v) for v in value) if isinstance(value, (list, tuple)) else (int(value),) * n


class _ConvNd(Module):
    _n = 0
    _functional = None
    _transposed = False

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 dilation=1, groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None, *, session=None):
        super().__init__()
        n = self._n
        if groups <= 0:
            raise ValueError("groups must be a positive integer")
        if in_channels % groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        if out_channels % groups != 0:
            raise ValueError("out_channels must be divisible by groups")
        if padding_mode not in _PADDING_MODES:
            raise ValueError(f"padding_mode must be one of {list(_PADDING_MODES)}, but got "
                             f"padding_mode='{padding_mode}'")
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.stride = _tuple(kernel_size, n), _tuple(stride, n)
        self.dilation, self.groups, self.padding_mode = _tuple(dilation, n), groups, padding_mode
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Invalid padding string {padding!r}, should be one of "
                                 "{'valid', 'same'}")
            if padding == "same" and any(s != 1 for s in self.stride):
                raise ValueError("padding='same' is not supported for strided convolutions")
            self.padding = padding
        else:
            self.padding = _tuple(padding, n)
        # What F.pad takes for a padding_mode other than zeros: (before, after) per dim, last
        # dim first, as PyTorch's _reversed_padding_repeated_twice.
        pads = []
        for d, k, i in zip(self.dilation, self.kernel_size, range(n)):
            if self.padding == "valid":
                pads.append((0, 0))
            elif self.padding == "same":
                total = d * (k - 1)
                pads.append((total // 2, total - total // 2))
            else:
                pads.append((self.padding[i], self.padding[i]))
        self._reversed_padding_repeated_twice = [p for pair in reversed(pads) for p in pair]
        factory = Factory(session, device, dtype, what=f"tensord.nn.{type(self).__name__}")
        weight, bias_values = self._initial_values(bias)
        factory.register(self, weight=weight, bias=bias_values)

    def _weight_shape(self) -> tuple:
        return (self.out_channels, self.in_channels // self.groups, *self.kernel_size)

    def _initial_values(self, bias: bool):
        shape = self._weight_shape()
        weight = init.kaiming_uniform_(np.empty(shape), a=math.sqrt(5))
        fan_in, _ = init._calculate_fan_in_and_fan_out(weight)
        return weight, (init.fan_in_uniform_(np.empty(self.out_channels), fan_in)
                        if bias else None)

    def reset_parameters(self) -> None:
        """Draws the initial values again (in place)."""
        weight, bias = self._initial_values(self.bias is not None)
        self.load_state_dict({"weight": weight, **({"bias": bias} if bias is not None else {})},
                             strict=False)

    def forward(self, input):
        conv = type(self)._functional
        if self.padding_mode != "zeros":
            padded = F.pad(input, self._reversed_padding_repeated_twice, mode=self.padding_mode)
            return conv(padded, self.weight, self.bias, self.stride, 0, self.dilation,
                        self.groups)
        return conv(input, self.weight, self.bias, self.stride, self.padding, self.dilation,
                    self.groups)

    def extra_repr(self) -> str:
        text = (f"{self.in_channels}, {self.out_channels}, kernel_size={self.kernel_size}, "
                f"stride={self.stride}")
        zeros = (0,) * self._n
        if self.padding != zeros:
            text += f", padding={self.padding}"  # (PyTorch prints a string unquoted)
        if self.dilation != (1,) * self._n:
            text += f", dilation={self.dilation}"
        if self._transposed and self.output_padding != zeros:
            text += f", output_padding={self.output_padding}"
        if self.groups != 1:
            text += f", groups={self.groups}"
        if self.bias is None:
            text += ", bias=False"
        if self.padding_mode != "zeros":
            text += f", padding_mode={self.padding_mode}"
        return text


class Conv1d(_ConvNd):
    """torch.nn.Conv1d over [N, C, L] (or [C, L]); weight [out, in / groups, k], initialized
    as PyTorch's (kaiming_uniform(a=sqrt(5)); bias uniform(+-1/sqrt(fan_in)))."""

    _n = 1
    _functional = staticmethod(F.conv1d)


class Conv2d(_ConvNd):
    """torch.nn.Conv2d over [N, C, H, W] (or [C, H, W]); weight [out, in / groups, kH, kW],
    initialized as PyTorch's (kaiming_uniform(a=sqrt(5)); bias uniform(+-1/sqrt(fan_in)))."""

    _n = 2
    _functional = staticmethod(F.conv2d)


class Conv3d(_ConvNd):
    """torch.nn.Conv3d over [N, C, D, H, W] (or [C, D, H, W]); weight [out, in / groups, kD,
    kH, kW], initialized as PyTorch's. padding_mode other than zeros pads with F.pad first."""

    _n = 3
    _functional = staticmethod(F.conv3d)


class _ConvTransposeNd(_ConvNd):
    """A transposed convolution (the gradient of a convolution with respect to its input):
    weight [in, out / groups, *kernel] and PyTorch's initialization (kaiming_uniform(a=sqrt(5)),
    whose fan_in is then out / groups * prod(kernel)). Only padding_mode="zeros", as PyTorch."""

    _transposed = True

    def __init__(self, in_channels: int, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None, *, session=None):
        if padding_mode != "zeros":
            raise ValueError(f'Only "zeros" padding mode is supported for {type(self).__name__}')
        if isinstance(padding, str):
            raise ValueError(f"{type(self).__name__} does not take a padding string")
        super().__init__(in_channels, out_channels, kernel_size, stride, padding, dilation,
                         groups, bias, padding_mode, device, dtype, session=session)
        self.output_padding = _tuple(output_padding, self._n)

    def _weight_shape(self) -> tuple:
        return (self.in_channels, self.out_channels // self.groups, *self.kernel_size)

    def _output_padding(self, input, output_size) -> list:
        """output_padding, or what gives `output_size` (the spatial sizes, or with the batch and
        channel dims), as PyTorch's: the input's shape must then be known."""
        n = self._n
        if output_size is None:
            return list(self.output_padding)
        shape = input.shape if isinstance(input, Tensor) else np.shape(input)
        spatial = list(shape[-n:])
        output_size = [int(s) for s in output_size]
        if len(output_size) in (n + 1, n + 2):
            output_size = output_size[-n:]
        if len(output_size) != n:
            raise ValueError(f"ConvTranspose{n}D: for {len(shape)}D input, output_size must have "
                             f"{n} or {n + 2} elements (got {len(output_size)})")
        mins = [(spatial[d] - 1) * self.stride[d] - 2 * self.padding[d] +
                self.dilation[d] * (self.kernel_size[d] - 1) + 1 for d in range(n)]
        maxs = [mins[d] + self.stride[d] - 1 for d in range(n)]
        for d in range(n):
            if not mins[d] <= output_size[d] <= maxs[d]:
                raise ValueError(f"requested an output size of {output_size}, but valid sizes "
                                 f"range from {mins} to {maxs} (for an input of "
                                 f"{tuple(spatial)})")
        return [output_size[d] - mins[d] for d in range(n)]

    def forward(self, input, output_size=None):
        return type(self)._functional(input, self.weight, self.bias, self.stride, self.padding,
                                      self._output_padding(input, output_size), self.groups,
                                      self.dilation)


class ConvTranspose1d(_ConvTransposeNd):
    """torch.nn.ConvTranspose1d over [N, C, L] (or [C, L]); forward(input, output_size=None)."""

    _n = 1
    _functional = staticmethod(F.conv_transpose1d)


class ConvTranspose2d(_ConvTransposeNd):
    """torch.nn.ConvTranspose2d over [N, C, H, W] (or [C, H, W]); forward(input,
    output_size=None)."""

    _n = 2
    _functional = staticmethod(F.conv_transpose2d)
