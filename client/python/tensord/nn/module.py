"""Module: the base class of every layer and model (torch.nn.Module).

Assigning a Parameter, a Module or (for a name registered with register_buffer) a buffer as an
attribute registers it, so parameters(), state_dict() and train()/eval() find it; names are
PyTorch's ("0.weight", "features.1.running_mean"). A buffer is a tensord Tensor (running
statistics) or a numpy array kept in the client (BatchNorm's num_batches_tracked).
"""
from __future__ import annotations

import contextlib
import copy
import itertools
from collections import OrderedDict, namedtuple
from collections.abc import Mapping

import numpy as np

from .. import autograd, defaults, dtypes
from . import hooks
from ..autograd import hints
from ..batch import forward_batch
from ..tensor import Tensor
from .parameter import Parameter, as_array, convert_module

_IncompatibleKeys = namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])


def _addindent(text: str, spaces: int) -> str:
    lines = text.split("\n")
    if len(lines) == 1:
        return text
    return lines[0] + "\n" + "\n".join(" " * spaces + line for line in lines[1:])


_forward_batching = True


def set_forward_batching(enabled: bool) -> bool:
    """Whether a module call sends its forward's ops as one Execute (the default) or each on
    its own, as tensord.Session.op does outside a module; returns the previous setting.
    Either way the forward's values, gradients and errors are the same
    (tensord.batch.forward_batch says how); one op at a time costs a round trip per op."""
    global _forward_batching
    previous, _forward_batching = _forward_batching, bool(enabled)
    return previous


def _forward_batch(module, args, kwargs):
    """The forward batch of a module call on these arguments: in the session of its first
    Tensor argument, else of the module's first parameter, else in the default session."""
    if _forward_batching:
        for value in itertools.chain(args, kwargs.values()):
            if isinstance(value, Tensor):
                return forward_batch(value.session)
        param = next(iter(module.parameters()), None)
        sess = param.session if param is not None else defaults.get_session()
        if sess is not None:
            return forward_batch(sess)
    return contextlib.nullcontext()


