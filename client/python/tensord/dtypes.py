"""dtype mapping between numpy, tensord's wire enum and attribute strings."""
from __future__ import annotations

import numpy as np

from ._pb import tensor_pb2

# tensord short name, numpy dtype, wire enum
_TABLE = [
    ("f32", np.dtype(np.float32), tensor_pb2.DTYPE_F32),
    ("f64", np.dtype(np.float64), tensor_pb2.DTYPE_F64),
    ("i32", np.dtype(np.int32), tensor_pb2.DTYPE_I32),
    ("i64", np.dtype(np.int64), tensor_pb2.DTYPE_I64),
    ("bool", np.dtype(np.bool_), tensor_pb2.DTYPE_BOOL),
]
_BY_NAME = {name: np_dt for name, np_dt, _ in _TABLE}
_ALIASES = {"float32": "f32", "float": "f32", "float64": "f64", "double": "f64",
            "int32": "i32", "int": "i32", "int64": "i64", "long": "i64", "bool_": "bool"}
_NP_TO_NAME = {np_dt: name for name, np_dt, _ in _TABLE}
_NP_TO_WIRE = {np_dt: wire for _, np_dt, wire in _TABLE}
_WIRE_TO_NP = {wire: np_dt for _, np_dt, wire in _TABLE}

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)
SUPPORTED = tuple(np_dt for _, np_dt, _ in _TABLE)


def to_numpy_dtype(dtype) -> np.dtype:
    """Accepts a numpy dtype or type, a tensord name ("f32"), a numpy/torch-style name
    ("float32", "int64", "bool") or a wire enum value; returns the numpy dtype."""
    if isinstance(dtype, str):
        name = dtype.lower()
        name = name[len("torch."):] if name.startswith("torch.") else name
        name = _ALIASES.get(name, name)
        if name in _BY_NAME:
            return _BY_NAME[name]
        raise TypeError(f"tensord: unknown dtype {dtype!r}; expected one of "
                        f"{', '.join(_BY_NAME)}")
    if isinstance(dtype, int) and not isinstance(dtype, bool) and dtype in _WIRE_TO_NP:
        return _WIRE_TO_NP[dtype]
    if dtype is bool:
        return bool_
    if dtype is float:
        return float64
    try:
        np_dt = np.dtype(dtype)
    except TypeError:
        np_dt = None
    if np_dt is not None and np_dt.newbyteorder("=") in _NP_TO_NAME:
        return np_dt.newbyteorder("=")
    # torch.dtype and similar objects print as "torch.float32".
    text = str(dtype)
    if text.startswith("torch."):
        return to_numpy_dtype(text)
    raise TypeError(f"tensord: unsupported dtype {dtype!r}; tensord has float32, float64, "
                    "int32, int64 and bool")


def name(dtype) -> str:
    """The tensord attribute name of a dtype: "f32", "f64", "i32", "i64", "bool"."""
    return _NP_TO_NAME[to_numpy_dtype(dtype)]


def to_wire(dtype) -> int:
    return _NP_TO_WIRE[to_numpy_dtype(dtype)]


def from_wire(wire: int) -> np.dtype:
    try:
        return _WIRE_TO_NP[wire]
    except KeyError:
        raise ValueError(f"tensord: the server sent an unknown dtype enum value {wire}") from None


def array_to_tensor_data(array: np.ndarray) -> "tensor_pb2.TensorData":
    array = as_wire_array(array)
    return tensor_pb2.TensorData(dtype=to_wire(array.dtype), shape=list(array.shape),
                                 data=array.tobytes())


def as_wire_array(value) -> np.ndarray:
    """A contiguous little-endian array of a supported dtype (raises TypeError otherwise)."""
    array = np.asarray(value)
    dt = to_numpy_dtype(array.dtype)
    wire_dt = dt.newbyteorder("<")
    if array.dtype != wire_dt:
        array = array.astype(wire_dt)
    # (np.ascontiguousarray would turn a 0-d array into a 1-d one)
    return array if array.flags.c_contiguous else array.copy(order="C")


def tensor_data_to_array(data: "tensor_pb2.TensorData") -> np.ndarray:
    return bytes_to_array(data.data, data.dtype, data.shape)


def bytes_to_array(raw, wire_dtype: int, shape) -> np.ndarray:
    dt = from_wire(wire_dtype).newbyteorder("<")
    shape = tuple(int(s) for s in shape)
    expected = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if len(raw) != expected:
        raise ValueError(f"tensord: received {len(raw)} bytes for a {dt} tensor of shape "
                         f"{shape} ({expected} expected)")
    buf = raw if isinstance(raw, bytearray) else bytearray(raw)
    return np.frombuffer(buf, dtype=dt).reshape(shape).astype(dt.newbyteorder("="), copy=False)
