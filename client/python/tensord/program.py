"""Programs: a step traced once, compiled on the server, then run in one round trip.

    step = sess.compile(train_step, x_example, y_example)   # like torch.jit.trace
    for x, y in data:
        loss = step(x, y)        # forward, backward and optimizer update on the server

`fn` runs once, on lazy stand-ins for its inputs: every op it calls is recorded (as inside
`sess.batch()`), `ctx.backward(loss)` records the program's backward and returns the
gradients as stand-ins, and every call after it (an optimizer's `step(grads)`) becomes one of
the program's updates, which run without recording. What `fn` returns (Tensors, in tuples, lists
or dicts) comes back from every run as numpy arrays. The server then runs the program once on
the examples and undoes it, so errors (an op not marked for autodiff, a shape mismatch) show
at compile time, naming the call. See docs/programs.md.
"""
from __future__ import annotations

import numpy as np

from . import dtypes
from ._pb import ops_pb2, service_pb2
from .batch import open_block
from .errors import client_error
from .tensor import Tensor

# The lazy stand-ins of a trace name ("param", k) or ("grad", leaf handle) instead of a call.
PARAM = "param"
GRAD = "grad"


class _Gradients(dict):
    """What ctx.backward returns while tracing: {leaf: lazy gradient} for every requires-grad
    leaf of the context, made on first use (only the gradients used become the backward's
    leaves)."""

    def __init__(self, trace, context_id):
        super().__init__()
        self._trace = trace
        self._context_id = context_id

    def _leaf(self, key) -> bool:
        if not isinstance(key, Tensor) or key.is_lazy or key.session is not self._trace.session:
            return False
        info = key._info
        return info.is_leaf and info.requires_grad and info.context_id == self._context_id

    def __missing__(self, key):
        if not self._leaf(key):
            raise KeyError(key)
        return self._trace.gradient_of(key, self)

    def __contains__(self, key):
        return self._leaf(key)

    def get(self, key, default=None):
        return self[key] if self._leaf(key) else default