class Module:
    """Base class of layers and models: subclass it, create the layers in __init__ (after
    `super().__init__()`) and write forward(); call the module, not forward."""

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() takes no arguments")
        for name, value in (("training", True), ("_parameters", OrderedDict()),
                            ("_buffers", OrderedDict()), ("_non_persistent", set()),
                            ("_modules", OrderedDict()), ("_forward_pre_hooks", OrderedDict()),
                            ("_forward_pre_hooks_with_kwargs", set()),
                            ("_forward_hooks", OrderedDict()),
                            ("_forward_hooks_with_kwargs", set())):
            object.__setattr__(self, name, value)

    def forward(self, *args, **kwargs):
        raise NotImplementedError(f'Module [{type(self).__name__}] is missing the required '
                                  '"forward" function')

    def __call__(self, *args, **kwargs):
        with hints(), _forward_batch(self, args, kwargs):
            if self.__dict__.get("_forward_pre_hooks") or self.__dict__.get("_forward_hooks"):
                return hooks.call(self, self.forward, args, kwargs)
            return self.forward(*args, **kwargs)

    def register_forward_pre_hook(self, hook, *, prepend: bool = False,
                                  with_kwargs: bool = False):
        """hook(module, args) runs before each forward (inside the call's forward batch) and
        may return new args; with_kwargs=True: hook(module, args, kwargs) returning None or
        (args, kwargs). Returns a handle whose remove() unregisters it."""
        return hooks.add(self._forward_pre_hooks, hook, prepend,
                         self._forward_pre_hooks_with_kwargs, with_kwargs)

    def register_forward_hook(self, hook, *, prepend: bool = False, with_kwargs: bool = False):
        """hook(module, args, output) runs after each forward and may return a new output;
        with_kwargs=True: hook(module, args, kwargs, output). Returns a handle whose remove()
        unregisters it."""
        return hooks.add(self._forward_hooks, hook, prepend, self._forward_hooks_with_kwargs,
                         with_kwargs)

    # -- registration ------------------------------------------------------------------------
    def _check_name(self, name, what: str) -> None:
        if "_parameters" not in self.__dict__:
            raise AttributeError(f"cannot assign {what} before Module.__init__() call")
        if not isinstance(name, str):
            raise TypeError(f"{what} name should be a string. Got {type(name).__name__}")
        if name == "" or "." in name:
            raise KeyError(f'{what} name can\'t be empty or contain ".", got: {name!r}')

    def register_parameter(self, name: str, param) -> None:
        self._check_name(name, "parameter")
        if hasattr(self, name) and name not in self._parameters:
            raise KeyError(f"attribute '{name}' already exists")
        if param is not None and not isinstance(param, Parameter):
            raise TypeError(f"cannot assign '{type(param).__name__}' object to parameter "
                            f"'{name}' (tensord.nn.Parameter or None required)")
        self._parameters[name] = param

    def register_buffer(self, name: str, tensor, persistent: bool = True) -> None:
        self._check_name(name, "buffer")
        if hasattr(self, name) and name not in self._buffers:
            raise KeyError(f"attribute '{name}' already exists")
        if tensor is not None and not isinstance(tensor, (Tensor, np.ndarray)):
            raise TypeError(f"cannot assign '{type(tensor).__name__}' object to buffer "
                            f"'{name}' (a tensord Tensor, numpy array or None required)")
        self._buffers[name] = tensor
        (self._non_persistent.discard if persistent else self._non_persistent.add)(name)

    def add_module(self, name: str, module) -> None:
        self._check_name(name, "module")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{type(module).__name__} is not a Module subclass")
        self._modules[name] = module

    register_module = add_module

    def __setattr__(self, name, value):
        d = self.__dict__
        params, buffers, modules = d.get("_parameters"), d.get("_buffers"), d.get("_modules")
        if isinstance(value, Parameter) or (params is not None and name in params):
            for holder in (d, buffers, modules):
                if holder is not None and holder is not params:
                    holder.pop(name, None)
            self.register_parameter(name, value)
        elif isinstance(value, Module) or (modules is not None and name in modules):
            if modules is None:
                raise AttributeError("cannot assign module before Module.__init__() call")
            for holder in (d, params, buffers):
                holder.pop(name, None)
            self.add_module(name, value)
        elif buffers is not None and name in buffers:
            persistent = name not in self._non_persistent
            self.register_buffer(name, value, persistent)
        else:
            object.__setattr__(self, name, value)

    def __getattr__(self, name):
        d = self.__dict__
        for holder in ("_parameters", "_buffers", "_modules"):
            if holder in d and name in d[holder]:
                return d[holder][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __delattr__(self, name):
        for holder in (self._parameters, self._buffers, self._modules):
            if name in holder:
                del holder[name]
                self._non_persistent.discard(name)
                return
        object.__delattr__(self, name)

    # -- traversal ---------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix: str = "", remove_duplicate: bool = True):
        memo = set() if memo is None else memo
        if remove_duplicate:
            if id(self) in memo:
                return
            memo.add(id(self))
        yield prefix, self
        for name, module in self._modules.items():
            if module is not None:
                yield from module.named_modules(memo, f"{prefix}.{name}" if prefix else name,
                                                remove_duplicate)

    def modules(self):
        for _, module in self.named_modules():
            yield module

    def named_children(self):
        seen = set()
        for name, module in self._modules.items():
            if module is not None and id(module) not in seen:
                seen.add(id(module))
                yield name, module

    def children(self):
        for _, module in self.named_children():
            yield module

    def _named_members(self, holder: str, prefix: str, recurse: bool, remove_duplicate: bool):
        modules = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        seen = set()
        for module_prefix, module in modules:
            for name, value in getattr(module, holder).items():
                if value is None or (remove_duplicate and id(value) in seen):
                    continue
                seen.add(id(value))
                yield (f"{module_prefix}.{name}" if module_prefix else name), value

    def named_parameters(self, prefix: str = "", recurse: bool = True,
                         remove_duplicate: bool = True):
        yield from self._named_members("_parameters", prefix, recurse, remove_duplicate)

    def parameters(self, recurse: bool = True):
        for _, param in self.named_parameters(recurse=recurse):
            yield param

    def named_buffers(self, prefix: str = "", recurse: bool = True,
                      remove_duplicate: bool = True):
        yield from self._named_members("_buffers", prefix, recurse, remove_duplicate)

    def buffers(self, recurse: bool = True):
        for _, buf in self.named_buffers(recurse=recurse):
            yield buf

    def apply(self, fn):
        for module in self.children():
            module.apply(fn)
        fn(self)
        return self

    # -- modes and gradients -----------------------------------------------------------------
    def train(self, mode: bool = True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for module in self.children():
            module.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad: bool = True):
        """Every parameter's requires_grad_(): False freezes them; True makes them leaves of
        the session's open context (also after the context they were made in was closed)."""
        for param in self.parameters():
            param.requires_grad_(requires_grad)
        return self

    def zero_grad(self, set_to_none: bool = True) -> None:
        autograd.zero_grad(self.parameters(), set_to_none)

    # -- dtype and device --------------------------------------------------------------------
    def to(self, *args, dtype=None, device=None, **kwargs):
        """to(dtype), to(device), to(device, dtype), to(dtype=, device=): converts the floating
        point parameters and buffers (dtype) and all of them (device), in one batch; each
        Parameter keeps its identity (and stays a requires-grad leaf)."""
        for arg in args:
            if isinstance(arg, Tensor):
                dtype, device = arg.dtype, arg.device
            elif _is_dtype(arg):
                dtype = arg
            else:
                device = str(arg)
        if kwargs.keys() - {"non_blocking", "memory_format"}:
            raise TypeError(f"to() got unexpected arguments {sorted(kwargs)}")
        convert_module(self, dtype, device)
        return self

    def float(self):
        return self.to(dtype="f32")

    def double(self):
        return self.to(dtype="f64")

    def half(self):
        return self.to(dtype="f16")

    def bfloat16(self):
        return self.to(dtype="bf16")

    def cpu(self):
        return self.to(device="cpu")

    # -- state_dict --------------------------------------------------------------------------
    def _state_entries(self, prefix: str = ""):
        """(name, holder dict, key) of every entry of the state_dict, in PyTorch's order."""
        for name, value in self._parameters.items():
            if value is not None:
                yield prefix + name, self._parameters, name
        for name, value in self._buffers.items():
            if value is not None and name not in self._non_persistent:
                yield prefix + name, self._buffers, name
        for name, module in self._modules.items():
            if module is not None:
                yield from module._state_entries(prefix + name + ".")

    def state_dict(self, *args, destination=None, prefix: str = "", keep_vars: bool = False):
        """OrderedDict {PyTorch's name: value}: numpy copies of the parameters and buffers (the
        live tensord Tensors with keep_vars=True). `to_torch_state_dict(sd)` makes it what
        torch.nn.Module.load_state_dict takes; `np.savez(path, **sd)` saves it."""
        if args:
            raise TypeError("state_dict() takes keyword arguments only")
        out = OrderedDict() if destination is None else destination
        for name, holder, key in self._state_entries(prefix):
            value = holder[key]
            if keep_vars:
                out[name] = value
            elif isinstance(value, Tensor):
                out[name] = value.numpy()
            else:
                out[name] = np.array(value, copy=True)
        return out

    def load_state_dict(self, state_dict, strict: bool = True):
        """Copies `state_dict` (numpy arrays, torch tensors as torch's state_dict() gives them,
        or tensord Tensors) into the parameters and buffers in place: one no_grad batch of
        `assign`s per session, all or nothing. Returns (missing_keys, unexpected_keys); with
        strict, either raises a RuntimeError worded as PyTorch's, as does a shape mismatch."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        entries = {name: (holder, key) for name, holder, key in self._state_entries()}
        missing = [k for k in entries if k not in state_dict]
        unexpected = [k for k in state_dict if k not in entries]
        errors = []
        if strict:
            if unexpected:
                errors.append("Unexpected key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in unexpected) + ". ")
            if missing:
                errors.append("Missing key(s) in state_dict: " +
                              ", ".join(f'"{k}"' for k in missing) + ". ")
        writes = []
        for name, (holder, key) in entries.items():
            if name not in state_dict:
                continue
            target, value = holder[key], state_dict[name]
            if not (isinstance(value, Tensor) and value.session is getattr(target, "session",
                                                                           None)):
                value = as_array(value)
            shape, want = tuple(value.shape), tuple(np.shape(target) if isinstance(
                target, np.ndarray) else target.shape)
            if shape != want:
                errors.append(f"size mismatch for {name}: copying a param with shape {shape} "
                              f"from checkpoint, the shape in current model is {want}.")
                continue
            writes.append((holder, key, target, value))
        if errors:
            raise RuntimeError(f"Error(s) in loading state_dict for {type(self).__name__}:\n\t"
                               + "\n\t".join(errors))
        by_session = OrderedDict()
        for holder, key, target, value in writes:
            if isinstance(target, np.ndarray):
                holder[key] = np.array(value, dtype=target.dtype)
            else:
                by_session.setdefault(target.session, []).append((target, value))
        for sess, pairs in by_session.items():
            with hints(), sess.no_grad(), sess.batch():
                for target, value in pairs:
                    sess.op("assign", target, value)
        return _IncompatibleKeys(missing, unexpected)

    # -- torch ----------------------------------------------------------------------------------
    def to_torch(self):
        """The equivalent torch.nn model: the same tree of torch.nn layers (each built with
        this layer's arguments and dtype), this model's parameters and buffers copied, training
        flags and frozen parameters kept. Converts tensord.nn's layers and Sequential /
        ModuleList / ModuleDict trees of them; a subclass with its own forward() raises
        NotImplementedError naming it (tensord.nn.from_torch is the other way)."""
        from .interop import to_torch
        return to_torch(self)

    # -- copying -----------------------------------------------------------------------------
    def __deepcopy__(self, memo):
        """copy.deepcopy(module), as PyTorch's: a module of the same structure whose parameters
        and buffers are copies (the server's `clone`, one no_grad batch per session) of this
        one's; each Parameter copy is a requires-grad leaf of the session's open context (as
        the original is one), with no .grad. TransformerEncoder makes its layers so."""
        tensors = OrderedDict()
        for module in self.modules():
            for holder in (module._parameters, module._buffers, module.__dict__):
                for value in holder.values():
                    if isinstance(value, Tensor) and id(value) not in memo:
                        tensors[id(value)] = value
                    elif type(value).__name__ in ("Session", "Client", "AutodiffContext") and \
                            type(value).__module__.startswith("tensord."):
                        memo[id(value)] = value  # shared, as a connection is
        by_session = OrderedDict()
        for t in tensors.values():
            by_session.setdefault(t.session, []).append(t)
        for sess, originals in by_session.items():
            ctx = sess.grad_context() if sess.autodiff_enabled else None
            with hints(), sess.no_grad(), sess.batch():
                clones = []
                for t in originals:
                    c = sess.op("clone", t)
                    if isinstance(t, Parameter) and t.requires_grad:
                        c = sess.op("detach", c, requires_grad=True, ctx=ctx)
                    clones.append(c)
            for t, c in zip(originals, clones):
                memo[id(t)] = Parameter._adopt(c) if isinstance(t, Parameter) else c
        new = type(self).__new__(type(self))
        memo[id(self)] = new
        for key, value in self.__dict__.items():
            object.__setattr__(new, key, copy.deepcopy(value, memo))
        return new

    # -- printing ----------------------------------------------------------------------------
    def extra_repr(self) -> str:
        return ""

    def _get_name(self) -> str:
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): " + _addindent(repr(module), 2)
                       for key, module in self._modules.items()]
        lines = extra_lines + child_lines
        text = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                text += extra_lines[0]
            else:
                text += "\n  " + "\n  ".join(lines) + "\n"
        return text + ")"

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self._parameters) | set(self._buffers) |
                      set(self._modules))

    def _session(self):
        """The session of this module's first tensor, else the default one."""
        for _, value in self._named_members("_parameters", "", True, True):
            return value.session
        for _, value in self._named_members("_buffers", "", True, True):
            if isinstance(value, Tensor):
                return value.session
        return defaults.get_session()


def _is_dtype(value) -> bool:
    try:
        dtypes.to_numpy_dtype(value)
        return True
    except TypeError:
        return False


def to_torch_state_dict(state_dict):
    """{name: torch.Tensor} of a tensord state_dict (numpy arrays or Tensors), for
    torch.nn.Module.load_state_dict (which casts each to its parameter's dtype). An optimizer's
    state_dict ({"state": ..., "param_groups": [...]}, tensord.optim's) keeps its structure
    with each state value a torch tensor, for torch.optim.Optimizer.load_state_dict."""
    import torch

    def convert(v):
        return torch.from_numpy(np.array(as_array(v), copy=True))

    if set(state_dict) == {"state", "param_groups"} and isinstance(
            state_dict["param_groups"], (list, tuple)):
        return {"state": {index: {name: None if v is None else convert(v)
                                  for name, v in values.items()}
                          for index, values in state_dict["state"].items()},
                "param_groups": copy.deepcopy(list(state_dict["param_groups"]))}
    return OrderedDict((k, convert(v)) for k, v in state_dict.items())


__all__ = ["Module", "to_torch_state_dict"]
