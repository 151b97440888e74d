"""Collectives across the sessions of a process group, in the style of
torch.distributed.nn.functional: each returns a new tensor and is differentiable (the
server records it under autodiff and runs its backward rule across the group).

    sess.join_group("run-42", rank, world_size, "file:///shared/rendezvous")
    total = tensord.distributed.all_reduce(grad, op="sum")

Every rank of the group must make the same calls in the same order; a rank whose call is
refused (an autodiff tensor of a closed context, say) makes the call fail alike on every rank,
and the group stays usable. See docs/scaling.md.
"""
from __future__ import annotations

from .tensor import Tensor

__all__ = ["all_reduce", "all_gather", "reduce_scatter", "broadcast", "reduce", "barrier"]


def all_reduce(tensor: Tensor, op: str = "sum") -> Tensor:
    """The elementwise reduction (sum, mean, max, min, product) of every rank's tensor."""
    return tensor.session.op("all_reduce", tensor, op=op)


def all_gather(tensor: Tensor) -> Tensor:
    """Every rank's tensor concatenated along dim 0, in rank order."""
    return tensor.session.op("all_gather", tensor)


def reduce_scatter(tensor: Tensor, op: str = "sum") -> Tensor:
    """The reduction (sum, mean) of every rank's tensor, split along dim 0: rank r's part."""
    return tensor.session.op("reduce_scatter", tensor, op=op)


def broadcast(tensor: Tensor, src: int = 0) -> Tensor:
    """Rank src's tensor, on every rank."""
    return tensor.session.op("broadcast", tensor, src=src)


def reduce(tensor: Tensor, dst: int = 0) -> Tensor:
    """The sum of every rank's tensor on rank dst; zeros elsewhere."""
    return tensor.session.op("reduce", tensor, dst=dst)


def barrier(session) -> None:
    """Returns once every rank of the session's group has called it."""
    session.op("barrier")
