"""Adam and AdamW (torch.optim's) as the server's fused adam / adamw ops."""
from __future__ import annotations

from .optimizer import Optimizer, bad_attribute, check_at_least


class Adam(Optimizer):
    """torch.optim.Adam (L2 weight decay added to the gradient), with amsgrad and maximize."""

    op = "adam"
    global_names = ("amsgrad",)

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0.0, amsgrad: bool = False, maximize: bool = False):
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize)
        self._check(defaults)
        super().__init__(params, defaults)

    @property
    def state_names(self) -> tuple:
        # amsgrad is one setting for all groups: the state is made once per parameter.
        return ("exp_avg", "exp_avg_sq", "step") + \
            (("max_exp_avg_sq",) if self.defaults["amsgrad"] else ())

    def _saved_state(self, tensors: dict) -> dict:
        return {name: tensors[name] for name in ("step", "exp_avg", "exp_avg_sq",
                                                 "max_exp_avg_sq") if name in tensors}

    def _check(self, hp) -> None:
        check_at_least(self.op, "lr", hp["lr"])
        check_at_least(self.op, "eps", hp["eps"])
        check_at_least(self.op, "weight_decay", hp["weight_decay"])
        betas = tuple(hp["betas"])
        if len(betas) != 2 or not all(isinstance(b, (int, float)) and 0.0 <= b < 1.0
                                      for b in betas):
            raise bad_attribute(self.op, "betas", betas, "it takes two numbers in [0, 1)")
        if "amsgrad" in getattr(hp, "maps", [{}])[0]:
            raise bad_attribute(self.op, "amsgrad", hp["amsgrad"],
                                "it is one setting for all parameter groups")

    def _attrs(self, hp) -> dict:
        attrs = super()._attrs(hp)
        attrs["betas"] = [float(b) for b in attrs["betas"]]
        return attrs


class AdamW(Adam):
    """torch.optim.AdamW: Adam with decoupled weight decay (default 1e-2)."""

    op = "adamw"

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, maximize: bool = False):
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                         amsgrad=amsgrad, maximize=maximize)
