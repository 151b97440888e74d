"""Recurrent layers (torch.nn.RNN, LSTM, GRU): PyTorch's parameters (names, shapes, order),
initialisation (uniform(+-1/sqrt(hidden_size)), drawn by numpy), arguments and equations,
computed step by step from the catalog's ops. Each layer and direction projects the whole
sequence's input in one `linear` call; a step is then a few calls on [1, N, H] tensors, so a
module call's forward batch sends a whole sequence in a few Executes, and the server's
autodiff differentiates through every step. PackedSequence inputs are not supported.
"""
from __future__ import annotations

import math
import numbers
import warnings

import numpy as np

from .. import dtypes
from ..tensor import Tensor
from . import functional as F
from . import init
from .module import Module
from .parameter import Factory

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _shape(value) -> tuple:
    """The shape of an input or state: a pending module call's output is sent for it, and a
    traced function's input has its example's; other pending outputs have none yet."""
    if isinstance(value, Tensor):
        if value.is_lazy and not value._sendable:
            known = getattr(value._lazy[0], "known_shape", None)
            shape = known(value) if known is not None else None
            if shape is None:
                raise ValueError(
                    "tensord: a recurrent layer unrolls over its input's steps, so it needs "
                    "the input's shape, which a pending output of a `with sess.batch():` "
                    "block or of a traced function does not have: call it outside the block, "
                    "or, in a traced function, on one of the function's inputs")
            return shape
        return tuple(value.shape)
    return tuple(np.shape(value))




def step(op, mode: str, gates_in, h, c, params):
    """One step of a recurrent layer or cell: `gates_in` the input's projection for it, the
    previous h (and c), the parameters the step itself uses (weight_hh, bias_hh, weight_hr);
    the new h and c (None but for LSTM). `op` makes a call in the parameters' session."""
    gates_h = F.linear(h, params["weight_hh"], params.get("bias_hh"))
    if mode in ("RNN_TANH", "RNN_RELU"):
        pre = op("add", gates_in, gates_h)
        return (F.tanh(pre) if mode == "RNN_TANH" else F.relu(pre)), None
    if mode == "LSTM":
        gates = op("add", gates_in, gates_h)
        i, f, g, o = op("chunk", gates, chunks=4, dim=-1, num_outputs=4)
        i, f, g, o = F.sigmoid(i), F.sigmoid(f), F.tanh(g), F.sigmoid(o)
        c = op("add", op("mul", f, c), op("mul", i, g))
        h = op("mul", o, F.tanh(c))
        if "weight_hr" in params:
            h = F.linear(h, params["weight_hr"])
        return h, c
    r_i, z_i, n_i = op("chunk", gates_in, chunks=3, dim=-1, num_outputs=3)
    r_h, z_h, n_h = op("chunk", gates_h, chunks=3, dim=-1, num_outputs=3)
    r = F.sigmoid(op("add", r_h, r_i))
    z = F.sigmoid(op("add", z_h, z_i))
    n = F.tanh(op("add", n_i, op("mul", n_h, r)))
    return op("add", op("mul", op("sub", h, n), z), n), None  # (h - n) z + n, as ATen's cell


