"""Identity and Linear (torch.nn.Identity, torch.nn.Linear)."""
from __future__ import annotations

import math

import numpy as np

from . import functional as F
from . import init
from .module import Module
from .parameter import Factory


class Identity(Module):
    """Returns its input; takes (and ignores) any arguments, as torch.nn.Identity."""

    def __init__(self, *args, **kwargs):
        super().__init__()

    def forward(self, input):
        return input


class Linear(Module):
    """y = x W^T + b (torch.nn.Linear). weight [out_features, in_features] draws
    kaiming_uniform(a=sqrt(5)), i.e. uniform(+-1/sqrt(in_features)), and so does bias, as
    PyTorch's reset_parameters (numpy's generator: tensord.manual_seed)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None,
                 dtype=None, *, session=None):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        factory = Factory(session, device, dtype, what="tensord.nn.Linear")
        weight, bias_values = self._initial_values(bias)
        factory.register(self, weight=weight, bias=bias_values)

    def _initial_values(self, bias: bool):
        weight = init.kaiming_uniform_(np.empty((self.out_features, self.in_features)),
                                       a=math.sqrt(5))
        values = init.fan_in_uniform_(np.empty(self.out_features), self.in_features) \
            if bias else None
        return weight, values

    def reset_parameters(self) -> None:
        """Draws the initial values again (in place)."""
        weight, bias = self._initial_values(self.bias is not None)
        self.load_state_dict({"weight": weight, **({"bias": bias} if bias is not None else {})},
                             strict=False)

    def forward(self, input):
        return F.linear(input, self.weight, self.bias)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}")
