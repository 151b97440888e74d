"""Activation modules (torch.nn's ReLU, GELU, Tanh, Sigmoid, SiLU, LeakyReLU, Softmax, ...).
`inplace=True` is accepted and ignored: the result is a new tensor."""
from __future__ import annotations

from . import functional as F
from .module import Module


class _Plain(Module):
    """An activation without arguments: forward is one op."""

    _fn = None

    def __init__(self, inplace: bool = False):
        super().__init__()
        self.inplace = inplace

    def forward(self, input):
        return type(self)._fn(input)


class ReLU(_Plain):
    _fn = staticmethod(F.relu)


class ReLU6(_Plain):
    _fn = staticmethod(F.relu6)


class SELU(_Plain):
    _fn = staticmethod(F.selu)


class SiLU(_Plain):
    _fn = staticmethod(F.silu)


class Mish(_Plain):
    _fn = staticmethod(F.mish)


class Hardsigmoid(_Plain):
    _fn = staticmethod(F.hardsigmoid)


class Hardswish(_Plain):
    _fn = staticmethod(F.hardswish)


class Tanh(_Plain):
    _fn = staticmethod(F.tanh)


class Sigmoid(_Plain):
    _fn = staticmethod(F.sigmoid)


class Softsign(_Plain):
    _fn = staticmethod(F.softsign)


class LogSigmoid(_Plain):
    _fn = staticmethod(F.logsigmoid)


class GELU(Module):
    def __init__(self, approximate: str = "none"):
        super().__init__()
        self.approximate = approximate

    def forward(self, input):
        return F.gelu(input, approximate=self.approximate)

    def extra_repr(self) -> str:
        return f"approximate={self.approximate!r}"


class LeakyReLU(Module):
    def __init__(self, negative_slope: float = 1e-2, inplace: bool = False):
        super().__init__()
        self.negative_slope, self.inplace = negative_slope, inplace

    def forward(self, input):
        return F.leaky_relu(input, self.negative_slope)

    def extra_repr(self) -> str:
        return f"negative_slope={self.negative_slope}"


class ELU(Module):
    def __init__(self, alpha: float = 1.0, inplace: bool = False):
        super().__init__()
        self.alpha, self.inplace = alpha, inplace

    def forward(self, input):
        return F.elu(input, self.alpha)

    def extra_repr(self) -> str:
        return f"alpha={self.alpha}"


class Softplus(Module):
    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        super().__init__()
        self.beta, self.threshold = beta, threshold

    def forward(self, input):
        return F.softplus(input, self.beta, self.threshold)

    def extra_repr(self) -> str:
        return f"beta={self.beta}, threshold={self.threshold}"


class Hardtanh(Module):
    def __init__(self, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False):
        super().__init__()
        self.min_val, self.max_val, self.inplace = min_val, max_val, inplace

    def forward(self, input):
        return F.hardtanh(input, self.min_val, self.max_val)

    def extra_repr(self) -> str:
        return f"min_val={self.min_val}, max_val={self.max_val}"


class _SoftmaxBase(Module):
    """dim=None picks PyTorch's legacy dim (0 for 0-, 1- and 3-d inputs, else 1), which needs
    the input's shape: give dim inside `sess.batch()`."""

    _fn = None

    def __init__(self, dim=None):
        super().__init__()
        self.dim = dim

    def forward(self, input):
        return type(self)._fn(input, self.dim)

    def extra_repr(self) -> str:
        return f"dim={self.dim}"


class Softmax(_SoftmaxBase):
    _fn = staticmethod(F.softmax)


class LogSoftmax(_SoftmaxBase):
    _fn = staticmethod(F.log_softmax)


class Softmin(_SoftmaxBase):
    _fn = staticmethod(F.softmin)
