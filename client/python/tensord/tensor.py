"""Tensor: a handle to a tensor stored in a tensord session, with numpy-style sugar."""
from __future__ import annotations

import contextlib

import numpy as np

from . import dtypes
from .errors import BatchPendingError, client_error
from .indexing import index


class Tensor:
    """A tensor living in a session on the server.

    Created by `Session.tensor` (upload) and by ops. Inside `with sess.batch():` ops return
    *lazy* tensors that name an output of a call in the pending batch; they become ordinary
    tensors when the batch is sent. The server-side handle is released when the object is
    garbage-collected (queued and sent in batches) or by `release()`.

    Comparison operators <, <=, >, >= map to the lt/le/gt/ge ops; == and != keep Python's
    identity semantics so tensors can be dictionary keys (e.g. gradients); use the "eq"/"ne" ops.
    """

    # numpy defers binary operators with a Tensor to the Tensor's reflected methods.
    __array_ufunc__ = None
    # The gradient Tensor.backward accumulated (torch.Tensor.grad); None until a backward
    # reaches this tensor as a requires-grad leaf, and after zero_grad().
    _grad = None
    # The value Session.op(fetch=True) received with the call: (handle, the session's write
    # count it is current under, raw bytes, wire dtype, shape); see _fetched_value.
    _value = None

    @property
    def grad(self):
        """The accumulated gradient (torch.Tensor.grad), or None. While tensord.compile traces
        a step, reads and writes go to the trace (the gradient stand-ins of its backward) and
        leave the value here alone."""
        view = getattr(getattr(self._session, "_batch", None), "grad_view", None)
        if view is not None:
            return view.get(self, self._grad)
        return self._grad

    @grad.setter
    def grad(self, value) -> None:
        view = getattr(getattr(self._session, "_batch", None), "grad_view", None)
        if view is not None:
            view.set(self, value)
        else:
            self._grad = value

    def __init__(self, session, info=None, lazy=None):
        self._session = session
        self._info = info  # tensor_pb2.TensorInfo once the tensor exists on the server
        self._lazy = lazy  # (batch, call index, output index) while pending
        self._released = False

    # -- state ---------------------------------------------------------------------------------
    def _resolve(self, info) -> None:
        self._info = info
        self._lazy = None
        self._session._register(self)

    def _require_info(self, where: dict | None = None):
        """The TensorInfo, or the error the server would answer for this tensor; `where`
        (call_index, input_index, op, root_index, ...) says where it was used."""
        where = where or {}
        if self._info is None:
            if self._lazy is None:
                raise client_error("INTERNAL", "tensord: tensor has no server-side handle")
            batch, call, output = self._lazy
            pending = {"operand_call": call, "operand_output": output, **where}
            if batch.state == "failed":
                raise client_error(
                    "BAD_OPERAND", "tensord: this tensor is an output of a batch that failed or "
                    "was abandoned; it does not exist on the server", pending)
            if batch.state == "done":
                raise client_error(
                    "BAD_OPERAND", f"tensord: the batch produced no output {output} for call "
                    f"{call}", pending)
            if batch.forward:  # a module call's: sent now, and this tensor resolved
                from .batch import send_forward
                send_forward(batch)
                return self._require_info(where)
            raise client_error(
                "BAD_OPERAND", "tensord: this tensor is an output of a `with sess.batch():` "
                "block that has not been sent yet; its value, shape and dtype exist once the "
                "block ends", pending, cls=BatchPendingError)
        if self._released:
            raise client_error(
                "TENSOR_NOT_FOUND", f"tensord: tensor {self._info.handle} was released",
                {"tensor_id": self._info.handle, **where})
        return self._info

    @property
    def is_lazy(self) -> bool:
        """True while this is an output of a batch that has not been sent."""
        return self._info is None

    @property
    def _sendable(self) -> bool:
        """A pending output of a module call's forward batch: reading its shape sends it."""
        return self._info is None and self._lazy is not None and \
            getattr(self._lazy[0], "forward", False) and self._lazy[0].state == "open"

    @property
    def session(self):
        return self._session

    @property
    def info(self):
        """The server's TensorInfo message."""
        return self._require_info()

    @property
    def handle(self) -> int:
        return self._require_info().handle

    @property
    def shape(self) -> tuple:
        return tuple(int(s) for s in self._require_info().shape)

    @property
    def dtype(self) -> np.dtype:
        return dtypes.from_wire(self._require_info().dtype)

    @property
    def device(self) -> str:
        return self._require_info().device

    @property
    def requires_grad(self) -> bool:
        return self._require_info().requires_grad

    @requires_grad.setter
    def requires_grad(self, value: bool) -> None:
        # `p.requires_grad = False` freezes a parameter, as in PyTorch.
        self.requires_grad_(value)

    @property
    def context_id(self) -> int:
        return self._require_info().context_id

    @property
    def is_leaf(self) -> bool:
        return self._require_info().is_leaf

    @property
    def nbytes(self) -> int:
        return self._require_info().nbytes

    @property
    def ndim(self) -> int:
        return len(self._require_info().shape)

    @property
    def size(self) -> int:
        """Number of elements (as numpy's ndarray.size)."""
        return int(np.prod(self.shape, dtype=np.int64))

    def numel(self) -> int:
        return self.size

    # -- data ----------------------------------------------------------------------------------
    def _fetched_value(self, info, bf16_bits: bool = False):
        """A new array of the value fetched with the op that made this tensor
        (Session.op(fetch=True)), or None. It is dropped, for good, once this object names
        another handle or the session may have written a tensor since (Session._writes moved:
        an in-place op, an optimizer step, a program run; see Session.op)."""
        from .batch import settle_writes
        settle_writes(self._session)  # a pending write of a module call goes first
        value = self._value
        if value is None:
            return None
        handle, stamp, raw, wire, shape = value
        if handle != info.handle or stamp != self._session._writes:
            self._value = None
            return None
        self._session._check_open()
        return dtypes.bytes_to_array(raw, wire, shape, bf16_bits)

    def numpy(self) -> np.ndarray:
        """The value (a new, writable numpy array): downloaded, or the value fetched with the
        op that made it (Session.op(fetch=True)) while no write can have changed it."""
        info = self._require_info()
        array = self._fetched_value(info)
        if array is not None:
            return array
        return self._session._download(info.handle)

    def torch(self):
        """The value as a new torch.Tensor (CPU, not requiring grad) of the same dtype, bf16
        included: torch.from_numpy over the downloaded (or fetched) buffer, no further copy."""
        import torch
        info = self._require_info()
        array = self._fetched_value(info, bf16_bits=True)
        if array is None:
            array = self._session._download(info.handle, bf16_bits=True)
        if dtypes.is_bfloat16(dtypes.from_wire(info.dtype)):
            return torch.from_numpy(array.view(np.int16)).view(torch.bfloat16)
        return torch.from_numpy(array)

    def __array__(self, dtype=None):
        arr = self.numpy()
        return arr if dtype is None else arr.astype(dtype)

    def item(self):
        arr = self.numpy()
        if arr.size != 1:
            raise ValueError(f"tensord: item() needs a one-element tensor, shape is {arr.shape}")
        return arr.reshape(()).item()

    def tolist(self):
        return self.numpy().tolist()

    def __float__(self):
        return float(self.item())

    def __int__(self):
        return int(self.item())

    def __bool__(self):
        return bool(self.item())

    def _take_handle(self, other: "Tensor") -> None:
        """Makes this object own `other`'s server tensor (a fresh temporary, which then owns
        nothing) and releases its own: an in-place change of what a Python object names, so
        that dictionaries keyed by it (optimizer state, gradients) stay valid."""
        info = other._require_info()
        old = self._info if self._info is not None and not self._released else None
        self._session, self._info, self._lazy, self._released = other._session, info, None, False
        other._info, other._lazy = None, None
        self._session._register(self)
        if old is not None and old.handle != info.handle:
            self._session._queue_release(old.handle, old.nbytes)

    # -- autograd (tensord.autograd) -------------------------------------------------------
    def backward(self, gradient=None, retain_graph=None, create_graph: bool = False,
                 inputs=None) -> None:
        """torch.Tensor.backward: adds the gradient of this tensor (a scalar, or seeded
        with `gradient`) to the `.grad` of every requires-grad leaf it depends on."""
        from . import autograd
        autograd.backward(self, gradient, retain_graph, create_graph, inputs)

    def requires_grad_(self, requires_grad: bool = True) -> "Tensor":
        """torch.Tensor.requires_grad_, in place: True makes this tensor a requires-grad leaf
        of the session's open autodiff context (sess.grad_context()), also when it was one of
        a context that is closed since; False makes a leaf a plain tensor. The object keeps
        its identity and value and names a new server tensor sharing the storage."""
        from . import autograd
        sess = self._session
        info = self._require_info()
        from .batch import open_block
        if open_block(sess) is not None:
            raise client_error("INVALID_REQUEST", "tensord: requires_grad_() cannot run inside "
                               "sess.batch() or a traced function; call it before the block",
                               {"tensor_id": info.handle})
        if requires_grad:
            if info.requires_grad and any(c.id == info.context_id for c in sess._contexts):
                return self
            if not (dtypes.is_bfloat16(self.dtype) or np.dtype(self.dtype).kind == "f"):
                raise RuntimeError("tensord: only tensors of a floating point dtype can require "
                                   f"gradients, not {dtypes.name(self.dtype)}")
            with autograd.hints():
                new = sess.op("detach", self, requires_grad=True, ctx=sess.grad_context())
        else:
            if not info.requires_grad:
                return self
            if not info.is_leaf:
                raise RuntimeError("tensord: you can only change requires_grad flags of leaf "
                                   "tensors; use t.detach() for a value outside the graph")
            new = sess.op("detach", self)
        self._take_handle(new)
        return self

    def release(self) -> None:
        """Frees the server-side tensor now (idempotent). Refused with tensord.InvalidRequest
        while the open batch names it as an operand (release it after the block), and with
        BatchPendingError for an output of a batch that is not sent yet."""
        if self._info is None and self._lazy is not None and self._lazy[0].state == "open":
            self._require_info()  # sends a forward batch, else raises BatchPendingError
        if self._info is None:
            return  # an output of a failed batch: nothing to free
        if not self._released:
            self._session.release(self)

    def __del__(self):
        # Never raise from a finalizer (it may run during interpreter shutdown).
        try:
            if self._info is not None and not self._released:
                self._released = True
                self._session._queue_release(self._info.handle, self._info.nbytes)
        except Exception:
            pass

    def __repr__(self) -> str:
        if self._sendable:  # a module call's pending output: sent, to show what it is
            with contextlib.suppress(Exception):
                self._require_info()
        if self._info is None:
            if self._lazy is not None:
                return f"tensord.Tensor(<pending call {self._lazy[1]} output {self._lazy[2]}>)"
            return "tensord.Tensor(<invalid>)"
        i = self._info
        extra = f", requires_grad=True, context_id={i.context_id}" if i.requires_grad else ""
        rel = ", released" if self._released else ""
        return (f"tensord.Tensor(handle={i.handle}, shape={tuple(i.shape)}, "
                f"dtype={dtypes.name(dtypes.from_wire(i.dtype))}, device={i.device!r}{extra}{rel})")

    # -- ops -----------------------------------------------------------------------------------
    def _op(self, name, *operands, **attrs):
        return self._session.op(name, *operands, **attrs)

    def __getattr__(self, name):
        # t.relu(), t.sum(dim=1), ... for every op of the server's catalog.
        if name.startswith("_"):
            raise AttributeError(name)
        session = self.__dict__.get("_session")
        if session is not None and name in session.client.op_names():
            def bound(*operands, **attrs):
                return session.op(name, self, *operands, **attrs)
            bound.__name__ = name
            return bound
        raise AttributeError(f"'Tensor' object has no attribute {name!r} (and the server has "
                             f"no op of that name)")

    def __add__(self, other):
        return self._op("add", self, other)

    def __radd__(self, other):
        return self._op("add", other, self)

    def __sub__(self, other):
        return self._op("sub", self, other)

    def __rsub__(self, other):
        return self._op("sub", other, self)

    def __mul__(self, other):
        return self._op("mul", self, other)

    def __rmul__(self, other):
        return self._op("mul", other, self)

    def __truediv__(self, other):
        return self._op("div", self, other)

    def __rtruediv__(self, other):
        return self._op("div", other, self)

    def __floordiv__(self, other):
        return self._op("div", self, other, rounding_mode="floor")

    def __rfloordiv__(self, other):
        return self._op("div", other, self, rounding_mode="floor")

    def __mod__(self, other):
        return self._op("remainder", self, other)

    def __rmod__(self, other):
        return self._op("remainder", other, self)

    def __pow__(self, other):
        return self._op("pow", self, other)

    def __rpow__(self, other):
        return self._op("pow", other, self)

    def __matmul__(self, other):
        return self._op("matmul", self, other)

    def __rmatmul__(self, other):
        return self._op("matmul", other, self)

    def __neg__(self):
        return self._op("neg", self)

    def __pos__(self):
        return self

    def __abs__(self):
        return self._op("abs", self)

    def __lt__(self, other):
        return self._op("lt", self, other)

    def __le__(self, other):
        return self._op("le", self, other)

    def __gt__(self, other):
        return self._op("gt", self, other)

    def __ge__(self, other):
        return self._op("ge", self, other)

    def _is_bool(self) -> bool:
        return self._info is not None and self._info.dtype == dtypes.to_wire(np.bool_)

    def __and__(self, other):
        return self._op("logical_and" if self._is_bool() else "bitwise_and", self, other)

    def __rand__(self, other):
        return self._op("logical_and" if self._is_bool() else "bitwise_and", other, self)

    def __or__(self, other):
        return self._op("logical_or" if self._is_bool() else "bitwise_or", self, other)

    def __ror__(self, other):
        return self._op("logical_or" if self._is_bool() else "bitwise_or", other, self)

    def __xor__(self, other):
        return self._op("logical_xor" if self._is_bool() else "bitwise_xor", self, other)

    def __rxor__(self, other):
        return self._op("logical_xor" if self._is_bool() else "bitwise_xor", other, self)

    def __invert__(self):
        return self._op("logical_not" if self._is_bool() else "bitwise_not", self)

    # Identity semantics (see class doc).
    __eq__ = object.__eq__
    __ne__ = object.__ne__
    __hash__ = object.__hash__

    @property
    def T(self):
        if self.ndim != 2:
            raise ValueError(f"tensord: .T needs a 2-d tensor, shape is {self.shape}")
        return self._op("transpose", self, dim0=0, dim1=1)

    def detach(self):
        return self._op("detach", self)

    def to(self, dtype):
        return self._op("to_dtype", self, dtype=dtypes.name(dtype))

    def astype(self, dtype):
        return self.to(dtype)

    def reshape(self, *shape):
        if len(shape) == 1 and isinstance(shape[0], (tuple, list)):
            shape = tuple(shape[0])
        return self._op("reshape", self, shape=[int(s) for s in shape])

    view = reshape  # torch's name (a reshape: tensord has no views)

    def __len__(self):
        shape = self.shape
        if not shape:
            raise TypeError("tensord: len() of a 0-d tensor")
        return shape[0]

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]

    def __setitem__(self, key, value):
        raise TypeError("tensord: tensors are immutable; write with sess.op('assign', target, "
                        "value) (inside sess.no_grad() for autodiff tensors)")

    def __getitem__(self, key):
        return index(self, key)
