"""Batch: the calls of a `with sess.batch():` block, made in place in one ExecuteRequest and
sent as one atomic Execute when the block ends; outputs no Tensor names by then are sent
discarded. A module call's forward collects its calls in a forward batch, sent when the call
returns or as soon as something needs its outputs (a shape, a value, a handle)."""
from __future__ import annotations

import contextlib
import weakref

from ._pb import service_pb2
from .errors import TensordError, client_error
from .op_calls import WRITING_OPS
from .tensor import Tensor


class Batch:
    """Calls collected by `with sess.batch():`, sent as one Execute when the block ends."""

    def __init__(self, session, forward: bool = False):
        self.session = session
        # A forward batch (forward_batch, below) is sent whenever its outputs are needed
        # before it ends, instead of refusing; a `with sess.batch():` block never is.
        self.forward = forward
        self.nbytes = 0  # a forward batch's request bytes so far
        self.writes = False  # a forward batch holds a call that may write a tensor
        # The Execute the block sends: Session.op makes each call in place in it (building a
        # call apart and copying it in, then copying the list into a request, cost twice the
        # time of building it).
        self.request = service_pb2.ExecuteRequest(session_id=session.id)
        self.calls = self.request.calls
        self.outputs = []  # per call: weak references to the lazy Tensors handed out
        self.no_grad = None
        self.context_id = 0
        # Every tensor the calls name by handle (Tensor operands, uploaded literals), held until
        # the batch is sent or discarded: no finalizer may queue the release of a handle the
        # unsent batch names.
        self.keepalive = []
        self.state = "open"  # open -> done | failed

    def accepts(self, no_grad: bool, context_id: int) -> bool:
        """Whether a call of this no_grad state, making requires-grad outputs of `context_id`
        (0: none), can join the batch: one Execute carries one of each."""
        return (self.no_grad is None or self.no_grad == no_grad) and \
            (not context_id or not self.context_id or self.context_id == context_id)

    def new_call(self, op: str):
        """A call made in place as the batch's last; Session.op fills it, then add()s it, or
        drops it (drop_last) when it cannot be sent."""
        call = self.calls.add()
        call.op = op
        return call

    def drop_last(self) -> None:
        del self.calls[-1]

    def add(self, call, n_outputs, no_grad: bool, context_id: int):
        """Takes `call`, the batch's last (new_call), and returns its lazy outputs."""
        index = len(self.calls) - 1
        if self.forward:
            self.nbytes += call.ByteSize()
            self.writes = self.writes or call.op in WRITING_OPS
        # One Execute carries one no_grad flag and one context id: these cannot be sent.
        if self.no_grad is None:
            self.no_grad = no_grad
        elif self.no_grad != no_grad:
            raise client_error(
                "INVALID_REQUEST", "tensord: one batch cannot mix no_grad calls with recorded "
                "calls; end the batch before entering/leaving no_grad()",
                {"call_index": index, "op": call.op, "field": "no_grad"})
        if context_id and call.requires_grad:
            if self.context_id and self.context_id != context_id:
                raise client_error(
                    "INVALID_REQUEST", "tensord: one batch can create requires-grad tensors for "
                    f"one autodiff context only (context {self.context_id}, then {context_id})",
                    {"call_index": index, "op": call.op, "field": "context_id",
                     "context_id": context_id})
            self.context_id = context_id
        session = self.session
        outs = [Tensor(session, None, (self, index, k)) for k in range(n_outputs)]
        # Weakly: an output no Tensor names any more when the batch is sent is discarded.
        self.outputs.append([weakref.ref(t) for t in outs])
        return outs

    def names(self, handle: int):
        """Where a call of the batch names `handle` (call_index, input_index, op), or None."""
        for k, call in enumerate(self.calls):
            for i, operand in enumerate(call.inputs):
                if operand.WhichOneof("source") == "handle" and operand.handle == handle:
                    return {"call_index": k, "input_index": i, "op": call.op}
        return None

    def flush(self):
        if not self.calls:
            self.state = "done"
            return
        # A call whose outputs no Tensor names any more (intermediates of the block, dropped
        # or rebound) is sent with discard: the server gives them no handles, frees them after
        # their last reader, and nothing has to release them later.
        alive = []
        for call, refs in zip(self.calls, self.outputs):
            outs = [ref() for ref in refs]
            if outs and all(t is None for t in outs):
                call.discard = True
            alive.append(outs)
        self.outputs = []
        try:
            writes = self.session._writes
            self.request.no_grad = bool(self.no_grad)
            self.request.context_id = self.context_id
            resp = self.session._execute(self.request)
            stamp = self.session._fetch_stamp(writes, self.calls)
        except BaseException:
            self.state = "failed"
            raise
        finally:
            self.keepalive = []
        self.state = "done"
        session = self.session
        for outs, result in zip(alive, resp.results):
            for k, info in enumerate(result.outputs):
                t = outs[k] if k < len(outs) else None
                if t is not None:
                    t._resolve(info)
                else:  # nobody can reach it: dropped since, or more outputs than handed out
                    session._queue_release(info.handle, info.nbytes)
            if stamp is not None and result.values:
                session._keep_values(outs, result, stamp)

    def discard(self):
        self.state = "failed"
        self.outputs = []
        self.keepalive = []


