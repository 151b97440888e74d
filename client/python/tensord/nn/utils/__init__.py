"""torch.nn.utils for tensord: clipping the gradients a backward left in `.grad`
(clip_grad_norm_, clip_grad_value_), parameters_to_vector / vector_to_parameters, and
`rnn.pad_sequence`.

A parameter's `.grad` is a tensor of the server, and tensors there are not written in place:
clipping gives each parameter a new `.grad` holding the clipped values (a reference to the
old gradient taken before keeps the old values). The arithmetic of one call is sent as one
Execute per session. Inside a step `tensord.compile` traces, the clipping becomes part of the
program's updates, between its backward and its optimizer step.
"""
from __future__ import annotations

import math

import numpy as np

from ...tensor import Tensor
from . import rnn

_NONFINITE = ("The total norm of order {} for gradients from `parameters` is non-finite, so it "
              "cannot be clipped. To disable this error and scale the gradients by the "
              "non-finite norm anyway, set `error_if_nonfinite=False`")


def _with_grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    return [p for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm: float, norm_type: float = 2.0,
                    error_if_nonfinite: bool = False, foreach=None):
    """torch.nn.utils.clip_grad_norm_: the norm of all the gradients together (the norm of
    their norms; norm_type inf: the largest absolute value); each gradient is scaled by
    min(1, max_norm / (total + 1e-6)). Returns the total norm, a 0-d tensor. With
    error_if_nonfinite=True a total that is NaN or infinite raises a RuntimeError (the
    value is read for that: not inside a traced step). `foreach` is accepted and ignored."""
    params = _with_grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not params:
        from ... import defaults
        sess = defaults.get_session(required=True, what="clip_grad_norm_ of no gradients")
        return sess.op("zeros", shape=[], dtype="f32")
    sess = params[0].session
    with sess.no_grad(), sess.batch():
        grads = [p.grad for p in params]
        if math.isinf(norm_type):
            norms = [sess.op("amax", sess.op("abs", g)) for g in grads]
            total = norms[0] if len(norms) == 1 else sess.op("amax", sess.op("stack", *norms))
        else:
            norms = [sess.op("norm", g, p=norm_type) for g in grads]
            total = sess.op("norm", sess.op("stack", *norms), p=norm_type)
        coef = sess.op("clamp", max_norm / (total + 1e-6), max=1.0)
        clipped = [g * coef for g in grads]
    if error_if_nonfinite and not math.isfinite(float(total)):
        raise RuntimeError(_NONFINITE.format(norm_type))
    for p, g in zip(params, clipped):
        p.grad = g
    return total


def clip_grad_value_(parameters, clip_value: float, foreach=None) -> None:
    """torch.nn.utils.clip_grad_value_: each gradient clamped to [-clip_value, clip_value]
    (a new `.grad` per parameter). `foreach` is accepted and ignored."""
    params = _with_grads(parameters)
    if not params:
        return
    clip_value = float(clip_value)
    sess = params[0].session
    with sess.no_grad(), sess.batch():
        clipped = [sess.op("clamp", p.grad, min=-clip_value, max=clip_value) for p in params]
    for p, g in zip(params, clipped):
        p.grad = g


def parameters_to_vector(parameters):
    """torch.nn.utils.parameters_to_vector: the parameters flattened and concatenated into
    one 1-d tensor (one Execute; recorded for autodiff as the ops are)."""
    params = list(parameters)
    if not params:
        raise RuntimeError("parameters_to_vector: no parameters")
    sess = params[0].session
    with sess.batch():
        return sess.op("cat", *[sess.op("reshape", p, shape=[-1]) for p in params], dim=0)


def vector_to_parameters(vec, parameters) -> None:
    """torch.nn.utils.vector_to_parameters: each parameter takes its slice of the 1-d `vec`,
    in place (`assign`, no_grad, one Execute: all or nothing). Its gradient, if any, stays."""
    params = list(parameters)
    if not isinstance(vec, Tensor):
        raise TypeError(f"expected a tensord Tensor, but got: {type(vec).__name__}")
    if len(vec.shape) != 1:
        raise RuntimeError(f"vector_to_parameters: expected a 1-d vector, got shape "
                           f"{tuple(vec.shape)}")
    sizes = [int(np.prod(p.shape, dtype=np.int64)) for p in params]
    if sum(sizes) != vec.shape[0]:
        raise RuntimeError(f"vector_to_parameters: the vector has {vec.shape[0]} elements, the "
                           f"parameters {sum(sizes)}")
    sess = vec.session
    with sess.no_grad(), sess.batch():
        start = 0
        for p, n in zip(params, sizes):
            piece = sess.op("slice", vec, dim=0, start=start, end=start + n, step=1)
            sess.op("assign", p, sess.op("reshape", piece, shape=list(p.shape)))
            start += n


__all__ = ["clip_grad_norm_", "clip_grad_value_", "parameters_to_vector",
           "vector_to_parameters", "rnn"]