class RNNBase(Module):
    """What RNN, LSTM and GRU share: the parameters of every layer and direction, the input
    and state checks, and the loop over layers, directions and steps."""

    def __init__(self, mode: str, input_size: int, hidden_size: int, num_layers: int = 1,
                 bias: bool = True, batch_first: bool = False, dropout: float = 0.0,
                 bidirectional: bool = False, proj_size: int = 0, device=None, dtype=None, *,
                 session=None):
        super().__init__()
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        if not isinstance(dropout, numbers.Number) or not 0 <= dropout <= 1 or \
                isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}")
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool) or hidden_size <= 0:
            raise ValueError("hidden_size must be an integer greater than zero")
        if not isinstance(num_layers, int) or isinstance(num_layers, bool) or num_layers <= 0:
            raise ValueError("num_layers must be an integer greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.mode = mode
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        self.proj_size = proj_size
        factory = Factory(session, device, dtype, what=f"tensord.nn.{type(self).__name__}")
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        directions = 2 if bidirectional else 1
        stdv = 1.0 / math.sqrt(hidden_size)
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                shapes = [("weight_ih", (gate_size, layer_input)),
                          ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                suffix = "_reverse" if direction == 1 else ""
                for name, shape in shapes:
                    full = f"{name}_l{layer}{suffix}"
                    factory.register(self, **{full: init.uniform_(np.empty(shape), -stdv, stdv)})
                    self._flat_weights_names.append(full)

    def _op(self, name, *operands, **attrs):
        """An op in the session of the layer's parameters (the input and states may be numpy
        arrays, which name no session)."""
        return self.weight_ih_l0.session.op(name, *operands, **attrs)

    def _pieces(self, t, n: int, dim: int):
        """`t` split into n pieces of size 1 along `dim` (one call)."""
        if n == 1:
            return [t]
        return list(self._op("chunk", t, chunks=n, dim=dim, num_outputs=n))

    def _cat(self, ts, dim: int):
        return ts[0] if len(ts) == 1 else self._op("cat", *ts, dim=dim)

    @property
    def _flat_weights(self) -> list:
        return [getattr(self, name) for name in self._flat_weights_names]

    @property
    def all_weights(self) -> list:
        """Per layer and direction, its parameters in PyTorch's order."""
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional else 1))
        flat = self._flat_weights
        return [flat[k:k + per] for k in range(0, len(flat), per)]

    def flatten_parameters(self) -> None:
        """PyTorch's cuDNN weight packing; tensord's parameters are server tensors already,
        so there is nothing to pack."""

    def extra_repr(self) -> str:
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s

    # -- the computation ---------------------------------------------------------------------
    def _cell(self, gates_in, h, c, params):
        return step(self._op, self.mode, gates_in, h, c, params)

    def _initial_state(self, hx, batched: bool, batch: int, name: str, size: int):
        """The state of every layer and direction as [1, N, size] tensors: hx's (checked like
        PyTorch's) or zeros."""
        count = self.num_layers * (2 if self.bidirectional else 1)
        w = self.weight_ih_l0
        if hx is None:
            zero = w.session.op("zeros", shape=[1, batch, size], dtype=dtypes.name(w.dtype),
                                device=w.device)
            return [zero] * count
        shape = _shape(hx)
        if len(shape) != (3 if batched else 2):
            raise RuntimeError(
                f"For {'batched 3-D' if batched else 'unbatched 2-D'} input, {name} should "
                f"also be {3 if batched else 2}-D but got {len(shape)}-D tensor")
        expected = (count, batch, size) if batched else (count, size)
        if tuple(shape) != expected:
            raise RuntimeError(f"Expected hidden size {expected}, got {tuple(shape)}")
        if not batched:
            hx = self._op("unsqueeze", hx, dim=1)
        return self._pieces(hx, count, 0)

    def _run(self, input, hx, cx=None):
        shape = _shape(input)
        if len(shape) not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2-D or 3-D but "
                             f"received {len(shape)}-D tensor")
        if shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {shape[-1]}")
        batched = len(shape) == 3
        batch_dim = 0 if self.batch_first else 1
        steps = shape[1 - batch_dim] if batched else shape[0]
        batch = shape[batch_dim] if batched else 1
        if steps == 0:
            raise RuntimeError("Expected sequence length to be larger than 0 in RNN")
        x = input if batched else self._op("unsqueeze", input, dim=batch_dim)
        if self.batch_first:
            x = self._op("transpose", x, dim0=0, dim1=1)  # [L, N, H_in]
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        h0 = self._initial_state(hx, batched, batch, "hx", real_hidden)
        c0 = self._initial_state(cx, batched, batch, "cx", self.hidden_size) \
            if self.mode == "LSTM" else None
        directions = 2 if self.bidirectional else 1
        h_n, c_n = [], []
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                k = layer * directions + direction
                suffix = "_reverse" if direction == 1 else ""
                params = {name: getattr(self, f"{name}_l{layer}{suffix}")
                          for name in ("weight_ih", "weight_hh", "bias_ih", "bias_hh",
                                       "weight_hr")
                          if getattr(self, f"{name}_l{layer}{suffix}", None) is not None}
                projected = self._pieces(F.linear(x, params["weight_ih"], params.get("bias_ih")),
                                    steps, 0)
                h, c = h0[k], (c0[k] if c0 is not None else None)
                out = [None] * steps
                for t in (range(steps) if direction == 0 else reversed(range(steps))):
                    h, c = self._cell(projected[t], h, c, params)
                    out[t] = h
                outputs.append(self._cat(out, 0))
                h_n.append(h)
                c_n.append(c)
            x = self._cat(outputs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                x = F.dropout(x, self.dropout, True)
        if self.batch_first:
            x = self._op("transpose", x, dim0=0, dim1=1)
        h_n = self._cat(h_n, 0)
        c_n = self._cat(c_n, 0) if self.mode == "LSTM" else None
        if not batched:
            x = self._op("squeeze", x, dim=batch_dim)
            h_n = self._op("squeeze", h_n, dim=1)
            c_n = self._op("squeeze", c_n, dim=1) if c_n is not None else None
        return x, h_n, c_n

    @staticmethod
    def _refuse_packed(input) -> None:
        if hasattr(input, "batch_sizes") and hasattr(input, "sorted_indices"):
            raise TypeError("tensord: recurrent layers take padded tensors; PackedSequence "
                            "inputs are not supported")


class RNN(RNNBase):
    """torch.nn.RNN: h_t = tanh (or relu) of x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh.
    forward(input, hx=None) returns (output, h_n)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if self.nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif self.nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'")
        super().__init__(mode, *args, **kwargs)

    def forward(self, input, hx=None):
        self._refuse_packed(input)
        output, h_n, _ = self._run(input, hx)
        return output, h_n


class LSTM(RNNBase):
    """torch.nn.LSTM: gates i, f, g, o from x_t W_ih^T + b_ih + h W_hh^T + b_hh;
    c' = f c + i g, h' = o tanh(c') (then h' W_hr^T with proj_size). forward(input,
    hx=None), hx = (h_0, c_0), returns (output, (h_n, c_n))."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        self._refuse_packed(input)
        if hx is not None and not (isinstance(hx, (tuple, list)) and len(hx) == 2):
            raise RuntimeError("LSTM: hx must be a tuple (h_0, c_0)")
        h0, c0 = (None, None) if hx is None else hx
        output, h_n, c_n = self._run(input, h0, c0)
        return output, (h_n, c_n)


class GRU(RNNBase):
    """torch.nn.GRU: r, z from sigmoids, n = tanh(x W_in^T + b_in + r (h W_hn^T + b_hn)),
    h' = (1 - z) n + z h. forward(input, hx=None) returns (output, h_n)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    def forward(self, input, hx=None):
        self._refuse_packed(input)
        output, h_n, _ = self._run(input, hx)
        return output, h_n


__all__ = ["RNNBase", "RNN", "LSTM", "GRU"]
