"""SGD (torch.optim.SGD) as the server's fused sgd op."""
from __future__ import annotations

from .optimizer import Optimizer, bad_attribute, check_at_least


class SGD(Optimizer):
    """torch.optim.SGD: momentum, dampening, Nesterov, weight decay, maximize."""

    op = "sgd"
    state_names = ("momentum_buffer", "step")

    def __init__(self, params, lr: float, momentum: float = 0.0, dampening: float = 0.0,
                 weight_decay: float = 0.0, nesterov: bool = False, maximize: bool = False):
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening,
                        weight_decay=weight_decay, nesterov=nesterov, maximize=maximize)
        self._check(defaults)
        super().__init__(params, defaults)

    def _check(self, hp) -> None:
        check_at_least("sgd", "lr", hp["lr"])
        check_at_least("sgd", "momentum", hp["momentum"])
        check_at_least("sgd", "weight_decay", hp["weight_decay"])
        if hp["nesterov"] and (hp["momentum"] <= 0 or hp["dampening"] != 0):
            raise bad_attribute("sgd", "nesterov", hp["nesterov"],
                                "it needs a positive momentum and zero dampening")

    def _needs_state(self, hp) -> bool:
        return hp["momentum"] != 0

    def _saved_state(self, tensors: dict) -> dict:
        # torch.optim.SGD keeps only the buffer: the step count is tensord's way of knowing
        # that the buffer was started.
        return {"momentum_buffer": tensors["momentum_buffer"]}

    def _loaded_state(self, values: dict, index) -> dict | None:
        buf = values.get("momentum_buffer")
        if buf is None:  # torch's momentum=0 state, or none: the buffer starts at next step
            return None
        return {"momentum_buffer": buf, "step": values.get("step", 1.0)}
