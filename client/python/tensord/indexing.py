"""Python indexing on Tensor (t[1:3], t[0], t[:, 1], t[..., None], t[idx]) mapped to ops.

Slices become `slice` (dim, start, end, step), integers `slice` + `squeeze`, None `unsqueeze`,
a 1-d integer tensor/array `index_select`, a boolean mask (as the only index) `masked_select`.
The calls of one indexing expression travel in one Execute batch.
"""
from __future__ import annotations

import numpy as np

from .errors import BatchPendingError, client_error


def _normalize_key(key, rank, pending=None):
    if not isinstance(key, tuple):
        key = (key,)
    consuming = sum(1 for k in key if k is not None and k is not Ellipsis)
    ellipses = sum(1 for k in key if k is Ellipsis)
    if ellipses > 1:
        raise IndexError("tensord: an index can only have a single ellipsis ('...')")
    if ellipses:
        if rank is None:
            # The rank of a pending batch output is unknown until the batch is sent.
            raise client_error("BAD_OPERAND", "tensord: '...' needs a known rank; index a tensor "
                               "of an executed batch", pending, cls=BatchPendingError)
        at = next(i for i, k in enumerate(key) if k is Ellipsis)
        fill = (slice(None),) * max(rank - consuming, 0)
        key = key[:at] + fill + key[at + 1:]
    if rank is not None and consuming > rank:
        raise IndexError(f"tensord: too many indices for a tensor of rank {rank}")
    return key


def index(t, key):
    # A key of the indexed tensor's own class is a server tensor. Taking the class from `t`
    # keeps this module independent of tensor.py, which imports it for Tensor.__getitem__.
    tensor_type = type(t)
    session = t.session
    shape = None if t.is_lazy and not t._sendable else t.shape  # a module call's is sent
    if isinstance(key, (tensor_type, np.ndarray, list)):
        arr_dtype = (key.dtype if isinstance(key, (tensor_type, np.ndarray))
                     else np.asarray(key).dtype)
        if arr_dtype == np.bool_:
            return session.op("masked_select", t, key)
    pending = None
    if shape is None:
        _, call, output = t._lazy
        pending = {"operand_call": call, "operand_output": output}
    key = _normalize_key(key, None if shape is None else len(shape), pending)
    with session.batch():
        out = t
        d = 0  # dim of `out` the next key entry applies to
        o = 0  # dim of the original tensor it corresponds to
        for k in key:
            if k is None:
                out = session.op("unsqueeze", out, dim=d)
                d += 1
            elif isinstance(k, slice):
                if k.step is not None and k.step <= 0:
                    raise ValueError("tensord: slice step must be positive")
                if k != slice(None):
                    attrs = {"dim": d, "step": 1 if k.step is None else int(k.step)}
                    if shape is not None:
                        start, stop, _ = k.indices(shape[o])
                        attrs["start"], attrs["end"] = start, max(stop, start)
                    else:
                        attrs["start"] = 0 if k.start is None else int(k.start)
                        if k.stop is not None:
                            attrs["end"] = int(k.stop)
                    out = session.op("slice", out, **attrs)
                d += 1
                o += 1
            elif isinstance(k, (int, np.integer)) and not isinstance(k, (bool, np.bool_)):
                i = int(k)
                attrs = {"dim": d}
                if shape is not None:
                    n = shape[o]
                    if not -n <= i < n:
                        raise IndexError(f"tensord: index {i} is out of bounds for dim {o} "
                                         f"with size {n}")
                    i = i + n if i < 0 else i
                    attrs["start"], attrs["end"] = i, i + 1
                else:
                    attrs["start"] = i
                    if i != -1:
                        attrs["end"] = i + 1
                out = session.op("slice", out, **attrs)
                out = session.op("squeeze", out, dim=d)
                o += 1
            elif isinstance(k, (tensor_type, np.ndarray, list)):
                idx = k if isinstance(k, tensor_type) else np.asarray(k)
                if isinstance(idx, np.ndarray):
                    if idx.dtype.kind not in "iu" or idx.ndim != 1:
                        raise IndexError("tensord: tensor indices must be 1-d integer arrays")
                    idx = idx.astype(np.int64)
                out = session.op("index_select", out, idx, dim=d)
                d += 1
                o += 1
            else:
                raise IndexError(f"tensord: unsupported index {k!r}")
    return out
