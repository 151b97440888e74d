"""Same-host shared memory (docs/shared-memory.md).

A region is a POSIX shared memory object this process makes, maps and registers with a
session; puts and gets through it move a tensor's bytes through memory both processes see
instead of through gRPC messages. The server must run on this host (or share its /dev/shm)
with --shared-memory.

    with sess.shared_memory(64 << 20) as shm:
        t = shm.put(np.ones((1024, 1024), np.float32))
        back = shm.get(t)

The object's name is removed as soon as the server holds it open, so nothing is left in
/dev/shm when either process ends.
"""
from __future__ import annotations

import mmap
import os
import secrets

import numpy as np

from . import dtypes
from ._pb import service_pb2, tensor_pb2
from .batch import settle_writes
from .errors import client_error
from .tensor import Tensor

_SHM_DIR = "/dev/shm"  # where glibc's shm_open keeps POSIX shared memory objects on Linux


class SharedMemory:
    """A registered region of `nbytes` bytes; see Session.shared_memory."""

    def __init__(self, session, nbytes: int, name: str | None = None):
        nbytes = int(nbytes)
        if nbytes <= 0:
            raise client_error("INVALID_REQUEST", "tensord: a shared memory region needs at "
                               "least one byte", {"field": "region.byte_size"})
        session._check_open()
        self.session = session
        self.nbytes = nbytes
        self.key = f"/tensord-{os.getpid()}-{secrets.token_hex(8)}"
        self.name = name if name is not None else self.key[1:]
        path = _SHM_DIR + self.key
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.ftruncate(fd, nbytes)
            self._map = mmap.mmap(fd, nbytes)
        except BaseException:
            os.unlink(path)
            raise
        finally:
            os.close(fd)
        self._registered = False
        try:
            session._call("RegisterSharedMemory", service_pb2.RegisterSharedMemoryRequest(
                session_id=session.id, region=service_pb2.SharedMemoryInfo(
                    name=self.name, key=self.key, byte_size=nbytes)))
            self._registered = True
        finally:
            # Registered or not, the name is no longer needed: the server holds it open.
            os.unlink(path)
            if not self._registered:
                self._map.close()

    # -- the region's memory -------------------------------------------------------------------
    def array(self, dtype, shape, offset: int = 0) -> np.ndarray:
        """A numpy view of the region: write a tensor's values here, then put_at them."""
        dt = dtypes.to_numpy_dtype(dtype).newbyteorder("<")
        shape = tuple(int(s) for s in shape)
        count = int(np.prod(shape, dtype=np.int64))
        return np.frombuffer(self._map, dtype=dt, count=count, offset=offset).reshape(shape)

    # -- puts and gets -------------------------------------------------------------------------
    def put(self, value, offset: int = 0, requires_grad: bool = False, ctx=None,
            device: str | None = None, dtype=None):
        """Copies `value` (anything sess.tensor takes) to `offset` and puts it from there."""
        array, wire = dtypes.encode(value, dtype)
        flat = array.reshape(-1).view(np.uint8)
        if 0 <= offset and flat.size <= self.nbytes - offset:
            self._map[offset:offset + flat.size] = flat
        # else: the server's answer names the region's bounds.
        return self._put(wire, array.shape, offset, requires_grad, ctx, device)

    def put_at(self, dtype, shape, offset: int = 0, requires_grad: bool = False, ctx=None,
               device: str | None = None):
        """Puts the bytes already at `offset` (see array()) as a tensor of dtype and shape."""
        wire = tensor_pb2.DTYPE_BF16 if dtypes.is_bfloat16(dtype) else dtypes.to_wire(
            dtypes.to_numpy_dtype(dtype))
        return self._put(wire, shape, offset, requires_grad, ctx, device)

    def get(self, tensor, offset: int = 0, copy: bool = True) -> np.ndarray:
        """Has the server write `tensor` at `offset` and returns its values: a copy, or with
        copy=False a view of the region (valid until the region is written again)."""
        info = self.get_at(tensor, offset)
        nbytes = int(np.prod(info.shape, dtype=np.int64)) * (
            2 if info.dtype == tensor_pb2.DTYPE_BF16 else dtypes.from_wire(info.dtype).itemsize)
        if info.dtype == tensor_pb2.DTYPE_BF16:  # widened to float32: a new array either way
            bits = np.frombuffer(self._map, dtype="<u2", count=nbytes // 2, offset=offset)
            return dtypes.bf16_bits_to_float32(bits).reshape(tuple(info.shape))
        view = self.array(dtypes.from_wire(info.dtype), info.shape, offset)
        # One copy, into an array numpy allocates (with huge pages when large).
        return view.astype(view.dtype.newbyteorder("="), copy=True) if copy else view

    def get_at(self, tensor, offset: int = 0):
        """Has the server write `tensor`'s bytes at `offset`; returns its TensorInfo."""
        sess = self.session
        sess._check_open()
        handle = sess._own_info(tensor, {}).handle
        settle_writes(sess)  # a pending write of a module call goes first
        info = None
        for msg in sess.client._stream("GetTensor", service_pb2.GetTensorRequest(
                session_id=sess.id, handle=handle,
                shared_memory=service_pb2.SharedMemorySpan(region=self.name, offset=offset)),
                affinity_key=sess.affinity_key):
            if msg.HasField("info"):
                info = msg.info
        if info is None:
            raise client_error("INTERNAL", f"tensord: GetTensor({handle}) returned no TensorInfo",
                               {"tensor_id": handle})
        return info

    def _put(self, wire, shape, offset, requires_grad, ctx, device):
        sess = self.session
        sess._check_open()
        header = service_pb2.PutHeader(
            session_id=sess.id, dtype=wire, shape=[int(s) for s in shape],
            device=device or "", requires_grad=bool(requires_grad),
            context_id=sess._default_context_id(ctx) if requires_grad else 0,
            shared_memory=service_pb2.SharedMemorySpan(region=self.name, offset=int(offset)))
        resp = sess._call("PutTensor", iter([service_pb2.PutTensorRequest(header=header)]))
        t = Tensor(sess, resp.tensor)
        sess._register(t)
        return t

    # -- lifetime ------------------------------------------------------------------------------
    def close(self):
        """Unregisters the region (when the session is still open) and unmaps it. Views from
        array() or get(copy=False) must be gone first."""
        if self._registered:
            self._registered = False
            if not self.session.closed:
                self.session._call("UnregisterSharedMemory",
                                   service_pb2.UnregisterSharedMemoryRequest(
                                       session_id=self.session.id, name=self.name))
        if not self._map.closed:
            self._map.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
