"""How tensord.nn.functional calls an op: the session of its operands, the autodiff hints."""
from __future__ import annotations

from .. import defaults
from ..autograd import hints
from ..tensor import Tensor


def session_of(operands):
    """The first Tensor operand's session, else the default one."""
    for value in operands:
        if isinstance(value, Tensor):
            return value.session
    return defaults.get_session(required=True, what="tensord.nn.functional")


def op(name, *operands, **attrs):
    """One call of op `name` (attributes None are left out: the op's default); the two
    autodiff errors gain their sentence for PyTorch users (tensord.autograd.explain)."""
    with hints():
        return session_of(operands).op(name, *operands, **attrs)


def trailing(operands) -> list:
    """The operands without the trailing None ones (absent optional inputs)."""
    operands = list(operands)
    while operands and operands[-1] is None:
        operands.pop()
    return operands
