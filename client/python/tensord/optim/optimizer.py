"""The base of tensord's optimizers: parameter groups, gradients, one fused step per batch.

Each step is one no_grad batch holding one fused update op per parameter (the server's sgd,
adam and adamw ops), so the parameters and their optimizer state never leave the server. The
state (momentum buffers, moment estimates, step counts) is made of tensors of the session, on
each parameter's device, created at its first step; `opt.state[param]` holds them. The update
is atomic: when the batch fails, no parameter and no state tensor changes.
"""
from __future__ import annotations

import math
from collections import ChainMap
from collections.abc import Mapping

from .. import autograd
from ..autograd import hints
from ..errors import client_error
from ..tensor import Tensor


def bad_attribute(op: str, name: str, value, rule: str):
    # What the server would answer, raised at construction as torch.optim raises ValueError.
    return client_error("BAD_ATTRIBUTE", f"tensord: {op}: attribute {name!r} is {value!r}; {rule}",
                        {"op": op, "attribute": name}, compat=(ValueError,))


def check_at_least(op: str, name: str, value, lo: float = 0.0):
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and
            float(value) >= lo and not math.isnan(float(value))):
        raise bad_attribute(op, name, value, f"it must be a number >= {lo}")


class Optimizer:
    """Parameter groups updated by the server op `op` (see the subclasses).

    `params`: Tensors (`model.parameters()`, or a list of requires-grad leaves), or dicts
    {"params": [...], <hyperparameter overrides>} as torch.optim takes them. Each group of
    `param_groups` reads a hyperparameter it does not override from `defaults` at every step,
    so both `opt.param_groups[i]["lr"] = ...` (what the lr_scheduler classes do) and, for a
    group without its own value, `opt.defaults["lr"] = ...` change the next step.
    """

    op = ""
    state_names: tuple = ()

    def __init__(self, params, defaults: dict):
        self.defaults = dict(defaults)
        self.state: dict = {}  # param -> {state name: Tensor}
        self.param_groups: list = []
        self.session = None
        groups = [params] if isinstance(params, Tensor) else list(params)
        if not groups:
            raise client_error("BAD_OPERAND", f"tensord: {self.op}: the parameter list is empty",
                               {"op": self.op}, compat=(ValueError,))
        if not isinstance(groups[0], Mapping):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    @property
    def params(self) -> list:
        """Every parameter, group after group."""
        return [p for group in self.param_groups for p in group["params"]]

    def add_param_group(self, group) -> None:
        """Adds {"params": ..., overrides} (torch.optim.Optimizer.add_param_group)."""
        if not isinstance(group, Mapping):
            raise TypeError(f"tensord: {self.op}: a param group must be a dict, not "
                            f"{type(group).__name__}")
        params = group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        offset = len(self.params)
        for i, p in enumerate(params):
            if not isinstance(p, Tensor):
                raise client_error("BAD_OPERAND", f"tensord: {self.op}: parameter {offset + i} "
                                   f"is a {type(p).__name__}, not a tensord.Tensor",
                                   {"op": self.op, "input_index": offset + i}, compat=(TypeError,))
            if self.session is None:
                self.session = p.session
            elif p.session is not self.session:
                raise client_error("TENSOR_NOT_FOUND", f"tensord: {self.op}: parameter "
                                   f"{offset + i} belongs to another session than parameter 0",
                                   {"op": self.op, "input_index": offset + i})
        if not params:
            raise client_error("BAD_OPERAND", f"tensord: {self.op}: a parameter group is empty",
                               {"op": self.op}, compat=(ValueError,))
        known = {id(p) for p in self.params}
        if len({id(p) for p in params}) != len(params) or known & {id(p) for p in params}:
            raise ValueError("some parameters appear in more than one parameter group")
        overrides = {k: v for k, v in group.items() if k != "params"}
        self._check(ChainMap(overrides, self.defaults))
        self.param_groups.append(ChainMap({"params": params, **overrides}, self.defaults))

    def _check(self, hp) -> None:
        """Refuses a bad hyperparameter of a group (`hp`: its values over the defaults)."""

    def _needs_state(self, hp) -> bool:
        return bool(self.state_names)

    def _state_inputs(self, state: dict) -> list:
        return [state[n] for n in self.state_names]

    def _init_state(self, params) -> None:
        # One batch for the state of every parameter that has none yet; zeros as torch.optim
        # starts from (the momentum buffer's values are unused at step 0).
        sess = self.session
        made = []
        with sess._outside_trace(), sess.no_grad(), sess.batch():
            for p in params:
                tensors = {}
                for name in self.state_names:
                    if name == "step":
                        tensors[name] = sess.op("zeros", shape=[], dtype="f32", device=p.device)
                    else:
                        tensors[name] = sess.op("zeros_like", p)
                made.append((p, tensors))
        for p, tensors in made:
            self.state[p] = tensors

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Clears every parameter's .grad (None; zeros in place with set_to_none=False)."""
        autograd.zero_grad(self.params, set_to_none)

    def step(self, grads=None):
        """One update of every parameter that has a gradient: in `grads` ({param: grad}, as
        AutodiffContext.backward returns), or, without it, in `param.grad` (loss.backward()).
        Parameters without a gradient are left alone. A callable is a closure, as in
        torch.optim: called (with grad enabled) to compute the loss and gradients first; its
        result is returned."""
        loss = None
        if callable(grads):
            with autograd.enable_grad():
                loss = grads()
            grads = None
        todo = []
        for group in self.param_groups:
            for p in group["params"]:
                g = p.grad if grads is None else grads.get(p)
                if g is not None:
                    todo.append((p, g, group))
        if not todo:
            return loss
        fresh = [p for p, _, group in todo if self._needs_state(group) and p not in self.state]
        if fresh:
            self._init_state(fresh)
        sess = self.session
        with hints(), sess.no_grad(), sess.batch():
            for p, g, group in todo:
                state = self._state_inputs(self.state[p]) if self._needs_state(group) else []
                sess.op(self.op, p, g, *state, **self._attrs(group))
        return loss

    def _attrs(self, hp) -> dict:
        return {k: hp[k] for k in self.defaults}

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.defaults.items())
        groups = f", {len(self.param_groups)} groups" if len(self.param_groups) > 1 else ""
        return f"tensord.optim.{type(self).__name__}({len(self.params)} params{groups}, {args})"
