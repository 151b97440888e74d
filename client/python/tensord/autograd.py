"""PyTorch-style autograd on top of the server's autodiff contexts.

    loss.backward()            # fills .grad of every requires-grad leaf (accumulating)
    with tensord.no_grad():    # as torch.no_grad(): ops record nothing (also a decorator)
        ...

`Tensor.backward` runs the server's Backward on the context the tensor was recorded on and
adds each leaf's gradient to `leaf.grad` (None, as after `zero_grad()`, takes it as is), like
torch.Tensor.backward. The grad mode is thread-local, like PyTorch's, and holds for every
session (`sess.no_grad()` still holds for its own session only).

The two autodiff failures of the server (OperationNotMarkedForAutodiff,
AutodiffContextNotEnabled) keep their class, code and metadata when they surface through this
API (a module's forward, backward, an optimizer's step, load_state_dict); their message gains
one sentence saying what a PyTorch user does about them.
"""
from __future__ import annotations

import contextlib
import functools
import threading

from .errors import AutodiffContextNotEnabled, OperationNotMarkedForAutodiff, client_error

_mode = threading.local()


def is_grad_enabled() -> bool:
    """False inside tensord.no_grad() (on this thread)."""
    return getattr(_mode, "enabled", True)


def _set_enabled(enabled: bool) -> None:
    _mode.enabled = bool(enabled)


class _GradMode:
    """A context manager that is also a decorator, as torch's grad-mode classes."""

    enabled = True

    def __enter__(self):
        self._previous = is_grad_enabled()
        _set_enabled(self.enabled)
        return self

    def __exit__(self, *exc):
        _set_enabled(self._previous)
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with type(self)():
                return fn(*args, **kwargs)
        return wrapper


class no_grad(_GradMode):  # noqa: N801  (torch's name)
    """Ops inside record nothing, in every session (torch.no_grad())."""

    enabled = False


class enable_grad(_GradMode):  # noqa: N801
    """Ops inside record again (torch.enable_grad()), e.g. inside a no_grad() block; a
    session's own `sess.no_grad()` still holds."""

    enabled = True


class set_grad_enabled(_GradMode):  # noqa: N801
    """Sets the grad mode now (a function call) or for a block (a context manager)."""

    def __init__(self, mode: bool):
        self._previous = is_grad_enabled()
        self.enabled = bool(mode)
        _set_enabled(mode)

    def __enter__(self):
        return self

    def __call__(self, fn):
        raise TypeError("tensord: set_grad_enabled is not a decorator; use no_grad()")


# -- the server's autodiff errors, explained to a PyTorch user ---------------------------------
def _hint(exc) -> str:
    md = exc.metadata
    if isinstance(exc, OperationNotMarkedForAutodiff):
        op = md.get("op", "this op")
        return (f"PyTorch users: `{op}` has no autograd rule, so it cannot run on a tensor that "
                "requires grad while recording; run it under `with tensord.no_grad():` (as "
                "in-place updates of parameters run under torch.no_grad()), or pass "
                "`tensor.detach()` if only the value is needed (sess.ops() lists each op's "
                "marking)")
    state = md.get("context_state", "")
    if state == "disabled":
        return ("PyTorch users: this session was created with autodiff=False (inference only): "
                "use tensors that do not require grad, under `with tensord.no_grad():`, or open "
                "a session with autodiff enabled")
    tensor = md.get("tensor_id")
    which = f"tensor {tensor}" if tensor else "the tensor"
    return (f"PyTorch users: {which} is a parameter (or was computed from one) of autodiff "
            f"context {md.get('context_id', '?')}, which is {state or 'not open'}, so autograd "
            "cannot use it any more; its value stays readable. `model.requires_grad_()` (or "
            "`param.requires_grad_()`) makes the parameters leaves of the session's open context "
            "(sess.grad_context()) again; `tensor.detach()` gives the value alone")


def explain(exc):
    """Adds the PyTorch user's sentence to an autodiff error's message (once); returns it."""
    if isinstance(exc, (OperationNotMarkedForAutodiff, AutodiffContextNotEnabled)) and \
            not getattr(exc, "_pytorch_hint", False):
        exc.message = f"{exc.message}. {_hint(exc)}"
        exc.args = (exc.message,)
        exc._pytorch_hint = True
    return exc