class ProgramTrace:
    """The calls a traced function made: the forward, then (after its backward) the updates.
    It stands in for a batch (`sess._batch`), so ops return lazy Tensors."""

    def __init__(self, session, context_id: int):
        self.session = session
        self.context_id = context_id
        self.state = "open"
        self.calls = []      # forward OpCalls
        self.updates = []    # update OpCalls
        self.outputs = []    # per call: the lazy Tensors handed out
        # Every tensor the program names by handle; the Program holds them (its runs name
        # them) until it is released.
        self.keepalive = []
        self.parameters = []  # ProgramParameter
        self.parameter_shapes = []  # per parameter, its example's shape
        self.forward_no_grad = None
        self.roots = None    # CallOutputs once backward was called
        self.leaves = []     # leaf Tensors whose gradients the updates or results use
        self.fetch_gradients = False
        self.reduction = None  # GradientReduction of the backward's reduce=
        # tensord.compile's view of `.grad` during the trace (loss.backward() fills it); None
        # under sess.compile, whose functions take the gradients from ctx.backward(loss).
        self.grad_view = None

    # Called by Session.op for every op of the traced function.
    def add(self, call, n_outputs, no_grad: bool, context_id: int):
        where = {"call_index": len(self.calls) + len(self.updates), "op": call.op}
        if self.roots is None:
            if self.forward_no_grad is None:
                self.forward_no_grad = no_grad
            elif self.forward_no_grad != no_grad:
                raise client_error(
                    "INVALID_REQUEST", "tensord: a program's forward is either recorded or "
                    "no_grad as a whole; move the no_grad calls after backward", where)
            index = len(self.calls)
            self.calls.append(call)
        else:
            # After the backward every call is an update: there is nothing left to record for.
            index = len(self.calls) + len(self.updates)
            self.updates.append(call)
        outs = [Tensor(self.session, lazy=(self, index, k)) for k in range(n_outputs)]
        self.outputs.append(outs)
        return outs

    def parameter(self, k: int, value, name: str) -> Tensor:
        param = service_pb2.ProgramParameter(name=name)
        if isinstance(value, Tensor):
            info = self.session._own_info(value, {"parameter_index": k})
            param.example.handle = info.handle
            self.parameter_shapes.append(tuple(info.shape))
            self.keepalive.append(value)
        else:
            param.example.CopyFrom(self.session._operand(value, None, self.keepalive,
                                                         {"parameter_index": k}))
            self.parameter_shapes.append(tuple(np.shape(value)))
        self.parameters.append(param)
        return Tensor(self.session, lazy=(self, (PARAM, k), 0))

    def known_shape(self, value):
        """The shape of a stand-in of the traced function's inputs (every run binds one of the
        example's shape); None for any other pending tensor."""
        ref = value._lazy[1] if value._lazy is not None and value._lazy[0] is self else None
        return self.parameter_shapes[ref[1]] if isinstance(ref, tuple) and ref[0] == PARAM \
            else None

    def backward(self, ctx, loss, seed, reduce=None, reduce_op="mean") -> dict:
        if self.roots is not None:
            raise client_error("INVALID_REQUEST", "tensord: a program has one backward",
                               {"context_id": ctx.id})
        if seed is not None:
            raise client_error("INVALID_REQUEST", "tensord: a program's backward takes no seed: "
                               "reduce the roots to one element each", {"field": "seed"})
        if ctx.id != self.context_id:
            raise client_error("INVALID_REQUEST", f"tensord: the program records on context "
                               f"{self.context_id}, not {ctx.id}", {"context_id": ctx.id})
        roots = list(loss) if isinstance(loss, (list, tuple)) else [loss]
        self.roots = []
        for i, r in enumerate(roots):
            if not (isinstance(r, Tensor) and r.is_lazy and r._lazy[0] is self
                    and isinstance(r._lazy[1], int)):
                raise client_error("BAD_OPERAND", "tensord: a program's backward roots must be "
                                   "outputs of its own calls", {"root_index": i})
            self.roots.append(ops_pb2.CallOutput(call=r._lazy[1], output=r._lazy[2]))
        grads = _Gradients(self, ctx.id)
        if reduce is not None:
            # The reduced leaves are leaves of the backward whether or not the updates read them.
            self.reduction = self.session._gradient_reduction(reduce, reduce_op)
            for bucket in reduce:
                for leaf in bucket:
                    # (A tensor that is no leaf is left to the server to refuse, typed.)
                    if grads._leaf(leaf) and not any(known is leaf for known in self.leaves):
                        grads[leaf]  # noqa: B018  (makes it a leaf of the backward)
        return grads

    def gradient_of(self, leaf: Tensor, grads: dict) -> Tensor:
        self.keepalive.append(leaf)
        self.leaves.append(leaf)
        g = Tensor(self.session, lazy=(self, (GRAD, leaf._info.handle), 0))
        dict.__setitem__(grads, leaf, g)
        return g

    def names(self, handle: int):
        """Where the program names `handle` (a parameter's example, a call's operand, a leaf of
        the backward), or None."""
        for k, param in enumerate(self.parameters):
            if param.example.WhichOneof("source") == "handle" and param.example.handle == handle:
                return {"parameter_index": k}
        for k, call in enumerate(self.calls + self.updates):
            for i, operand in enumerate(call.inputs):
                if operand.WhichOneof("source") == "handle" and operand.handle == handle:
                    return {"call_index": k, "input_index": i, "op": call.op}
        if any(leaf._info.handle == handle for leaf in self.leaves):
            return {"field": "backward.leaves"}
        return None

    def operand(self, value: Tensor):
        """The wire operand of a stand-in of this trace that is not a call output: a
        parameter, or a gradient (which exists only after backward, so only updates see it)."""
        kind, index = value._lazy[1]
        if kind == PARAM:
            return ops_pb2.Operand(parameter=index)
        return ops_pb2.Operand(gradient=index)

    def discard(self):
        self.state = "failed"


