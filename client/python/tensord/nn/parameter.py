"""Parameter: a tensor a Module registers as a parameter (torch.nn.Parameter), and how layers
make theirs."""
from __future__ import annotations

import numpy as np

from .. import defaults, dtypes
from ..autograd import hints
from ..tensor import Tensor


def as_array(value, dtype=None) -> np.ndarray:
    """A numpy array of `value`: numpy arrays and numbers, torch tensors (detached, on the CPU;
    bfloat16 ones as float32) or tensord Tensors (downloaded)."""
    if isinstance(value, Tensor):
        array = value.numpy()
    elif type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach"):
        t = value.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            t = t.float()
        array = t.numpy()
    else:
        array = np.asarray(value)
    return array if dtype is None else array.astype(dtypes.to_numpy_dtype(dtype), copy=False)


class Parameter(Tensor):
    """torch.nn.Parameter: a requires-grad leaf of the session's autodiff context
    (`sess.grad_context()`: the most recently opened open context, else one the session opens)
    that a Module registers when it is assigned as an attribute.

    `data` is a numpy array (or anything np.asarray takes), a torch tensor (its values are
    copied) or a tensord Tensor (the parameter shares its storage, as torch.nn.Parameter does).
    Without a Tensor, the session is `session=` or the default one (tensord.set_session). In a
    session created with autodiff=False every parameter is a plain tensor (inference only).
    """

    def __init__(self, data=None, requires_grad: bool = True, *, session=None, dtype=None,
                 device=None):
        if isinstance(data, Tensor):
            sess = data.session
        else:
            sess = session or defaults.get_session(required=True, what="tensord.nn.Parameter")
        super().__init__(sess)
        grad = bool(requires_grad) and sess.autodiff_enabled
        with hints():
            ctx = sess.grad_context() if grad else None
            if isinstance(data, Tensor):
                to_dtype = dtypes.name(dtype) if dtype is not None else None
                with sess.no_grad():
                    source = _converted(sess, data, None if to_dtype == dtypes.name(data.dtype)
                                        else to_dtype, None if device == data.device else device)
                new = sess.op("detach", source, requires_grad=grad, ctx=ctx)
            else:
                # A torch tensor travels as it is (its dtype, bf16 included); others as numpy.
                array = np.zeros((0,), np.float32) if data is None else \
                    data if dtypes.is_torch_tensor(data) else as_array(data)
                new = sess.tensor(array, requires_grad=grad, ctx=ctx, device=device,
                                  dtype=dtype)
        self._take_handle(new)

    @classmethod
    def _adopt(cls, tensor: Tensor) -> "Parameter":
        """A Parameter that takes over `tensor`'s server tensor (a fresh result nobody else
        holds, e.g. of a batch): no round trip, unlike Parameter(tensor)."""
        param = cls.__new__(cls)
        Tensor.__init__(param, tensor.session)
        param._take_handle(tensor)
        return param

    def __repr__(self):
        return "tensord.nn.Parameter" + super().__repr__()[len("tensord.Tensor"):]

    def __reduce_ex__(self, protocol):
        raise TypeError("tensord: a Parameter names a tensor of a server session and cannot be "
                        "pickled or deep-copied; save model.state_dict() (numpy arrays) instead")


class Factory:
    """Where a layer makes its parameters and buffers: the session (session= or the default),
    device and dtype (PyTorch's factory_kwargs; dtype defaults to float32)."""

    def __init__(self, session=None, device=None, dtype=None, what: str = "this module"):
        self.session = session or defaults.get_session(required=True, what=what)
        self.device = str(device) if device is not None else None
        self.dtype = dtypes.name(dtype) if dtype is not None else "f32"

    def parameter(self, array, requires_grad: bool = True) -> Parameter:
        return Parameter(np.asarray(array), requires_grad, session=self.session,
                         dtype=self.dtype, device=self.device)

    def register(self, module, **values) -> None:
        """Makes each array of `values` a parameter of `module` under its name; None registers
        the name without a parameter, as PyTorch's bias=False does."""
        for name, array in values.items():
            if array is None:
                module.register_parameter(name, None)
            else:
                setattr(module, name, self.parameter(array))

    def buffer(self, array, dtype=None) -> Tensor:
        return self.session.tensor(np.asarray(array), dtype=dtype or self.dtype,
                                   device=self.device)


def _floating(t: Tensor) -> bool:
    return dtypes.is_bfloat16(t.dtype) or np.dtype(t.dtype).kind == "f"


def convert_module(module, dtype=None, device=None) -> None:
    """Module.to: the floating point parameters and buffers of every submodule to `dtype`, all
    of them to `device`, in one no_grad batch per session; each Tensor object then names its
    converted tensor (a Parameter stays a requires-grad leaf), and gradients follow."""
    name = dtypes.name(dtype) if dtype is not None else None
    by_session = {}
    for _, sub in module.named_modules():
        for holder in (sub._parameters, sub._buffers):
            for t in holder.values():
                if isinstance(t, Tensor):
                    by_session.setdefault(t.session, {})[id(t)] = t
    for sess, tensors in by_session.items():
        ctx = sess.grad_context() if sess.autodiff_enabled else None
        done = []
        with hints(), sess.no_grad(), sess.batch():
            for t in tensors.values():
                to_dtype = name if name and _floating(t) and name != dtypes.name(t.dtype) \
                    else None
                to_device = device if device and device != t.device else None
                if to_dtype is None and to_device is None:
                    continue
                x = _converted(sess, t, to_dtype, to_device)
                if t.requires_grad:
                    x = sess.op("detach", x, requires_grad=True, ctx=ctx)
                grad = _converted(sess, t.grad, to_dtype, to_device) \
                    if t.grad is not None else None
                done.append((t, x, grad))
        for t, x, grad in done:
            t._take_handle(x)
            t.grad = grad


def _converted(sess, t, to_dtype, to_device):
    """t's value as `to_dtype` on `to_device` (None: unchanged), a plain tensor: detach comes
    first, as it is always allowed, also for a tensor of a closed context."""
    x = sess.op("detach", t)
    if to_dtype is not None:
        x = sess.op("to_dtype", x, dtype=to_dtype)
    if to_device is not None:
        x = sess.op("to_device", x, device=to_device)
    return x


__all__ = ["Parameter", "Factory", "as_array", "convert_module"]
