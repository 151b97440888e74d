"""dtype mapping between numpy, tensord's wire enum and attribute strings.

bf16 has no numpy dtype. `bfloat16` below stands for it (a bf16 tensor's `.dtype`; it compares
equal to "bf16", "bfloat16" and torch.bfloat16); its values download as float32 (exactly: every
bf16 value is a float32) and upload from any float array with `dtype="bf16"`, rounded to
nearest even as the server and PyTorch round. f16 is numpy's float16 both ways, and the narrow
integers u8 / i8 / i16 are numpy's uint8 / int8 / int16 (torch.uint8 / int8 / int16) both ways."""
from __future__ import annotations

import numpy as np

from ._pb import tensor_pb2
from .errors import client_error


class BFloat16DType:
    """The bf16 dtype (numpy has none). Arrays of bf16 tensors come back as float32."""

    name = "bfloat16"
    kind = "f"
    itemsize = 2

    def __eq__(self, other):
        if isinstance(other, BFloat16DType):
            return True
        if isinstance(other, str):
            return other.lower() in ("bf16", "bfloat16", "torch.bfloat16")
        return str(other) == "torch.bfloat16"  # torch.bfloat16, without importing torch

    def __ne__(self, other):
        return not self == other

    def __hash__(self):
        return hash("bf16")

    def __str__(self):
        return "bf16"

    def __repr__(self):
        return "tensord.bfloat16"


bfloat16 = BFloat16DType()

# tensord short name, numpy dtype (bfloat16 for bf16), wire enum
_TABLE = [
    ("f32", np.dtype(np.float32), tensor_pb2.DTYPE_F32),
    ("f64", np.dtype(np.float64), tensor_pb2.DTYPE_F64),
    ("i32", np.dtype(np.int32), tensor_pb2.DTYPE_I32),
    ("i64", np.dtype(np.int64), tensor_pb2.DTYPE_I64),
    ("bool", np.dtype(np.bool_), tensor_pb2.DTYPE_BOOL),
    ("bf16", bfloat16, tensor_pb2.DTYPE_BF16),
    ("f16", np.dtype(np.float16), tensor_pb2.DTYPE_F16),
    ("u8", np.dtype(np.uint8), tensor_pb2.DTYPE_U8),
    ("i8", np.dtype(np.int8), tensor_pb2.DTYPE_I8),
    ("i16", np.dtype(np.int16), tensor_pb2.DTYPE_I16),
]
_BY_NAME = {name: np_dt for name, np_dt, _ in _TABLE}
_ALIASES = {"float32": "f32", "float": "f32", "float64": "f64", "double": "f64",
            "int32": "i32", "int": "i32", "int64": "i64", "long": "i64", "bool_": "bool",
            "bfloat16": "bf16", "float16": "f16", "half": "f16", "uint8": "u8", "int8": "i8",
            "int16": "i16", "short": "i16"}
_NP_TO_NAME = {np_dt: name for name, np_dt, _ in _TABLE}
_NP_TO_WIRE = {np_dt: wire for _, np_dt, wire in _TABLE}
_WIRE_TO_NP = {wire: np_dt for _, np_dt, wire in _TABLE}

float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
bool_ = np.dtype(np.bool_)
float16 = np.dtype(np.float16)
uint8 = np.dtype(np.uint8)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
SUPPORTED = tuple(np_dt for _, np_dt, _ in _TABLE)


def to_numpy_dtype(dtype) -> np.dtype:
    """Accepts a numpy dtype or type, a tensord name ("f32", "bf16"), a numpy/torch-style name
    ("float32", "int64", "bool", "bfloat16", "half", "uint8", "short"), a torch dtype
    (torch.bfloat16, torch.uint8) or a wire enum value;
    returns the numpy dtype (`bfloat16` for bf16)."""
    if isinstance(dtype, BFloat16DType):
        return bfloat16
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
    raise TypeError(f"tensord: unsupported dtype {dtype!r}; tensord has {_HAS}")


_HAS = "float32, float64, int32, int64, bool, bfloat16, float16, uint8, int8 and int16"


def is_bfloat16(dtype) -> bool:
    try:
        return to_numpy_dtype(dtype) is bfloat16
    except TypeError:
        return False


def name(dtype) -> str:
    """The tensord attribute name of a dtype: "f32", "f64", "i32", "i64", "bool", "bf16",
    "f16", "u8", "i8", "i16"."""
    return _NP_TO_NAME[to_numpy_dtype(dtype)]


def to_wire(dtype) -> int:
    return _NP_TO_WIRE[to_numpy_dtype(dtype)]


def from_wire(wire: int) -> np.dtype:
    try:
        return _WIRE_TO_NP[wire]
    except KeyError:
        # A dtype of a newer server; a ValueError as it always was.
        raise client_error("DTYPE_MISMATCH", f"tensord: the server sent dtype enum value {wire}, "
                           "which this client does not know", {"dtype": wire},
                           compat=(ValueError,)) from None


def array_to_tensor_data(array: np.ndarray) -> "tensor_pb2.TensorData":
    array = as_wire_array(array)
    return tensor_pb2.TensorData(dtype=to_wire(array.dtype), shape=list(array.shape),
                                 data=array.tobytes())


