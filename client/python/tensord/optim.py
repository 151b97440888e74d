"""Optimizers whose step runs on the server, like torch.optim's SGD, Adam and AdamW.

    opt = tensord.optim.Adam(params, lr=1e-3)
    for batch in data:
        with sess.batch():
            loss = ...
        opt.step(ctx.backward(loss))

Each step is one no_grad batch holding one fused update op per parameter (the server's sgd,
adam and adamw ops), so the parameters and their optimizer state never leave the server. The
state (momentum buffers, moment estimates, step counts) is made of tensors of the session, on
each parameter's device, created at its first step; `opt.state[param]` holds them. The update
is atomic: when the batch fails, no parameter and no state tensor changes.

Hyperparameters live in `opt.defaults` (one group, as torch.optim's param_groups[0]) and are
read at every step, so a schedule may change `opt.defaults["lr"]` between steps.
"""
from __future__ import annotations

import math

from .errors import client_error
from .tensor import Tensor


def _bad_attribute(op: str, name: str, value, rule: str):
    # What the server would answer, raised at construction as torch.optim raises ValueError.
    return client_error("BAD_ATTRIBUTE", f"tensord: {op}: attribute {name!r} is {value!r}; {rule}",
                        {"op": op, "attribute": name}, compat=(ValueError,))


def _check_at_least(op: str, name: str, value, lo: float = 0.0):
    if not (isinstance(value, (int, float)) and not isinstance(value, bool) and
            float(value) >= lo and not math.isnan(float(value))):
        raise _bad_attribute(op, name, value, f"it must be a number >= {lo}")


class Optimizer:
    """One parameter group updated by the server op `op` (see the subclasses)."""

    op = ""
    state_names: tuple = ()

    def __init__(self, params, defaults: dict):
        self.params = list(params)
        if not self.params:
            raise client_error("BAD_OPERAND", f"tensord: {self.op}: the parameter list is empty",
                               {"op": self.op}, compat=(ValueError,))
        for i, p in enumerate(self.params):
            if not isinstance(p, Tensor):
                raise client_error("BAD_OPERAND", f"tensord: {self.op}: parameter {i} is a "
                                   f"{type(p).__name__}, not a tensord.Tensor",
                                   {"op": self.op, "input_index": i}, compat=(TypeError,))
        self.session = self.params[0].session
        for i, p in enumerate(self.params):
            if p.session is not self.session:
                raise client_error("TENSOR_NOT_FOUND", f"tensord: {self.op}: parameter {i} "
                                   "belongs to another session than parameter 0",
                                   {"op": self.op, "input_index": i})
        self.defaults = dict(defaults)
        self.state: dict = {}  # param -> {state name: Tensor}

    def _state_inputs(self, state: dict) -> list:
        return [state[n] for n in self.state_names]

    def _needs_state(self) -> bool:
        return bool(self.state_names)

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

    def step(self, grads: dict) -> None:
        """One update of every parameter that has a gradient in `grads` ({param: grad}, as
        AutodiffContext.backward returns); parameters without one are left alone."""
        todo = [p for p in self.params if grads.get(p) is not None]
        if not todo:
            return
        if self._needs_state():
            fresh = [p for p in todo if p not in self.state]
            if fresh:
                self._init_state(fresh)
        sess = self.session
        attrs = self._attrs()
        with sess.no_grad(), sess.batch():
            for p in todo:
                state = self._state_inputs(self.state[p]) if self._needs_state() else []
                sess.op(self.op, p, grads[p], *state, **attrs)

    def _attrs(self) -> dict:
        return dict(self.defaults)

    def __repr__(self):
        args = ", ".join(f"{k}={v!r}" for k, v in self.defaults.items())
        return f"tensord.optim.{type(self).__name__}({len(self.params)} params, {args})"


class SGD(Optimizer):
    """torch.optim.SGD: momentum, dampening, Nesterov, weight decay, maximize."""

    op = "sgd"

    def __init__(self, params, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False):
        _check_at_least("sgd", "lr", lr)
        _check_at_least("sgd", "momentum", momentum)
        _check_at_least("sgd", "weight_decay", weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise _bad_attribute("sgd", "nesterov", nesterov,
                                 "it needs a positive momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize))
        self.state_names = ("momentum_buffer", "step")

    def _needs_state(self) -> bool:
        return self.defaults["momentum"] != 0


class Adam(Optimizer):
    """torch.optim.Adam (L2 weight decay added to the gradient), with amsgrad and maximize."""

    op = "adam"

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False):
        _check_at_least(self.op, "lr", lr)
        _check_at_least(self.op, "eps", eps)
        _check_at_least(self.op, "weight_decay", weight_decay)
        betas = tuple(betas)
        if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0.0 <= b < 1.0
                                      for b in betas):
            raise _bad_attribute(self.op, "betas", betas, "it takes two numbers in [0, 1)")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      amsgrad=amsgrad, maximize=maximize))
        self.state_names = ("exp_avg", "exp_avg_sq", "step") + \
            (("max_exp_avg_sq",) if amsgrad else ())

    def _attrs(self) -> dict:
        attrs = dict(self.defaults)
        attrs["betas"] = [float(b) for b in attrs["betas"]]
        return attrs


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (default 1e-2)."""

    op = "adamw"

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize)


__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
