"""Batch: the calls of a `with sess.batch():` block, made in place in one ExecuteRequest and
sent as one atomic Execute when the block ends; outputs no Tensor names by then are sent
discarded. A module call's forward collects its calls in a forward batch, sent when the call
returns or as soon as something needs its outputs (a shape, a value, a handle)."""
from __future__ import annotations

import weakref

from ._pb import service_pb2
from .errors import client_error
from .tensor import Tensor


class Batch:
    """Calls collected by `with sess.batch():`, sent as one Execute when the block ends."""

    def __init__(self, session, forward: bool = False):
        self.session = session
        # A forward batch (Session._forward_batch) is sent whenever its outputs are needed
        # before it ends, instead of refusing; a `with sess.batch():` block never is.
        self.forward = forward
        self.nbytes = 0  # a forward batch's request bytes so far
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
