"""Process-wide defaults read by the PyTorch-style API (tensord.nn, tensord.no_grad):
the default session and the random generator of parameter initialization and dropout seeds.

    tensord.set_session(sess)          # modules and functions without session= use sess
    with tensord.default_session(sess):   # the same, for a block
        model = tensord.nn.Linear(4, 2)
    tensord.manual_seed(0)             # reproducible initial weights (numpy's generator)
"""
from __future__ import annotations

import contextlib

import numpy as np

_session = None
_generator = np.random.default_rng()


def set_session(session):
    """Makes `session` the default of tensord.nn modules and tensord.nn.functional calls that
    are given neither session= nor a Tensor operand; returns the previous default (or None).
    `set_session(None)` clears it."""
    global _session
    previous, _session = _session, session
    return previous


def get_session(required: bool = False, what: str = "this call"):
    """The default session (None when none is set, or a RuntimeError when `required`)."""
    if _session is not None and _session.closed:
        # A closed default is as good as none: say so instead of SessionNotFound later.
        if required:
            raise RuntimeError(f"tensord: {what} needs a session, and the default session "
                               f"{_session.id} is closed: call tensord.set_session(new_sess)")
        return None
    if _session is None and required:
        raise RuntimeError(f"tensord: {what} needs a session: pass session=sess, or set a "
                           "default first with tensord.set_session(sess) (or inside "
                           "`with tensord.default_session(sess):`)")
    return _session


@contextlib.contextmanager
def default_session(session):
    """The default session inside the block (see set_session); restores the previous one."""
    previous = set_session(session)
    try:
        yield session
    finally:
        set_session(previous)


def manual_seed(seed: int) -> None:
    """Seeds the numpy generator that draws initial weights (tensord.nn.init, the layers'
    default initialization) and the seeds of tensord.nn.Dropout's masks. The values differ
    from torch.manual_seed's: copy weights with load_state_dict to compare with PyTorch."""
    global _generator
    _generator = np.random.default_rng(seed)


def generator() -> np.random.Generator:
    """The numpy generator of tensord.nn's random draws (see manual_seed)."""
    return _generator


__all__ = ["set_session", "get_session", "default_session", "manual_seed", "generator"]
