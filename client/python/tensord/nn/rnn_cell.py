"""Recurrent cells (torch.nn.RNNCell, LSTMCell, GRUCell): one step of the recurrent layers'
equations (rnn.py) on [N, input_size] input, for loops written by hand: PyTorch's
parameters (weight_ih, weight_hh, bias_ih, bias_hh), initialisation, checks and results.
"""
from __future__ import annotations

import math

import numpy as np

from .. import dtypes
from . import functional as F
from . import init
from .module import Module
from .parameter import Factory
from .rnn import _GATES, _shape, step


class RNNCellBase(Module):
    """What the three cells share: the parameters, the input and state checks."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, bias: bool = True,
                 device=None, dtype=None, *, session=None):
        super().__init__()
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool) or hidden_size <= 0:
            raise ValueError("hidden_size must be an integer greater than zero")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self._mode = mode
        factory = Factory(session, device, dtype, what=f"tensord.nn.{type(self).__name__}")
        gate_size = _GATES[mode] * hidden_size
        stdv = 1.0 / math.sqrt(hidden_size)
        shapes = [("weight_ih", (gate_size, input_size)), ("weight_hh", (gate_size, hidden_size))]
        if bias:
            shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
        for name, shape in shapes:
            factory.register(self, **{name: init.uniform_(np.empty(shape), -stdv, stdv)})
        if not bias:
            factory.register(self, bias_ih=None, bias_hh=None)

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        nonlinearity = self.__dict__.get("nonlinearity", "tanh")
        if nonlinearity != "tanh":
            s += f", nonlinearity={nonlinearity}"
        return s

    def _op(self, name, *operands, **attrs):
        return self.weight_ih.session.op(name, *operands, **attrs)

    def _state(self, value, batched: bool, batch: int):
        """A state given (unsqueezed for unbatched input), or zeros of [N, hidden_size]."""
        if value is None:
            w = self.weight_ih
            return self._op("zeros", shape=[batch, self.hidden_size],
                            dtype=dtypes.name(w.dtype), device=w.device)
        return value if batched else self._op("unsqueeze", value, dim=0)

    def _step(self, input, hx, cx=None):
        shape = _shape(input)
        name = type(self).__name__
        if len(shape) not in (1, 2):
            raise AssertionError(f"{name}: Expected input to be 1-D or 2-D but received "
                                 f"{len(shape)}-D tensor")
        if shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {shape[-1]} expected "
                               f"{self.input_size}")
        batched = len(shape) == 2
        x = input if batched else self._op("unsqueeze", input, dim=0)
        batch = shape[0] if batched else 1
        h = self._state(hx, batched, batch)
        c = self._state(cx, batched, batch) if self._mode == "LSTM" else None
        params = {"weight_hh": self.weight_hh}
        if self.bias_hh is not None:
            params["bias_hh"] = self.bias_hh
        gates_in = F.linear(x, self.weight_ih, self.bias_ih)
        h, c = step(self._op, self._mode, gates_in, h, c, params)
        if not batched:
            h = self._op("squeeze", h, dim=0)
            c = self._op("squeeze", c, dim=0) if c is not None else None
        return h, c


class RNNCell(RNNCellBase):
    """torch.nn.RNNCell: h' = tanh (or relu) of x W_ih^T + b_ih + h W_hh^T + b_hh."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None, *, session=None):
        if nonlinearity not in ("tanh", "relu"):
            raise ValueError(f"Unknown nonlinearity: {nonlinearity}")
        super().__init__("RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU", input_size,
                         hidden_size, bias, device, dtype, session=session)
        self.nonlinearity = nonlinearity

    def forward(self, input, hx=None):
        return self._step(input, hx)[0]


class LSTMCell(RNNCellBase):
    """torch.nn.LSTMCell: forward(input, hx=None), hx = (h, c); returns (h', c')."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None, *, session=None):
        super().__init__("LSTM", input_size, hidden_size, bias, device, dtype, session=session)

    def forward(self, input, hx=None):
        h0, c0 = (None, None) if hx is None else hx
        return self._step(input, h0, c0)


class GRUCell(RNNCellBase):
    """torch.nn.GRUCell: returns h' = (1 - z) n + z h."""

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None, *, session=None):
        super().__init__("GRU", input_size, hidden_size, bias, device, dtype, session=session)

    def forward(self, input, hx=None):
        return self._step(input, hx)[0]


__all__ = ["RNNCellBase", "RNNCell", "LSTMCell", "GRUCell"]
