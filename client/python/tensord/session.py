"""Session: tensors, op calls, batches and autodiff contexts of one tensord session."""
from __future__ import annotations

import collections
import contextlib
import threading
import weakref

import grpc
import numpy as np

from . import autograd, dtypes
from ._pb import ops_pb2, service_pb2, tensor_pb2
from .errors import TensordError, client_error
from .op_calls import (WRITING_OPS, _KEEP_SIZE_OPS, _WRITING_METHODS, _guess_outputs,
                       _returns_tuple, attr_to_proto)
from .program import ProgramTrace, compile_program
from .batch import Batch, current_batch, forward_batch_for, open_block
from .tensor import Tensor

# Arrays above this size are uploaded with PutTensor instead of travelling as literals.
LITERAL_LIMIT_BYTES = 1 << 20
PUT_CHUNK_BYTES = 1 << 20
# Codes of a Release the server did not carry out, whose handles are queued again.
_RETRY_RELEASE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED,
                  grpc.StatusCode.RESOURCE_EXHAUSTED)
# Handles of collected Tensors are released in one Release call once this many are queued
# (or this many bytes), and before GetSessionInfo.
RELEASE_BATCH_COUNT = 64
RELEASE_BATCH_BYTES = 64 << 20
_CHECKPOINTING = {"none": service_pb2.CHECKPOINTING_NONE,
                  "balanced": service_pb2.CHECKPOINTING_BALANCED}


class AutodiffContext:
    """A server-side autodiff context (tape). Use as a context manager or call close()."""

    def __init__(self, session, context_id: int, checkpointing: str):
        self.session = session
        self.id = context_id
        self.checkpointing = checkpointing
        self.closed = False

    def backward(self, loss, seed=None, retain_graph: bool = False, reduce=None,
                 reduce_op: str = "mean") -> dict:
        """Runs reverse-mode autodiff from `loss` (a Tensor or a list of Tensors) and returns
        {leaf Tensor: gradient Tensor} for every requires-grad leaf reached.

        seed: the output gradient(s) (Tensor or array, one per root); None seeds scalar roots
        with 1.
        reduce: buckets of leaves (a list of lists of requires-grad leaf Tensors) whose
        gradients the server all-reduces (`reduce_op`: "mean" or "sum") across the session's
        process group while the backward runs, as DistributedDataParallel does: a bucket is
        flattened and reduced as soon as the backward has finished its gradients, while the
        backward goes on. Buckets launch in the order given: list them as the backward
        finishes them (the last layers first). Every rank must pass buckets of the same
        dtypes and sizes; the returned gradients of bucket leaves are the reduced ones.
        """
        return self.session._backward(self, loss, seed, retain_graph, reduce, reduce_op)

    def info(self):
        """This context's ContextInfo (state, tape_nodes, saved_bytes) from GetSessionInfo."""
        for c in self.session.info().contexts:
            if c.context_id == self.id:
                return c
        return None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        with contextlib.suppress(ValueError):
            self.session._contexts.remove(self)
        self.session._call("CloseAutodiffContext", service_pb2.CloseAutodiffContextRequest(
            session_id=self.session.id, context_id=self.id))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        if not self.session.closed:
            self.close()

    def __repr__(self):
        state = "closed" if self.closed else "open"
        return f"tensord.AutodiffContext(id={self.id}, {self.checkpointing}, {state})"