# -- a module call's forward batch -----------------------------------------------------------
# It is sent once it holds this many calls or request bytes, so that it stays far below the
# server's limits on calls per batch and message size (10,000 calls and 64 MiB by default,
# 2 MiB at the least) however long the forward is.
FORWARD_BATCH_CALLS = 1000
FORWARD_BATCH_BYTES = 1 << 20


def current_batch(session):
    """The batch a call joins: the session's open `with sess.batch():` block or traced
    function, else this thread's forward batch (each thread's module calls batch on their
    own), else None."""
    batch = session._batch
    return batch if batch is not None else getattr(session._local, "forward", None)


@contextlib.contextmanager
def forward_batch(session):
    """A module call's forward (tensord.nn.Module.__call__) in `session`: its ops are collected
    and sent as one Execute when the call returns, so that a forward costs one round trip
    instead of one per op, and intermediates nothing holds are sent discarded (the server
    frees them after their last reader, and fuses products with the ops after them).
    Whatever needs an output before then (its shape, its value, a backward) sends the calls so
    far first, and so does a call that cannot join them (another no_grad state or autodiff
    context, an output count the client cannot know): the forward behaves as if each op ran
    when called, and an error is raised by the module call. Inside a `with sess.batch():`
    block or a traced function the calls join those instead."""
    if current_batch(session) is not None or session.closed:
        yield
        return
    local = session._local
    local.forward = Batch(session, forward=True)
    try:
        yield
    except Exception:
        # The calls made before the forward raised run, as they would have one by one.
        batch, local.forward = local.forward, None
        if batch is not None:
            with contextlib.suppress(TensordError):
                batch.flush()
        raise
    except BaseException:  # an interrupt, an exit: nothing more is sent
        batch, local.forward = local.forward, None
        if batch is not None:
            batch.discard()
        raise
    batch, local.forward = local.forward, None
    if batch is not None:
        batch.flush()


def send_forward(batch) -> None:
    """Sends the open forward batch `batch` now; the module call goes on in a new one."""
    local = batch.session._local
    if getattr(local, "forward", None) is batch:
        local.forward = Batch(batch.session, forward=True)
    batch.flush()


def settle_writes(session) -> None:
    """Sends this thread's forward batch when a call in it may write a tensor (batch_norm's
    running statistics, an assign): what reads a tensor's value then sees the write, as it
    would one op at a time."""
    batch = getattr(session._local, "forward", None)
    if batch is not None and batch.writes:
        send_forward(batch)


def open_block(session):
    """The session's open `with sess.batch():` block or traced function, if any; this thread's
    forward batch is sent instead (what asks needs the calls made so far to have run)."""
    forward = getattr(session._local, "forward", None)
    if session._batch is None and forward is not None:
        send_forward(forward)
    return session._batch


def forward_batch_for(batch, num_outputs, no_grad: bool, context_id: int):
    """The batch a call made in a module call joins: the open forward batch `batch`, or a new
    one after `batch` is sent when the call cannot join it or it is full; None (`batch` sent,
    the call made on its own) where the client cannot know the call's output count (None)."""
    unknown = num_outputs is None
    full = len(batch.calls) >= FORWARD_BATCH_CALLS or batch.nbytes >= FORWARD_BATCH_BYTES
    if not unknown and not full and batch.accepts(no_grad, context_id):
        return batch
    send_forward(batch)
    return None if unknown else batch.session._local.forward
