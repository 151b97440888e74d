"""What the client knows of an op call before the server answers it: how many outputs it
has (tuple ops, return_indices), how an attribute travels (AttrValue), and which ops write into
tensors they are given (WRITING_OPS)."""
from __future__ import annotations

import math

import numpy as np

from . import dtypes
from ._pb import ops_pb2
from .tensor import Tensor

# Ops whose result is always a tuple.
_TUPLE_OPS = {"split", "chunk", "unbind", "sort", "topk"}
# Ops that write into tensors they are given instead of (or besides) computing new ones: the
# server's OpDefs with in_place or mutates_inputs (assign, the optimizer steps, batch_norm's
# running statistics). Plugin kernels only read their inputs (include/tensord/plugin.h).
# An Execute naming one of these counts as a write (Session._writes), which drops every value
# that Session.op(fetch=True) kept.
WRITING_OPS = frozenset({"assign", "sgd", "adam", "adamw", "batch_norm"})
# Calls other than Execute that count as writes: a program's updates run at RunProgram;
# CompileProgram and Backward write nothing a client can see but are counted to be safe.
_WRITING_METHODS = frozenset({"RunProgram", "CompileProgram", "Backward"})


# Ops that return (values, indices) when called with return_indices=True, as in PyTorch.
_INDICES_OPS = {"max_pool1d", "max_pool2d", "adaptive_max_pool2d"}
# Ops whose output_size may hold None (keep that dim's input size); the wire says -1.
_KEEP_SIZE_OPS = {"adaptive_avg_pool2d", "adaptive_max_pool2d"}


def _returns_tuple(name: str, attrs: dict) -> bool:
    return (name in _TUPLE_OPS or (name in ("max", "min") and attrs.get("dim") is not None) or
            (name in _INDICES_OPS and bool(attrs.get("return_indices"))) or
            (name == "nonzero" and bool(attrs.get("as_tuple"))))


def _dim_size(operand, dim):
    """Size of `dim` of an operand whose shape is known here, else None."""
    if isinstance(operand, Tensor):
        if operand.is_lazy:
            return None
        shape = operand.shape
    else:
        shape = np.shape(operand)
    if not shape:
        return None
    return shape[dim]


def _guess_outputs(name: str, operands, attrs: dict):
    """Output count of a call inside a batch, where the server has not answered yet."""
    if name == "barrier":
        return 0
    if name in ("max", "min"):
        return 2 if attrs.get("dim") is not None else 1
    if name in ("sort", "topk"):
        return 2
    if name in _INDICES_OPS:
        return 2 if attrs.get("return_indices") else 1
    if name == "nonzero" and attrs.get("as_tuple"):
        # One index tensor per dim of the input (one for a 0-d input).
        if not operands or (isinstance(operands[0], Tensor) and operands[0].is_lazy):
            return None
        shape = operands[0].shape if isinstance(operands[0], Tensor) else np.shape(operands[0])
        return max(len(shape), 1)
    if name == "split":
        sections = attrs.get("split_size", attrs.get("split_size_or_sections"))
        if isinstance(sections, (list, tuple)):
            return len(sections)  # one output per section, whatever the input's size
    if name in ("split", "chunk", "unbind") and operands:
        dim = int(attrs.get("dim", 0))
        n = _dim_size(operands[0], dim)
        if n is not None:
            if name == "unbind":
                return n
            if name == "split":
                size = attrs.get("split_size", attrs.get("split_size_or_sections"))
                if isinstance(size, int) and size > 0:
                    return max(1, math.ceil(n / size))
            if name == "chunk":
                chunks = int(attrs.get("chunks", 0))
                if chunks > 0:
                    each = math.ceil(n / chunks)
                    return max(1, math.ceil(n / each)) if each else 1
        return None
    return 1


def attr_to_proto(name: str, value, attr_type: str | None = None) -> ops_pb2.AttrValue:
    """Python value -> AttrValue: bool b, int i, float f, str s, dtype s ("f32"), lists ints or
    floats. `attr_type` (from ListOps) coerces where Python's type is ambiguous: a bool or int
    for a "float" attribute (full(value=True) of a bool tensor), a numpy dtype for "dtype"."""
    if attr_type == "float" and isinstance(value, (bool, int, np.bool_, np.integer)):
        return ops_pb2.AttrValue(f=float(value))
    if attr_type == "floats" and isinstance(value, (list, tuple)):
        return ops_pb2.AttrValue(floats=ops_pb2.FloatList(values=[float(v) for v in value]))
    if attr_type == "dtype" and not isinstance(value, str):
        return ops_pb2.AttrValue(s=dtypes.name(value))
    if isinstance(value, (bool, np.bool_)):
        return ops_pb2.AttrValue(b=bool(value))
    if isinstance(value, (int, np.integer)):
        return ops_pb2.AttrValue(i=int(value))
    if isinstance(value, (float, np.floating)):
        return ops_pb2.AttrValue(f=float(value))
    if isinstance(value, str):
        return ops_pb2.AttrValue(s=value)
    if isinstance(value, (list, tuple, np.ndarray)):
        items = list(np.asarray(value).reshape(-1).tolist()) if isinstance(value, np.ndarray) \
            else list(value)
        if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in items):
            return ops_pb2.AttrValue(ints=ops_pb2.IntList(values=[int(v) for v in items]))
        if all(isinstance(v, (int, float, np.integer, np.floating)) for v in items):
            return ops_pb2.AttrValue(floats=ops_pb2.FloatList(values=[float(v) for v in items]))
        raise TypeError(f"tensord: attribute {name!r}: a list must hold numbers, got {value!r}")
    try:
        return ops_pb2.AttrValue(s=dtypes.name(value))
    except TypeError:
        pass
    raise TypeError(f"tensord: attribute {name!r} has an unsupported type "
                    f"{type(value).__name__}")