class Session:
    """A tensord session. Use `client.session(...)`; as a context manager it closes itself."""

    def __init__(self, client, resp, affinity_key: str = ""):
        self.client = client
        self.id = resp.session_id
        # Sent with every call of the session (x-tensord-session) for a balancer to hash on.
        self.affinity_key = affinity_key or self.id
        self.device = resp.device
        self.ttl_s = resp.ttl_seconds
        self.memory_quota_bytes = resp.memory_quota_bytes
        self.autodiff_enabled = resp.autodiff_enabled
        self.float32_matmul_precision = resp.float32_matmul_precision
        self.closed = False
        self._live = weakref.WeakValueDictionary()  # handle -> requires-grad Tensor
        self._pending = collections.deque()  # (handle, nbytes) of collected Tensors
        self._pending_bytes = 0
        self._batch = None  # an open `with sess.batch():` block or traced function
        self._local = threading.local()  # .forward: this thread's module call's forward batch
        self._no_grad = 0
        self._contexts = []  # open AutodiffContexts, most recent last
        # Calls that may write tensors of the session (see _may_write), counted twice each:
        # when sent and when answered. A value kept by op(fetch=True) is stamped with this
        # count and is used only while the count has not moved (Tensor._fetched_value).
        self._writes = 0

    # -- plumbing ------------------------------------------------------------------------------
    def _call(self, method, request):
        self._check_open()
        if not self._may_write(method, request):
            return self.client._call(method, request, affinity_key=self.affinity_key)
        self._writes += 1
        try:
            return self.client._call(method, request, affinity_key=self.affinity_key)
        finally:
            self._writes += 1

    @staticmethod
    def _may_write(method, request) -> bool:
        """Whether the call may change the value of a tensor that exists before it."""
        if method == "Execute":
            return any(call.op in WRITING_OPS for call in request.calls)
        return method in _WRITING_METHODS

    def _fetch_stamp(self, writes_before: int, calls):
        """The write count under which the values an Execute of `calls` fetched are current
        (their own writes counted), or None when another write was sent or answered
        meanwhile (another thread): such values are not kept."""
        own = 2 if any(call.op in WRITING_OPS for call in calls) else 0
        return self._writes if self._writes - writes_before == own else None

    def _keep_values(self, outs, result, stamp) -> None:
        """Hands each output Tensor of a fetched call its inline value (result.values)."""
        if stamp is None or not result.values:
            return
        for t, data in zip(outs, result.values):
            if t is not None:
                t._value = (t._info.handle, stamp, data.data, data.dtype, tuple(data.shape))

    def _check_open(self) -> None:
        # The server has forgotten a closed session; say so without asking it.
        if self.closed:
            raise client_error("SESSION_NOT_FOUND",
                               f"tensord: session {self.id} was closed",
                               {"session_id": self.id})

    def _own_info(self, t: Tensor, where):
        """t's TensorInfo if t can be named in this session, else the error the server would
        answer (a handle of another session names nothing here, or another tensor). `where`:
        a dict, or a call's (call_index, input_index, op)."""
        if isinstance(where, tuple):
            where = {"call_index": where[0], "input_index": where[1], "op": where[2]}
        if t.session is not self:
            handle = t._info.handle if t._info is not None else 0
            raise client_error(
                "TENSOR_NOT_FOUND", f"tensord: tensor {handle} belongs to session "
                f"{t.session.id}, not to session {self.id}", {"tensor_id": handle, **where})
        return t._require_info(where)

    def _register(self, tensor: Tensor) -> None:
        # Backward names its leaves by handle, and only a requires-grad tensor is a leaf (a
        # handle keeps the flag it was made with; requires_grad_() takes a new one): the map
        # holds those alone, which spares every other output a weak reference.
        if tensor._info.requires_grad:
            self._live[tensor._info.handle] = tensor

    def _queue_release(self, handle: int, nbytes: int = 0) -> None:
        if self.closed:
            return
        self._pending.append((handle, nbytes))
        self._pending_bytes += nbytes

    def _maybe_flush_releases(self) -> None:
        if len(self._pending) >= RELEASE_BATCH_COUNT or \
                self._pending_bytes >= RELEASE_BATCH_BYTES:
            self.flush_releases()

    def flush_releases(self) -> None:
        """Sends the queued releases of garbage-collected Tensors now."""
        taken = []
        while self._pending:
            try:
                handle, nbytes = self._pending.popleft()
            except IndexError:
                break
            self._pending_bytes -= nbytes
            taken.append((handle, nbytes))
        handles = [h for h, _ in taken]
        if not handles or self.closed:
            return
        try:
            self._call("Release", service_pb2.ReleaseRequest(session_id=self.id, handles=handles))
        except TensordError as exc:
            if exc.code in _RETRY_RELEASE:
                # The server did not take the call (unreachable, overloaded, out of time):
                # the handles stay queued for the next flush instead of staying held until
                # the session closes.
                for handle, nbytes in taken:
                    self._queue_release(handle, nbytes)
                return
            # Release is atomic: one stale handle fails all, so free the rest one by one.
            for h in handles:
                with contextlib.suppress(TensordError):
                    self._call("Release", service_pb2.ReleaseRequest(session_id=self.id,
                                                                     handles=[h]))

    def _execute(self, request):
        self._maybe_flush_releases()
        try:
            return self._call("Execute", request)
        except TensordError as exc:
            if not (exc.reason == "LIMIT_EXCEEDED" and exc.metadata.get("limit") == "fetch_bytes"
                    and any(call.fetch for call in request.calls)):
                raise
        # The fetched values passed the server's inline limit (7/8 of --max_message_bytes,
        # 56 MiB by default, summed over the batch): it refused the whole Execute and rolled
        # it back, so it runs again without fetch; the values are downloaded (GetTensor) when
        # asked for.
        for call in request.calls:
            call.fetch = False
        return self._call("Execute", request)

    def _default_context_id(self, ctx) -> int:
        if ctx is None:
            return self._contexts[-1].id if self._contexts else 0
        return ctx.id if isinstance(ctx, AutodiffContext) else int(ctx)

    def _operand(self, value, batch, keepalive, where,
                 into: ops_pb2.Operand | None = None) -> ops_pb2.Operand:
        """The wire operand, filled into `into` (an element of a call's inputs) when given;
        `where` (a dict, or a call's (call_index, input_index, op)) goes into its errors."""
        out = ops_pb2.Operand() if into is None else into
        if isinstance(value, Tensor):
            lazy = value._lazy
            if value._info is None and value._session is self:
                owner = lazy[0]
                if owner is batch and owner.state == "open":
                    if not isinstance(lazy[1], int):  # a program's parameter or gradient
                        out.CopyFrom(owner.operand(value))
                        return out
                    named = out.call_output
                    named.call = lazy[1]
                    named.output = lazy[2]
                    return out
            handle = self._own_info(value, where).handle
            if batch is not None:
                # A batch names the handle when it is sent, a program at every run: until then
                # the batch holds the Tensor, so that dropping the caller's last reference
                # (`s.op("tanh", s.tensor(x) * 2.0)` inside a batch) queues no release of it.
                batch.keepalive.append(value)
            out.handle = handle
            return out
        if isinstance(value, (bool, np.bool_)):
            out.scalar.b = bool(value)
            return out
        if isinstance(value, (int, np.integer)):
            out.scalar.i = int(value)
            return out
        if isinstance(value, (float, np.floating)):
            out.scalar.f = float(value)
            return out
        if into is not None:
            into.CopyFrom(self._operand(value, batch, keepalive, where))
            return into
        if dtypes.is_torch_tensor(value):  # its bytes as they are (bf16 included)
            array, wire = dtypes.encode_torch(value)
            if array.nbytes > LITERAL_LIMIT_BYTES:
                tmp = self.tensor(value)
                keepalive.append(tmp)
                return ops_pb2.Operand(handle=tmp.handle)
            return ops_pb2.Operand(literal=tensor_pb2.TensorData(
                dtype=wire, shape=list(array.shape), data=array.tobytes()))
        array = dtypes.as_wire_array(value)
        if array.nbytes > LITERAL_LIMIT_BYTES:
            tmp = self.tensor(array)
            keepalive.append(tmp)
            return ops_pb2.Operand(handle=tmp.handle)
        return ops_pb2.Operand(literal=dtypes.array_to_tensor_data(array))

    def _download(self, handle: int, bf16_bits: bool = False) -> np.ndarray:
        self._check_open()
        # Each chunk is copied once, into a numpy buffer sized from the tensor's info (numpy
        # asks for huge pages for a large one): joining the chunks and then copying them into a
        # writable buffer cost two copies and two rounds of page faults.
        info, out, filled, early = None, None, 0, []
        for msg in self.client._stream("GetTensor", service_pb2.GetTensorRequest(
                session_id=self.id, handle=handle), affinity_key=self.affinity_key):
            if msg.HasField("info") and info is None:
                info = msg.info
                itemsize = 2 if info.dtype == tensor_pb2.DTYPE_BF16 else \
                    dtypes.from_wire(info.dtype).itemsize
                expected = int(np.prod(info.shape, dtype=np.int64)) * itemsize
                out = np.empty(expected, dtype=np.uint8)
                for chunk in early:
                    filled = self._fill(handle, out, filled, chunk)
            if msg.chunk:
                if out is None:
                    early.append(msg.chunk)
                else:
                    filled = self._fill(handle, out, filled, msg.chunk)
        if info is None:
            raise client_error("INTERNAL", f"tensord: GetTensor({handle}) returned no TensorInfo",
                               {"tensor_id": handle})
        if filled != out.size:
            self._incomplete(handle, info, filled, out.size)
        return dtypes.bytes_to_array(out, info.dtype, info.shape, bf16_bits)

    def _fill(self, handle, out, filled, chunk) -> int:
        if len(chunk) > out.size - filled:
            self._incomplete(handle, None, filled + len(chunk), out.size)
        out[filled:filled + len(chunk)] = np.frombuffer(chunk, dtype=np.uint8)
        return filled + len(chunk)

    @staticmethod
    def _incomplete(handle, info, received, expected):
        shape = f" for shape {tuple(info.shape)}" if info is not None else ""
        raise client_error(
            "TRANSFER_INCOMPLETE", f"tensord: GetTensor({handle}) sent {received} bytes{shape} "
            f"({expected} bytes)",
            {"tensor_id": handle, "received_bytes": received, "expected_bytes": expected})

    def _backward(self, ctx, loss, seed, retain_graph, reduce=None, reduce_op="mean"):
        if isinstance(self._batch, ProgramTrace):
            return self._batch.backward(ctx, loss, seed, reduce, reduce_op)
        if open_block(self) is not None:
            raise client_error("INVALID_REQUEST", "tensord: backward() cannot run inside "
                               "sess.batch(); end the batch first", {"context_id": ctx.id})
        self._check_open()
        roots = list(loss) if isinstance(loss, (list, tuple)) else [loss]
        root_handles = [self._own_info(r, {"root_index": i}).handle for i, r in enumerate(roots)]
        keepalive = []
        seeds = []
        if seed is not None:
            seed_list = list(seed) if isinstance(seed, (list, tuple)) else [seed]
            for i, s in enumerate(seed_list):
                if not isinstance(s, Tensor):
                    s = self.tensor(s)
                    keepalive.append(s)
                seeds.append(self._own_info(s, {"seed_index": i}).handle)
        req = service_pb2.BackwardRequest(session_id=self.id, context_id=ctx.id,
                                          roots=root_handles, seeds=seeds,
                                          retain_graph=retain_graph)
        if reduce is not None:
            req.reduce.CopyFrom(self._gradient_reduction(reduce, reduce_op))
        resp = self._call("Backward", req)
        grads = {}
        for g in resp.gradients:
            grad = Tensor(self, g.grad)
            self._register(grad)
            leaf = self._live.get(g.leaf)
            if leaf is not None:
                grads[leaf] = grad
        return grads

    def _gradient_reduction(self, buckets, op: str):
        """The GradientReduction message for buckets of leaf Tensors of this session."""
        reduction = service_pb2.GradientReduction(op=op)
        for b, bucket in enumerate(buckets):
            if isinstance(bucket, Tensor):
                raise client_error("INVALID_REQUEST", "tensord: reduce= takes buckets, lists "
                                   "of leaf tensors; write [[w, b], ...]", {"bucket_index": b})
            handles = [self._own_info(leaf, {"bucket_index": b}).handle for leaf in bucket]
            reduction.buckets.add(leaves=handles)
        return reduction

    # -- API -----------------------------------------------------------------------------------
    def tensor(self, value, requires_grad: bool = False, ctx=None, device: str | None = None,
               dtype=None) -> Tensor:
        """Uploads a numpy array (or anything np.asarray takes), or a torch tensor, streamed
        in chunks.

        A torch tensor keeps its dtype (bf16 included, sent as its 16-bit patterns) and is
        read through numpy without a copy when it is a contiguous CPU tensor; its autograd
        history stays in torch (requires_grad= decides here). dtype= converts (torch's
        rounding for a torch tensor).
        requires_grad makes it a leaf of `ctx` (default: the most recently opened autodiff
        context of this session that is still open).
        """
        if isinstance(value, Tensor) and dtype is None and not requires_grad and device is None:
            return value
        if isinstance(value, Tensor):
            dtype = value.dtype if dtype is None else dtype  # a bf16 tensor stays bf16
            value = value.numpy()
        if dtypes.is_torch_tensor(value):
            array, wire = dtypes.encode_torch(value, dtype)
        else:
            # bf16 (dtype="bf16") travels as its 16-bit patterns, rounded from the values here.
            array, wire = dtypes.encode(value, dtype)
        header = service_pb2.PutHeader(
            session_id=self.id, dtype=wire, shape=list(array.shape),
            device=device or "", requires_grad=bool(requires_grad),
            context_id=self._default_context_id(ctx) if requires_grad else 0)
        flat = array.reshape(-1).view(np.uint8)

        def requests():
            yield service_pb2.PutTensorRequest(header=header)
            for off in range(0, flat.size, PUT_CHUNK_BYTES):
                yield service_pb2.PutTensorRequest(chunk=flat[off:off + PUT_CHUNK_BYTES].tobytes())

        resp = self._call("PutTensor", requests())
        t = Tensor(self, resp.tensor)
        self._register(t)
        return t

    def op(self, name: str, *operands, requires_grad: bool = False, ctx=None,
           num_outputs: int | None = None, fetch: bool = False, **attrs):
        """Calls op `name` on operands (Tensor, numpy array, Python scalar).

        Attributes are keyword arguments (None = absent). requires_grad makes the float
        outputs requires-grad leaves of `ctx` (creation ops such as randn). Multi-output ops
        return a tuple. Inside `with sess.batch():` the result is lazy; num_outputs tells the
        batch how many outputs a call has where the client cannot infer it (split, chunk).

        fetch=True asks the server for the outputs' values in the same Execute (OpCall.fetch):
        the returned Tensors are ordinary handles that also keep their value, so `.numpy()`,
        `.item()`, `float()`, `.tolist()` and `.torch()` need no second round trip (GetTensor).
        Inside `with sess.batch():` the values arrive when the block ends; in a function
        `sess.compile` traces fetch is refused (return the tensor to get its value).
        A kept value is used only while no call that may write a tensor of the session has
        been sent since: any Execute naming an in-place op (WRITING_OPS: assign, sgd, adam,
        adamw, batch_norm; an optimizer step, zero_grad, nn.init), RunProgram, CompileProgram
        or Backward drops the kept values of every tensor of the session (a write reaches the
        tensors sharing the target's storage too), and so does any change of the handle the
        Tensor names; the next read downloads. The server refuses inline values that sum to
        more than 7/8 of its --max_message_bytes (56 MiB by default) per Execute, rolling the
        call back: the call is then sent again without fetch, and the values are downloaded
        when read.
        """
        attrs = {k: v for k, v in attrs.items() if v is not None}
        if name in _KEEP_SIZE_OPS and isinstance(attrs.get("output_size"), (list, tuple)):
            # PyTorch's None in output_size (keep that dim's input size) travels as -1.
            attrs["output_size"] = [-1 if v is None else v for v in attrs["output_size"]]
        batch = current_batch(self)
        if isinstance(batch, Batch) and batch.forward:
            if num_outputs is None:  # found once, for the batch and for the call
                num_outputs = _guess_outputs(name, operands, attrs)
            no_grad = self._no_grad > 0 or not autograd.is_grad_enabled()
            context_id = self._default_context_id(ctx) if requires_grad else 0
            batch = forward_batch_for(batch, num_outputs, no_grad, context_id)
        if isinstance(batch, Batch):  # made in place as the batch's last call
            call = batch.new_call(name)
            try:
                return self._batch_call(batch, call, name, operands, requires_grad, ctx,
                                        num_outputs, fetch, attrs)
            except BaseException:
                batch.drop_last()
                raise
        if batch is not None:  # a traced program's call
            return self._batch_call(batch, ops_pb2.OpCall(op=name), name, operands,
                                    requires_grad, ctx, num_outputs, fetch, attrs)
        request = service_pb2.ExecuteRequest(session_id=self.id)
        call = request.calls.add()
        call.op = name
        context_id = self._fill_call(call, requires_grad, ctx, fetch, attrs)
        request.no_grad = self._no_grad > 0 or not autograd.is_grad_enabled()
        request.context_id = context_id
        keepalive = []
        add = call.inputs.add
        for i, v in enumerate(operands):
            self._operand(v, None, keepalive, (0, i, name), add())
        writes = self._writes
        resp = self._execute(request)
        del keepalive
        outs = []
        for info in resp.results[0].outputs:
            t = Tensor(self, info)
            self._register(t)
            outs.append(t)
        if fetch:
            self._keep_values(outs, resp.results[0], self._fetch_stamp(writes, [call]))
        if len(outs) == 1 and not _returns_tuple(name, attrs):
            return outs[0]
        return tuple(outs) if outs else None

    def _fill_call(self, call, requires_grad, ctx, fetch, attrs) -> int:
        """Sets a call's attributes and flags; returns the context id its requires-grad
        outputs go to (0: none)."""
        if requires_grad:
            call.requires_grad = True
        if attrs:
            types = self.client.attr_types(call.op)
            for key, value in attrs.items():
                call.attrs[key].CopyFrom(attr_to_proto(key, value, types.get(key)))
        if fetch:
            call.fetch = True
        return self._default_context_id(ctx) if requires_grad else 0

    def _batch_call(self, batch, call, name, operands, requires_grad, ctx, num_outputs, fetch,
                    attrs):
        """Session.op inside a batch or a traced program: `call` is named and filled here, and
        its lazy outputs returned."""
        if fetch and isinstance(batch, ProgramTrace):
            raise client_error(
                "INVALID_REQUEST", "tensord: fetch=True cannot be used in a function that "
                "sess.compile traces: return the tensor from the function to get its value "
                "at every run", {"call_index": len(batch.calls) + len(batch.updates),
                                 "op": name, "field": "fetch"})
        context_id = self._fill_call(call, requires_grad, ctx, fetch, attrs)
        no_grad = self._no_grad > 0 or not autograd.is_grad_enabled()
        # The call's index in the batch (a Batch's call is in it already).
        k = len(batch.calls) - 1 if isinstance(batch, Batch) else len(batch.calls)
        add = call.inputs.add
        keepalive = batch.keepalive
        for i, v in enumerate(operands):
            self._operand(v, batch, keepalive, (k, i, name), add())
        n = num_outputs if num_outputs is not None else _guess_outputs(name, operands, attrs)
        if n is None:
            raise client_error(
                "INVALID_REQUEST", f"tensord: inside a batch, {name} needs num_outputs= (its "
                "output count depends on a shape the client does not know yet)",
                {"call_index": k, "op": name, "field": "num_outputs"})
        outs = batch.add(call, n, no_grad, context_id)
        if n == 0:
            return None
        return tuple(outs) if n != 1 or _returns_tuple(name, attrs) else outs[0]

    def __getattr__(self, name):
        # sess.relu(x), sess.zeros(shape=[2, 3]), ... for every op of the server's catalog.
        if name.startswith("_"):
            raise AttributeError(name)
        client = self.__dict__.get("client")
        if client is not None and name in client.op_names():
            def bound(*operands, **attrs):
                return self.op(name, *operands, **attrs)
            bound.__name__ = name
            return bound
        raise AttributeError(f"'Session' object has no attribute {name!r} (and the server has "
                             f"no op of that name)")

    @contextlib.contextmanager
    def batch(self):
        """Collects the ops of the block and sends them as one atomic Execute at its end.

        Ops inside return lazy Tensors (no value, shape or dtype until the block ends). If the
        block raises, nothing is sent. Nested blocks join the outer batch; inside a module
        call a block joins its forward batch (batch.forward_batch).
        """
        current = current_batch(self)
        if current is not None:  # an outer block, a traced function or a module call
            yield current
            return
        batch = Batch(self)
        self._batch = batch
        try:
            yield batch
        except BaseException:
            self._batch = None
            batch.discard()
            raise
        self._batch = None
        batch.flush()

    def compile(self, fn, *example_inputs, names=None, ctx=None):
        """Traces `fn(*inputs)` once on lazy stand-ins of `example_inputs` (arrays, Tensors,
        numbers) and compiles it into a server-side program: returns a callable that runs
        forward, backward (`ctx.backward(loss)` inside fn) and updates (an optimizer's
        step) in one round trip and returns what fn returned as numpy arrays. Every call
        needs inputs of the examples' dtypes and shapes. `ctx`: the autodiff context the
        forward records on (default: the most recent open one). See tensord.program."""
        return compile_program(self, fn, example_inputs, names=names, ctx=ctx)

    @contextlib.contextmanager
    def _outside_trace(self):
        # Work a traced function starts that must happen now, once, not in every run (an
        # optimizer creating its state).
        trace, self._batch = self._batch, None
        try:
            yield
        finally:
            self._batch = trace

    def autodiff(self, checkpointing: str = "none") -> AutodiffContext:
        """Opens an autodiff context ("none" keeps every activation, "balanced" recomputes
        memory-bound ones in backward). A context manager; closing frees its tape."""
        if checkpointing not in _CHECKPOINTING:
            # The wire answer to an unknown checkpointing value; a ValueError as it always was.
            raise client_error(
                "INVALID_REQUEST", f"tensord: checkpointing must be one of "
                f"{sorted(_CHECKPOINTING)}, got {checkpointing!r}",
                {"field": "checkpointing", "value": checkpointing}, compat=(ValueError,))
        resp = self._call("OpenAutodiffContext", service_pb2.OpenAutodiffContextRequest(
            session_id=self.id, checkpointing=_CHECKPOINTING[checkpointing]))
        ctx = AutodiffContext(self, resp.context_id, checkpointing)
        self._contexts.append(ctx)
        return ctx

    def grad_context(self, checkpointing: str = "none") -> AutodiffContext:
        """The context the PyTorch-style API puts requires-grad leaves in (tensord.nn's
        parameters, Tensor.requires_grad_()): the most recently opened context of this session
        that is still open, else a new one (`checkpointing`) that stays open until it is closed
        or the session closes."""
        if self._contexts:
            return self._contexts[-1]
        return self.autodiff(checkpointing)

    @contextlib.contextmanager
    def no_grad(self):
        """Ops inside record nothing (optimizer updates; assign into autodiff tensors). Only
        this session's ops; tensord.no_grad() holds for every session."""
        self._no_grad += 1
        try:
            yield
        finally:
            self._no_grad -= 1

    def release(self, *tensors) -> int:
        """Frees the given tensors (or raw handles) now (one Release call).

        A tensor that the open `with sess.batch():` block (or the function `sess.compile` is
        tracing) names as an operand is refused with tensord.InvalidRequest and nothing is
        freed: the batch is sent at the block's end and needs it. Release it after the block.
        """
        # Checked before any is marked, since Release is atomic: one refusal frees nothing.
        handles, owned = [], []
        for t in tensors:
            if isinstance(t, Tensor):
                if t._released and t.session is self:
                    continue  # releasing twice is harmless
                handles.append(self._own_info(t, {}).handle)
                owned.append(t)
            else:
                handles.append(int(t))
            self._refuse_batched(handles[-1])
        if not handles:
            return 0
        self._check_open()
        for t in owned:
            t._released = True
        return self._call("Release", service_pb2.ReleaseRequest(session_id=self.id,
                                                                handles=handles)).released

    def _refuse_batched(self, handle: int) -> None:
        # Freeing a handle the open batch names would make the whole batch fail at its end
        # (TENSOR_NOT_FOUND); refuse the release instead, naming where the batch uses it.
        batch = open_block(self)
        where = batch.names(handle) if batch is not None else None
        if where is None:
            return
        if isinstance(batch, ProgramTrace):
            what = "the function sess.compile is tracing; the program names it at every run"
        else:
            what = "the open `with sess.batch():` block; release it after the block ends"
        raise client_error("INVALID_REQUEST", f"tensord: tensor {handle} is an operand of {what}",
                           {"tensor_id": handle, **where})

    def info(self):
        """GetSessionInfo (memory used, tensors, contexts), after sending queued releases."""
        self.flush_releases()
        return self._call("GetSessionInfo", service_pb2.GetSessionInfoRequest(session_id=self.id))

    def shared_memory(self, nbytes: int, name: str | None = None):
        """A same-host shared memory region of `nbytes` registered in this session, for puts
        and gets that skip the gRPC streams (tensord.shared_memory.SharedMemory; the server
        must run on this host with --shared-memory)."""
        from .shared_memory import SharedMemory
        return SharedMemory(self, nbytes, name)

    def join_group(self, group: str, rank: int, world_size: int, rendezvous: str):
        """Joins a process group of sessions on `world_size` servers, as rank `rank`
        (JoinGroup; docs/scaling.md). Blocks until every rank has joined. `group` is the same
        on every rank and new for each launch; `rendezvous` is "file:///shared/dir" or
        "redis://host:port". Then the collective ops (all_reduce, all_gather, reduce_scatter,
        broadcast, reduce, barrier; tensord.distributed) run across the group. Returns the
        GroupInfo (name, rank, world_size, backend)."""
        self._check_open()
        return self._call("JoinGroup", service_pb2.JoinGroupRequest(
            session_id=self.id, group=group, rank=int(rank), world_size=int(world_size),
            rendezvous=rendezvous)).group

    def leave_group(self) -> None:
        """Leaves the session's process group (GROUP_NOT_JOINED when it has none)."""
        self._call("LeaveGroup", service_pb2.LeaveGroupRequest(session_id=self.id))

    @property
    def group(self):
        """The GroupInfo of the session's process group, or None."""
        info = self.info()
        return info.group if info.HasField("group") else None

    def keep_alive(self) -> int:
        return self._call("KeepAlive", service_pb2.KeepAliveRequest(session_id=self.id)).ttl_seconds

    def ops(self) -> list[dict]:
        return self.client.ops()

    def devices(self) -> list[dict]:
        return self.client.devices()

    def close(self) -> None:
        if self.closed:
            return
        self._pending.clear()
        self._call("CloseSession", service_pb2.CloseSessionRequest(session_id=self.id))
        self.closed = True
        for ctx in list(self._contexts):
            ctx.closed = True
        self._contexts.clear()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"tensord.Session(id={self.id!r}, device={self.device!r})"
