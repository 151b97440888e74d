"""tensord.compile: a PyTorch-style training step, traced once into a server-side program.

    model = tensord.nn.Sequential(...)
    opt = tensord.optim.Adam(model.parameters(), lr=1e-3)
    criterion = tensord.nn.CrossEntropyLoss()

    @tensord.compile
    def train_step(x, y):
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return loss

    for x, y in data:
        loss = train_step(x, y)      # numpy: one round trip (forward, backward, updates)

The first call traces the function with Session.compile (tensord.program) on stand-ins of its
arguments: every op is recorded, `loss.backward()` becomes the program's backward and fills
`.grad` of the parameters with its gradient stand-ins, `opt.step()` turns them into the
optimizer's fused update ops (the optimizer's state is created then, once), and
`opt.zero_grad()` clears the stand-ins. Later calls with arguments of the same shapes and
dtypes run that program in one round trip and return what the function returned, with every
tensor as a numpy array (as Session.compile's programs return). Arguments of new shapes or
dtypes trace the function again (one program per signature, up to `cache_size_limit`), or,
with `dynamic=False`, raise a clear error.

What a trace fixes: hyperparameters (`lr`, read when the step was traced: call `reset()` after
an lr scheduler's step), the Python control flow taken, and the tensors the step names
(parameters, optimizer state, constants). Compiled runs do not fill `.grad` on the client (the
gradients live within each run on the server); the parameters and the optimizer state are
updated on the server as by the eager loop.
"""
from __future__ import annotations

import functools

import numpy as np

from . import defaults, dtypes
from .errors import client_error
from .program import _GradView
from .tensor import Tensor


def _signature(value):
    """What a program's parameter is fixed to: dtype and shape (a scalar: its Python type)."""
    if isinstance(value, Tensor):
        return ("tensor", int(value._require_info().dtype), value.shape, value.device)
    if dtypes.is_torch_tensor(value):
        return ("torch", str(value.dtype), tuple(value.shape))
    if isinstance(value, (bool, int, float, np.generic)) and np.ndim(value) == 0:
        return ("scalar", type(value).__name__)
    array = np.asarray(value)
    return ("array", array.dtype.str, array.shape)


def _describe(sig) -> str:
    if sig[0] == "scalar":
        return sig[1]
    if sig[0] == "tensor":
        return f"Tensor(dtype={dtypes.name(dtypes.from_wire(sig[1]))}, shape={sig[2]})"
    return f"{sig[0]}(dtype={sig[1]}, shape={sig[2]})"


class CompiledFunction:
    """What tensord.compile returns: call it as the function; `programs` holds one compiled
    tensord.Program per argument signature traced so far."""

    def __init__(self, fn, session=None, dynamic=None, cache_size_limit: int = 8):
        functools.update_wrapper(self, fn)
        self.fn = fn
        self.session = session
        self.dynamic = dynamic
        self.cache_size_limit = int(cache_size_limit)
        self.programs: dict = {}   # signature -> Program
        self.traces = 0            # how many times fn was traced

    def _session_of(self, args):
        if self.session is not None:
            return self.session
        for a in args:
            if isinstance(a, Tensor):
                return a.session
        return defaults.get_session(required=True, what="tensord.compile (with no Tensor "
                                    "argument; or pass session=)")

    def __call__(self, *args, **kwargs):
        if kwargs:
            raise TypeError("tensord.compile: a compiled function takes positional arguments "
                            f"only (got {sorted(kwargs)}); bind the others with "
                            "functools.partial or a closure")
        key = tuple(_signature(a) for a in args)
        program = self.programs.get(key)
        if program is None or program.released:
            if self.programs and self.dynamic is False:
                old = next(iter(self.programs))
                raise client_error(
                    "INVALID_REQUEST", "tensord.compile(dynamic=False): the step was compiled "
                    f"for arguments ({', '.join(_describe(s) for s in old)}), called with "
                    f"({', '.join(_describe(s) for s in key)}); compile a new step, or leave "
                    "dynamic unset to retrace", {"field": "arguments"})
            if len(self.programs) >= self.cache_size_limit:
                raise client_error(
                    "INVALID_REQUEST", f"tensord.compile: {len(self.programs)} programs "
                    f"(cache_size_limit) were compiled for {self.__name__}, one per argument "
                    "signature; call reset() or pad the inputs to fewer shapes",
                    {"field": "arguments"})
            program = self._trace(self._session_of(args), args)
            self.programs[key] = program
        return program(*args)

    def _trace(self, sess, args):
        fn = self.fn

        def traced(*stand_ins):
            trace = sess._batch
            trace.grad_view = _GradView(trace)
            return fn(*stand_ins)

        self.traces += 1
        return sess.compile(traced, *args)

    def reset(self) -> None:
        """Releases every program: the next call traces again (after changing a
        hyperparameter, e.g. an lr scheduler's step, or the model's mode)."""
        programs, self.programs = self.programs, {}
        for p in programs.values():
            p.release()

    def __repr__(self):
        return f"tensord.compile({getattr(self.fn, '__name__', self.fn)!r}, " \
               f"{len(self.programs)} programs)"


def compile(fn=None, *, session=None, dynamic=None, cache_size_limit: int = 8, **torch_kwargs):
    """torch.compile for a tensord step: returns a CompiledFunction (see tensord.compiler).
    Also a decorator, with or without arguments. `session`: where the programs live (default:
    the session of the first Tensor argument, else the default session). `dynamic=False`
    raises instead of retracing on new argument shapes or dtypes. torch.compile's `mode`,
    `fullgraph`, `backend` and `options` are accepted and ignored (a tensord program is always
    the whole step)."""
    unknown = set(torch_kwargs) - {"mode", "fullgraph", "backend", "options", "disable"}
    if unknown:
        raise TypeError(f"tensord.compile: unexpected arguments {sorted(unknown)}")
    if fn is None:
        return lambda f: compile(f, session=session, dynamic=dynamic,
                                 cache_size_limit=cache_size_limit, **torch_kwargs)
    if torch_kwargs.get("disable"):
        return fn
    return CompiledFunction(fn, session=session, dynamic=dynamic,
                            cache_size_limit=cache_size_limit)


__all__ = ["compile", "CompiledFunction"]
