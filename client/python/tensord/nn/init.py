"""torch.nn.init: fill a tensor with values drawn by a distribution, in place.

Each function takes a tensord Tensor (a Parameter; its values are replaced with one `assign`
under no_grad, so its identity, dtype and device stay) or a numpy array (filled in place: how
the layers draw their initial weights before uploading them). The random values come from the
numpy generator of tensord.defaults (seed it with tensord.manual_seed), drawn in float64 and
rounded to the tensor's dtype: the same distributions as torch.nn.init, not the same values.
"""
from __future__ import annotations

import math

import numpy as np

from .. import defaults
from ..autograd import hints
from ..tensor import Tensor


def _shape(tensor) -> tuple:
    return tuple(tensor.shape)


def _fill(tensor, values):
    values = np.broadcast_to(np.asarray(values, np.float64), _shape(tensor))
    if isinstance(tensor, np.ndarray):
        tensor[...] = values
        return tensor
    if not isinstance(tensor, Tensor):
        raise TypeError(f"tensord.nn.init: expected a tensord Tensor or a numpy array, got "
                        f"{type(tensor).__name__}")
    sess = tensor.session
    with hints(), sess.no_grad():
        sess.op("assign", tensor, np.ascontiguousarray(values))
    return tensor


def _rng(generator):
    return generator if generator is not None else defaults.generator()


def calculate_gain(nonlinearity: str, param=None) -> float:
    """The recommended gain of a nonlinearity (torch.nn.init.calculate_gain)."""
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1.0
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif isinstance(param, (int, float)) and not isinstance(param, bool):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor) -> tuple:
    shape = _shape(tensor)
    if len(shape) < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than 2 "
                         "dimensions")
    receptive = int(np.prod(shape[2:], dtype=np.int64)) if len(shape) > 2 else 1
    return shape[1] * receptive, shape[0] * receptive


def _calculate_correct_fan(tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of fan_in, fan_out")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor, a: float = 0.0, b: float = 1.0, generator=None):
    return _fill(tensor, _rng(generator).uniform(a, b, _shape(tensor)))


def normal_(tensor, mean: float = 0.0, std: float = 1.0, generator=None):
    return _fill(tensor, _rng(generator).normal(mean, std, _shape(tensor)))


def constant_(tensor, val: float):
    return _fill(tensor, val)


def ones_(tensor):
    return _fill(tensor, 1.0)


def zeros_(tensor):
    return _fill(tensor, 0.0)


def xavier_uniform_(tensor, gain: float = 1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor, gain: float = 1.0, generator=None):
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def kaiming_uniform_(tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None):
    if 0 in _shape(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None):
    if 0 in _shape(tensor):
        return tensor
    std = calculate_gain(nonlinearity, a) / math.sqrt(_calculate_correct_fan(tensor, mode))
    return normal_(tensor, 0.0, std, generator)


def fan_in_uniform_(tensor, fan_in: int, generator=None):
    """uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)): PyTorch's default bias of Linear and Conv
    (0 when fan_in is 0)."""
    bound = 1.0 / math.sqrt(fan_in) if fan_in > 0 else 0.0
    return uniform_(tensor, -bound, bound, generator)


__all__ = ["calculate_gain", "uniform_", "normal_", "constant_", "ones_", "zeros_",
           "xavier_uniform_", "xavier_normal_", "kaiming_uniform_", "kaiming_normal_",
           "fan_in_uniform_"]