def float32_to_bf16_bits(values) -> np.ndarray:
    """uint16 bfloat16 patterns of float values (via float32), rounded to nearest even; NaN
    stays NaN (quiet)."""
    a = np.array(values, dtype=np.float32, order="C")  # a copy; 0-d stays 0-d
    u = a.view(np.uint32)
    bits = ((u + np.uint32(0x7FFF) + ((u >> 16) & np.uint32(1))) >> 16).astype(np.uint16)
    nan = np.isnan(a)
    if nan.any():
        bits[nan] = ((u[nan] >> 16) | np.uint32(0x40)).astype(np.uint16)
    return bits


def bf16_bits_to_float32(bits) -> np.ndarray:
    """float32 values of uint16 bfloat16 patterns (exact)."""
    return (np.asarray(bits, dtype=np.uint16).astype(np.uint32) << 16).view(np.float32)


def encode(value, dtype=None):
    """(contiguous little-endian array holding the bytes to send, wire enum) for `value` as
    `dtype` (default: its own dtype). bf16 is sent as its 16-bit patterns."""
    if dtype is not None and is_bfloat16(dtype):
        bits = float32_to_bf16_bits(value).astype("<u2", copy=False)
        return bits, tensor_pb2.DTYPE_BF16
    if dtype is not None:
        value = np.asarray(value, dtype=to_numpy_dtype(dtype))
    array = as_wire_array(value)
    return array, to_wire(array.dtype)


def is_torch_tensor(value) -> bool:
    """True for a torch.Tensor (without importing torch)."""
    return type(value).__module__.split(".")[0] == "torch" and hasattr(value, "detach") and \
        hasattr(value, "dtype")


# torch dtype name -> tensord name, for the dtypes the wire has.
_TORCH_NAMES = {"float32": "f32", "float64": "f64", "int32": "i32", "int64": "i64",
                "bool": "bool", "bfloat16": "bf16", "float16": "f16", "uint8": "u8",
                "int8": "i8", "int16": "i16"}


def torch_dtype(dtype):
    """The torch dtype of a tensord dtype (torch.bfloat16 for bf16)."""
    import torch
    wanted = name(dtype)
    return next(getattr(torch, t) for t, n in _TORCH_NAMES.items() if n == wanted)


def encode_torch(tensor, dtype=None):
    """(contiguous array holding the bytes to send, wire enum) of a torch tensor, read through
    numpy: no copy for a contiguous CPU tensor of a dtype the wire has (bf16 as its 16-bit
    patterns, exactly); a CUDA or strided tensor is copied once (to the CPU / contiguous), and
    `dtype` (when it differs) converts with torch's own rounding. The tensor is detached: its
    autograd history stays in torch."""
    import torch
    t = tensor.detach()
    if dtype is not None and str(t.dtype) != str(torch_dtype(dtype)):
        t = t.to(torch_dtype(dtype))
    tname = str(t.dtype).replace("torch.", "")
    if tname not in _TORCH_NAMES:
        raise TypeError(f"tensord: torch.{tname} has no tensord dtype (tensord has {_HAS}); "
                        "convert it first or pass dtype=")
    if t.device.type != "cpu":
        t = t.cpu()
    if not t.is_contiguous():
        t = t.contiguous()
    if t.is_conj() or t.is_neg():
        t = t.resolve_conj().resolve_neg()
    if tname == "bfloat16":
        return t.view(torch.int16).numpy().view("<u2"), tensor_pb2.DTYPE_BF16
    array = t.numpy()
    if array.dtype.byteorder == ">":  # (torch tensors are native-endian; kept for safety)
        array = array.astype(array.dtype.newbyteorder("<"))
    return array, to_wire(array.dtype)


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


def bytes_to_array(raw, wire_dtype: int, shape, bf16_bits: bool = False) -> np.ndarray:
    """The array of received bytes; a bf16 tensor as float32 values, or with bf16_bits as its
    uint16 patterns (no conversion: what Tensor.torch() hands to torch)."""
    if wire_dtype == tensor_pb2.DTYPE_BF16 and bf16_bits:
        shape = tuple(int(s) for s in shape)
        buf = raw if isinstance(raw, (bytearray, np.ndarray)) else bytearray(raw)
        return np.frombuffer(buf, dtype="<u2").reshape(shape).astype(np.uint16, copy=False)
    if wire_dtype == tensor_pb2.DTYPE_BF16:
        shape = tuple(int(s) for s in shape)
        expected = int(np.prod(shape, dtype=np.int64)) * 2
        if len(raw) != expected:
            raise ValueError(f"tensord: received {len(raw)} bytes for a bf16 tensor of shape "
                             f"{shape} ({expected} expected)")
        return bf16_bits_to_float32(np.frombuffer(raw, dtype="<u2")).reshape(shape)
    dt = from_wire(wire_dtype).newbyteorder("<")
    shape = tuple(int(s) for s in shape)
    expected = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
    if len(raw) != expected:
        raise ValueError(f"tensord: received {len(raw)} bytes for a {dt} tensor of shape "
                         f"{shape} ({expected} expected)")
    # A writable buffer (the array the caller gets must be): a numpy buffer or bytearray is
    # used as it is, anything else copied once.
    buf = raw if isinstance(raw, (bytearray, np.ndarray)) else bytearray(raw)
    return np.frombuffer(buf, dtype=dt).reshape(shape).astype(dt.newbyteorder("="), copy=False)