@contextlib.contextmanager
def hints():
    """Re-raises the two autodiff errors of the block with explain()'s sentence."""
    try:
        yield
    except (OperationNotMarkedForAutodiff, AutodiffContextNotEnabled) as exc:
        explain(exc)
        raise


# -- backward ----------------------------------------------------------------------------------
def _context_of(root, index: int):
    """The AutodiffContext `root` was recorded on (a stand-in for a closed one, which the
    server then refuses with AutodiffContextNotEnabled)."""
    from .session import AutodiffContext
    info = root._require_info({"root_index": index})
    if not info.requires_grad or not info.context_id:
        raise client_error(
            "BACKWARD_ROOT_NOT_TRACKED", f"tensord: element {index} of tensors does not require "
            "grad (it was computed under no_grad, from tensors that do not require grad, or "
            "detached), so backward() has nothing to differentiate: give the parameters "
            "requires_grad=True, and compute the loss outside tensord.no_grad()",
            {"root_index": index, "context_id": info.context_id})
    session = root.session
    for ctx in session._contexts:
        if ctx.id == info.context_id:
            return ctx
    return AutodiffContext(session, info.context_id, "none")


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph: bool = False,
             inputs=None) -> None:
    """torch.autograd.backward: the gradients of `tensors` (a Tensor or a list) with respect
    to every requires-grad leaf they depend on are added to those leaves' `.grad`."""
    from .program import ProgramTrace
    if create_graph:
        raise NotImplementedError("tensord: backward(create_graph=True) (higher-order "
                                  "gradients) is not supported: the server's gradients are "
                                  "plain tensors")
    if inputs is not None:
        raise NotImplementedError("tensord: backward(inputs=...) is not supported; it fills "
                                  "the .grad of every leaf reached")
    roots = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
    if not roots:
        raise ValueError("tensord: backward() needs at least one tensor")
    session = roots[0].session
    if isinstance(session._batch, ProgramTrace):
        if session._batch.grad_view is not None:  # tensord.compile: .grad of the trace
            if retain_graph:
                raise NotImplementedError("tensord.compile: a compiled step has one backward; "
                                          "retain_graph=True is not supported there")
            session._batch.grad_view.backward(roots, grad_tensors)
            return
        raise client_error(
            "INVALID_REQUEST", "tensord: loss.backward() cannot be traced by sess.compile (the "
            "trace has no .grad to fill); inside a compiled function write "
            "`opt.step(sess.grad_context().backward(loss))`, or compile the PyTorch-style step "
            "with tensord.compile(step)", {"field": "backward"})
    ctx = _context_of(roots[0], 0)
    with hints():
        grads = ctx.backward(roots, seed=grad_tensors, retain_graph=bool(retain_graph))
    accumulate(session, grads)


def accumulate(session, grads: dict) -> None:
    """leaf.grad += gradient for each {leaf: gradient} (one batch for the sums)."""
    sums = []
    with session.no_grad(), session.batch():
        for leaf, grad in grads.items():
            if leaf.grad is None:
                leaf.grad = grad
            else:
                sums.append((leaf, leaf.grad + grad))
    for leaf, total in sums:
        leaf.grad = total


def zero_grad(params, set_to_none: bool = True) -> None:
    """Clears the .grad of `params`: None (the default, as PyTorch 2's), or zeros in place
    (set_to_none=False; one no_grad batch per session)."""
    params = list(params)
    from .program import ProgramTrace
    tracing = [p for p in params if isinstance(getattr(p.session, "_batch", None), ProgramTrace)
               and p.session._batch.grad_view is not None]
    if tracing:
        # Inside tensord.compile the gradients exist only within each run: clearing is
        # forgetting the stand-ins (set_to_none=False zeros nothing that outlives a run).
        for p in tracing:
            p.grad = None
        traced = {id(t) for t in tracing}
        params = [p for p in params if id(p) not in traced]
    held = [p for p in params if p.grad is not None]
    if set_to_none:
        for p in held:
            p.grad = None
        return
    by_session = {}
    for p in held:
        by_session.setdefault(p.grad.session, []).append(p.grad)
    for session, grads in by_session.items():
        with session.no_grad(), session.batch():
            for g in grads:
                session.op("assign", g, 0.0)


__all__ = ["no_grad", "enable_grad", "set_grad_enabled", "is_grad_enabled", "backward",
           "zero_grad", "explain", "hints"]