class _GradView:
    """`.grad` while tensord.compile traces a step. Assignments (opt.zero_grad()) stay in the
    trace; after loss.backward() a requires-grad leaf of the trace's context whose `.grad`
    was None (before the step, or cleared in it) reads as its gradient stand-in, which
    opt.step() turns into the program's fused updates. Nothing a tensor holds changes."""

    def __init__(self, trace):
        self.trace = trace
        self.assigned = {}   # id(tensor) -> (tensor, value) set or filled during the trace
        self.before = {}     # the same, as they were when backward ran
        self.grads = None    # the _Gradients of the backward

    def get(self, tensor, stored):
        key = id(tensor)
        if key in self.assigned:
            return self.assigned[key][1]
        if self.grads is None or tensor not in self.grads:
            return stored
        prior = self.before[key][1] if key in self.before else stored
        if prior is not None:
            raise client_error(
                "INVALID_REQUEST", "tensord.compile: loss.backward() would add to a .grad "
                "computed before the compiled step (gradients accumulate); call "
                "opt.zero_grad() (or model.zero_grad()) in the step before loss.backward(), "
                "or once before the first call", {"field": "grad"})
        g = self.grads[tensor]
        self.assigned[key] = (tensor, g)
        return g

    def set(self, tensor, value):
        self.assigned[id(tensor)] = (tensor, value)

    def backward(self, roots, seed):
        if self.grads is not None:
            raise client_error("INVALID_REQUEST", "tensord.compile: a compiled step has one "
                               "loss.backward()", {"field": "backward"})
        trace = self.trace

        class _Ctx:  # what ProgramTrace.backward checks
            id = trace.context_id
        self.grads = trace.backward(_Ctx, roots, seed)
        self.before, self.assigned = self.assigned, {}


class Program:
    """A compiled program; call it with one value per example input."""

    def __init__(self, session, program_id: int, trace: ProgramTrace, returned, resp):
        self.session = session
        self.id = program_id
        self._keepalive = trace.keepalive
        self._returned = returned
        # Per call (forward, then updates): its outputs' TensorInfo (dtype, shape).
        self.compiled = [list(c.outputs) for c in resp.calls]
        # Per call: the fused op the server computes it in ("" when it runs as written), and
        # how many fused calls the program runs (a product with the bias, activation or
        # residual add after it: fused_linear, fused_conv2d, ...; a tree of pointwise calls:
        # fused_elementwise; none on a server started with --fusion=off).
        self.fused_ops = [c.fused_op for c in resp.calls]
        self.fused_calls = resp.fused_calls
        # The most bytes the server's trial run held above what the session held before it,
        # sampled after each call and after the backward: what a run needs of the quota, which
        # the program holds of it until released (docs/programs.md).
        self.peak_bytes = resp.peak_bytes
        self.released = False

    def __call__(self, *inputs):
        sess = self.session
        if self.released:
            raise client_error("PROGRAM_NOT_FOUND", f"tensord: program {self.id} was released",
                               {"program_id": self.id})
        req = service_pb2.RunProgramRequest(session_id=sess.id, program_id=self.id)
        keepalive = []
        for k, v in enumerate(inputs):
            req.inputs.append(sess._operand(v, None, keepalive, {"parameter_index": k}))
        sess._maybe_flush_releases()
        open_block(sess)  # inside a module call: what its forward collected runs first
        resp = sess._call("RunProgram", req)
        del keepalive
        return _unflatten(self._returned, resp)

    def release(self) -> None:
        if self.released:
            return
        self.released = True
        self._keepalive.clear()  # the tensors it named may go now
        if not self.session.closed:
            self.session._call("ReleaseProgram", service_pb2.ReleaseProgramRequest(
                session_id=self.session.id, program_id=self.id))

    def __repr__(self):
        return f"tensord.Program(id={self.id}, {len(self.compiled)} calls)"


