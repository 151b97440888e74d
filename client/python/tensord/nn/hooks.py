"""Forward hooks of modules (torch.nn.Module.register_forward_pre_hook and
register_forward_hook): functions a module call runs before and after its forward, inside
the call's forward batch, each registered under a handle that removes it."""
from __future__ import annotations

import itertools
from collections import OrderedDict

_ids = itertools.count()


class RemovableHandle:
    """What a register_*_hook returns (torch.utils.hooks.RemovableHandle): remove() takes the
    hook out of its module (once; again is a no-op); usable as a context manager."""

    def __init__(self, hooks: OrderedDict, kwargs_ids: set | None = None):
        self.id = next(_ids)
        self._hooks = hooks
        self._kwargs_ids = kwargs_ids

    def remove(self) -> None:
        self._hooks.pop(self.id, None)
        if self._kwargs_ids is not None:
            self._kwargs_ids.discard(self.id)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


def add(hooks: OrderedDict, hook, prepend: bool, kwargs_ids: set,
        with_kwargs: bool) -> RemovableHandle:
    """Registers `hook` in `hooks` (first when `prepend`); `with_kwargs` hooks are listed in
    `kwargs_ids`."""
    if not callable(hook):
        raise TypeError(f"a hook must be callable, got {type(hook).__name__}")
    handle = RemovableHandle(hooks, kwargs_ids)
    hooks[handle.id] = hook
    if prepend:
        hooks.move_to_end(handle.id, last=False)
    if with_kwargs:
        kwargs_ids.add(handle.id)
    return handle


def call(module, forward, args: tuple, kwargs: dict):
    """forward(*args, **kwargs) between the module's pre-hooks and hooks, as PyTorch 2 runs
    them: a pre-hook may return new args (a tuple, or one value), or with_kwargs new
    (args, kwargs); a hook may return a new output."""
    state = module.__dict__
    for key, hook in list(state["_forward_pre_hooks"].items()):
        if key in state["_forward_pre_hooks_with_kwargs"]:
            result = hook(module, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError("forward pre-hook must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        else:
            result = hook(module, args)
            if result is not None:
                args = result if isinstance(result, tuple) else (result,)
    output = forward(*args, **kwargs)
    for key, hook in list(state["_forward_hooks"].items()):
        if key in state["_forward_hooks_with_kwargs"]:
            result = hook(module, args, kwargs, output)
        else:
            result = hook(module, args, output)
        if result is not None:
            output = result
    return output
