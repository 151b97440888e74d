"""The base of tensord's optimizers: parameter groups, gradients, one fused step per batch.

Each step is one no_grad batch holding one fused update op per parameter (the server's sgd,
adam and adamw ops), so the parameters and their optimizer state never leave the server. The
state (momentum buffers, moment estimates, step counts) is made of tensors of the session, on
each parameter's device, created at its first step; `opt.state[param]` holds them. The update
is atomic: when the batch fails, no parameter and no state tensor changes.

`state_dict()` / `load_state_dict()` use torch.optim's format ({"state": {param index: {name:
value}}, "param_groups": [{hyperparameters, "params": [indices]}]}), with numpy arrays for the
values (`tensord.nn.to_torch_state_dict` makes them torch tensors for a torch optimizer); a
torch optimizer's state_dict() loads as it is.
"""
from __future__ import annotations

import copy
import math
from collections import ChainMap
from collections.abc import Mapping
from itertools import chain

import numpy as np

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
    # Hyperparameters that are one setting for all groups (Adam's amsgrad).
    global_names: tuple = ()

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

    def _new_state(self, p) -> dict:
        """Zeros for each state tensor of `p` (to be called inside a batch): as torch.optim
        starts from (the momentum buffer's values are unused at step 0); step is 0-d f32."""
        sess = self.session
        tensors = {}
        for name in self.state_names:
            if name == "step":
                tensors[name] = sess.op("zeros", shape=[], dtype="f32", device=p.device)
            else:
                tensors[name] = sess.op("zeros_like", p)
        return tensors

    def _init_state(self, params) -> None:
        # One batch for the state of every parameter that has none yet.
        sess = self.session
        with sess._outside_trace(), sess.no_grad(), sess.batch():
            made = [(p, self._new_state(p)) for p in params]
        for p, tensors in made:
            self.state[p] = tensors

    # -- state_dict ----------------------------------------------------------------------------
    def _saved_state(self, tensors: dict) -> dict:
        """The entries of a parameter's state that torch.optim's state_dict() holds, in its
        order (each subclass: its torch namesake's)."""
        return dict(tensors)

    def _loaded_state(self, values: dict, index) -> dict | None:
        """{state name: value} to write into a parameter's state tensors from a saved entry
        (the inverse of _saved_state); None: the parameter has no state yet."""
        missing = [n for n in self.state_names if n not in values]
        if missing:
            raise ValueError(f"tensord: {self.op}: the state of parameter {index} lacks "
                             f"{missing}")
        return {n: values[n] for n in self.state_names}

    def state_dict(self) -> dict:
        """torch.optim.Optimizer.state_dict(): {"state": {index: {name: numpy array}},
        "param_groups": [{every hyperparameter of the group, "params": [indices]}]}, the
        parameters numbered in group order from 0. The values are numpy copies of the state
        tensors (a 0-d float32 array for a step count, as torch's 0-d tensor);
        `tensord.nn.to_torch_state_dict(sd)` converts them for a torch optimizer."""
        ids: dict = {}
        groups = []
        for group in self.param_groups:
            packed = {k: group[k] for k in group if k != "params"}
            packed["params"] = [ids.setdefault(id(p), len(ids)) for p in group["params"]]
            groups.append(packed)
        state = {}
        for p in self.params:
            if p in self.state:
                state[ids[id(p)]] = {name: t.numpy()
                                     for name, t in self._saved_state(self.state[p]).items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict) -> None:
        """torch.optim.Optimizer.load_state_dict(): takes what state_dict() returns, or a torch
        optimizer's state_dict() as it is (torch tensors). The groups must match this
        optimizer's in number and size (ValueError, as torch); each group takes the saved
        hyperparameters, each parameter the saved state (parameters absent from it lose
        theirs), values cast to the state tensors' dtypes on the server. The state is written
        with `assign` into the existing state tensors (or new ones) in one no_grad batch: all
        or nothing."""
        if not isinstance(state_dict, Mapping):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        groups, saved_groups = self.param_groups, list(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(s["params"] for s in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))
        # A setting for all groups (amsgrad) is taken when the saved groups agree on it; it
        # changes the defaults (and which state tensors there are).
        defaults = dict(self.defaults)
        for name in self.global_names:
            values = {repr(s[name]): s[name] for s in saved_groups if name in s}
            if len(values) > 1:
                raise bad_attribute(self.op, name, list(values.values()),
                                    "it is one setting for all parameter groups")
            defaults.update({name: v for v in values.values()})
        new_groups = []
        for g, saved in zip(groups, saved_groups):
            overrides = copy.deepcopy({k: v for k, v in saved.items()
                                       if k != "params" and k not in self.global_names})
            self._check(ChainMap(overrides, defaults))
            new_groups.append(ChainMap({"params": g["params"], **overrides}, self.defaults))
        reuse = all(defaults[n] == self.defaults[n] for n in self.global_names)
        old_defaults = dict(self.defaults)
        self.defaults.update(defaults)  # (the groups read it; restored if the load fails)
        try:
            self._load_state(state_dict["state"], id_map, new_groups, reuse)
        except BaseException:
            self.defaults.clear()
            self.defaults.update(old_defaults)
            raise
        self.param_groups[:] = new_groups

    def _load_state(self, saved_state, id_map, groups, reuse: bool) -> None:
        writes = []
        for index, values in saved_state.items():
            if index not in id_map:
                raise ValueError(f"tensord: {self.op}: the loaded state names parameter "
                                 f"{index!r}, which no parameter group holds")
            p = id_map[index]
            if not self._needs_state(groups[self._group_of(p, groups)]):
                continue
            loaded = self._loaded_state(dict(values), index)
            if loaded is None:
                continue
            for name, value in loaded.items():
                want = () if name == "step" else tuple(p.shape)
                if tuple(np.shape(value)) != want:
                    raise ValueError(f"tensord: {self.op}: the state {name!r} of parameter "
                                     f"{index} has the shape {tuple(np.shape(value))}, "
                                     f"not {want}")
            writes.append((p, loaded))
        sess = self.session
        made = []
        if writes:
            with sess._outside_trace(), hints(), sess.no_grad(), sess.batch():
                for p, loaded in writes:
                    tensors = (self.state.get(p) if reuse else None) or self._new_state(p)
                    for name, value in loaded.items():
                        if isinstance(value, Tensor) and value.session is not sess:
                            value = value.numpy()
                        sess.op("assign", tensors[name], value)
                    made.append((p, tensors))
        self.state.clear()
        self.state.update(made)

    @staticmethod
    def _group_of(p, groups) -> int:
        for i, group in enumerate(groups):
            if any(q is p for q in group["params"]):
                return i
        raise KeyError("parameter not in any group")

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