def _flatten(value, trace):
    """What fn returned, with every lazy Tensor replaced by where its value will come from;
    marks the calls to fetch."""
    if isinstance(value, Tensor):
        if not value.is_lazy or value._lazy[0] is not trace:
            raise client_error("INVALID_REQUEST", "tensord: a compiled function returns tensors "
                               "it computed (outputs of its calls or gradients)", {})
        ref = value._lazy[1]
        if isinstance(ref, int):
            call = trace.calls[ref] if ref < len(trace.calls) else \
                trace.updates[ref - len(trace.calls)]
            call.fetch = True
            return ("call", ref, value._lazy[2])
        if ref[0] == GRAD:
            trace.fetch_gradients = True
            return ("grad", ref[1])
        raise client_error("INVALID_REQUEST", "tensord: a compiled function cannot return its "
                           "own input", {})
    if isinstance(value, (list, tuple)):
        return (type(value), [_flatten(v, trace) for v in value])
    if isinstance(value, dict):
        return (dict, {k: _flatten(v, trace) for k, v in value.items()})
    return ("const", value)


def _unflatten(spec, resp):
    kind = spec[0]
    if kind == "call":
        data = resp.results[spec[1]].values[spec[2]]
        return dtypes.tensor_data_to_array(data)
    if kind == "grad":
        return dtypes.tensor_data_to_array(resp.gradients[spec[1]])
    if kind == "const":
        return spec[1]
    if kind is dict:
        return {k: _unflatten(v, resp) for k, v in spec[1].items()}
    return kind(_unflatten(v, resp) for v in spec[1])


def compile_program(sess, fn, example_inputs, names=None, ctx=None) -> Program:
    """Session.compile's work: trace `fn` on stand-ins of `example_inputs` and compile it."""
    if open_block(sess) is not None:
        raise client_error("INVALID_REQUEST", "tensord: compile() cannot run inside "
                           "sess.batch(); end the batch first", {})
    context_id = sess._default_context_id(ctx)
    trace = ProgramTrace(sess, context_id)
    params = [trace.parameter(k, v, names[k] if names and k < len(names) else f"arg{k}")
              for k, v in enumerate(example_inputs)]
    sess._batch = trace
    try:
        returned = fn(*params)
        spec = _flatten(returned, trace)
    except BaseException:
        trace.discard()
        raise
    finally:
        sess._batch = None
    # Gradients are fetched in the order of the leaves: point the results there.
    order = {leaf._info.handle: i for i, leaf in enumerate(trace.leaves)}
    spec = _index_gradients(spec, order)
    req = service_pb2.CompileProgramRequest(
        session_id=sess.id, parameters=trace.parameters, calls=trace.calls,
        updates=trace.updates,
        context_id=context_id if (trace.roots is not None or _records(trace)) else 0,
        # Without a backward nothing would consume what a recorded forward keeps.
        no_grad=bool(trace.forward_no_grad) or trace.roots is None)
    if trace.roots is not None:
        req.backward.roots.extend(trace.roots)
        req.backward.leaves.extend(leaf._info.handle for leaf in trace.leaves)
        req.backward.fetch_gradients = trace.fetch_gradients
        if trace.reduction is not None:
            req.backward.reduce.CopyFrom(trace.reduction)
    resp = sess._call("CompileProgram", req)
    trace.state = "done"
    return Program(sess, resp.program_id, trace, spec, resp)


def _records(trace) -> bool:
    return any(c.requires_grad for c in trace.calls)


def _index_gradients(spec, order):
    kind = spec[0]
    if kind == "grad":
        return ("grad", order[spec[1]])
    if kind is dict:
        return (dict, {k: _index_gradients(v, order) for k, v in spec[1].items()})
    if kind in (list, tuple):
        return (kind, [_index_gradients(v, order) for v in spec[1]])
    return spec


