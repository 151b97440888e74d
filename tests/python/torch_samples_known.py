"""The known differences between tensord and PyTorch that PyTorch's OpInfo samples show
(torch_samples.py runs the samples): each entry names an op, a sample form, the outcome it has
and why, in one of three groups: a server bug to fix, a PyTorch form tensord should serve, or
where tensord is deliberately stricter. check() fails on any outcome no entry explains and on
an entry that no longer holds; scripts/ops-doc.py renders the list into docs/ops.md.
"""
from __future__ import annotations

import dataclasses
from typing import Callable, Optional

import torch


BUG = "server bug to fix"
PYTORCH_FORM = "PyTorch form tensord should serve"
STRICT = "tensord is deliberately stricter"
GROUPS = (BUG, PYTORCH_FORM, STRICT)


@dataclasses.dataclass(frozen=True)
class Known:
    """A known difference: op, the sample form (a predicate on the Sample and its words), the
    outcome it has (with the server's ErrorReason for refusals) and why. Every sample of the
    form must have that outcome (a form that passes again is stale) and the form must occur in
    each listed dtype. rewrite(attrs) -> attrs, where given, respells the call as tensord
    spells it today; the respelled sample must pass (the numerics are checked meanwhile)."""
    op: str
    form: str
    outcome: str  # mismatch | refused | untranslatable
    group: str  # BUG | PYTORCH_FORM | STRICT
    why: str
    match: Callable = lambda s: True
    reason: str = ""
    dtypes: tuple = ("f64", "f32")
    variant: Optional[str] = None  # None: any variant
    rewrite: Optional[Callable] = None

    def covers(self, o) -> bool:  # o: a torch_samples.Outcome
        """The outcome's sample is of this form (whatever its outcome)."""
        return (o.sample.name == self.op and o.dt in self.dtypes and
                (self.variant is None or o.sample.variant == self.variant) and
                bool(self.match(o.sample)))

    def matches(self, o) -> bool:
        return self.covers(o) and o.kind == self.outcome and \
            (not self.reason or o.reason == self.reason)


def _tensor(x) -> bool:
    return isinstance(x, torch.Tensor)


def _set(name: str, value) -> Callable:
    def rewrite(attrs: dict) -> dict:
        attrs[name] = value
        return attrs
    return rewrite


KNOWN: list = [
    # ---- (b) PyTorch forms tensord should serve
    Known("norm", "p='fro'", "refused", PYTORCH_FORM, "p is a float only ('fro' is p=2 over the "
          "dims)", match=lambda s: s.get("p") == "fro", reason="BAD_ATTRIBUTE",
          rewrite=_set("p", 2.0)),
    Known("norm", "p='nuc'", "refused", PYTORCH_FORM, "not served yet: the nuclear norm (sum "
          "of singular values)", match=lambda s: s.get("p") == "nuc", reason="BAD_ATTRIBUTE"),
    Known("interpolate", "mode='area'", "refused", PYTORCH_FORM, "not served yet: mode 'area' "
          "(adaptive average pooling)", variant="area", reason="BAD_ATTRIBUTE"),
    Known("interpolate", "mode='bicubic'", "refused", PYTORCH_FORM, "not served yet: mode "
          "'bicubic'", variant="bicubic", reason="BAD_ATTRIBUTE"),
    Known("clamp", "a tensor min and/or max", "untranslatable", PYTORCH_FORM,
          "not served yet: PyTorch's clamp(Tensor min, Tensor max) overload (bounds that "
          "broadcast); tensord's min/max are float attributes",
          match=lambda s: _tensor(s.get("min")) or _tensor(s.get("max"))),
    Known("masked_fill", "value as a 0-d tensor", "untranslatable", PYTORCH_FORM,
          "not served yet: PyTorch's masked_fill(mask, Tensor value) overload (differentiable "
          "in value); tensord's value is a float attribute",
          match=lambda s: _tensor(s.get("value"))),
    Known("narrow", "start as a 0-d int64 tensor", "untranslatable", PYTORCH_FORM,
          "not served yet: PyTorch's narrow(dim, Tensor start, length) overload; tensord's start "
          "is an int attribute", match=lambda s: _tensor(s.get("start"))),
    Known("max", "max(input, other): the binary form", "untranslatable", PYTORCH_FORM,
          "torch.max(a, b) is maximum(a, b); tensord's max is the reduction only",
          variant="binary"),
    Known("min", "min(input, other): the binary form", "untranslatable", PYTORCH_FORM,
          "torch.min(a, b) is minimum(a, b); tensord's min is the reduction only",
          variant="binary"),
    Known("binary_cross_entropy_with_logits", "pos_weight= without weight=", "untranslatable",
          PYTORCH_FORM, "operands are positional, so an optional input (weight) cannot be left "
          "out before a given one (pos_weight); the wire needs an 'absent' operand or named "
          "inputs", match=lambda s: s.get("weight") is None and _tensor(s.get("pos_weight"))),

    # ---- (c) deliberate strictness
    Known("layer_norm", "eps < 0", "refused", STRICT,
          "a negative eps can make the variance term negative (NaN); PyTorch does not check",
          match=lambda s: (s.get("eps") or 0) < 0, reason="BAD_ATTRIBUTE"),
    Known("group_norm", "eps < 0", "refused", STRICT,
          "a negative eps can make the variance term negative (NaN); PyTorch does not check",
          match=lambda s: (s.get("eps") or 0) < 0, reason="BAD_ATTRIBUTE"),
    Known("hardtanh", "min_val > max_val", "refused", STRICT,
          "an empty range; PyTorch returns max_val everywhere",
          match=lambda s: s.get("min_val", -1.0) > s.get("max_val", 1.0), reason="BAD_ATTRIBUTE"),
    Known("batch_norm", "a rank-1 input (shape [0])", "refused", STRICT,
          "batch_norm needs [N, C, *]; PyTorch takes a rank-1 input only in the degenerate "
          "empty case (C = 0, empty running stats)",
          match=lambda s: s.input.dim() == 1, reason="SHAPE_MISMATCH"),
    Known("gather", "an empty uint8 index", "untranslatable", STRICT,
          "tensord's indices are i32/i64 (a u8 index is DTYPE_MISMATCH, and the sample "
          "runner translates no uint8 tensor); PyTorch accepts uint8 here only because the "
          "index is empty", match=lambda s: s.get("index").dtype == torch.uint8),
]


def check(name: str, results: list, known=None) -> list:
    """Problems of op `name`: outcomes no KNOWN entry explains, samples of a KNOWN form that
    pass (or differ otherwise) now, respelled samples that fail, and KNOWN entries that occur in
    none of their dtypes' samples."""
    known = KNOWN if known is None else known
    entries = [k for k in known if k.op == name]
    problems = []
    used = {id(k): set() for k in entries}
    for o in results:
        covering = [k for k in entries if k.covers(o)]
        hits = [k for k in covering if k.matches(o)]
        for k in hits:
            used[id(k)].add(o.dt)
        if o.kind == "pass":
            for k in covering:
                problems.append(f"known difference no longer occurs: {k.op}: {k.form} "
                                f"({k.outcome}) passes: {o.dt} {o.sample.describe()}")
            continue
        if not hits:
            problems.append(f"unexpected {o.line()}")
        if o.rewritten is not None and o.rewritten.kind != "pass":
            problems.append(f"in tensord's spelling: {o.rewritten.line()}")
    ran = {o.dt for o in results}
    for k in entries:
        missing = sorted((set(k.dtypes) & ran) - used[id(k)])
        if missing:
            problems.append(f"known difference no longer occurs in {missing}: {k.op}: "
                            f"{k.form} ({k.outcome})")
    return problems


def known_table(known=None) -> str:
    """KNOWN as text, by group."""
    known = KNOWN if known is None else known
    lines = []
    for group in GROUPS:
        lines.append(f"{group}:")
        for k in known:
            if k.group == group:
                r = f" [{k.reason}]" if k.reason else ""
                d = "" if k.dtypes == ("f64", "f32") else f" ({'/'.join(k.dtypes)})"
                lines.append(f"  {k.op}: {k.form}{d}: {k.outcome}{r}: {k.why}")
    return "\n".join(lines)
