"""The fusion section of compare.py: programs on a server that fuses against the same programs
on a server started with --fusion=off."""
from contextlib import ExitStack
from functools import reduce

import numpy as np
import torch

import tensord
from models import (cnn_data, cnn_loss, gated_data, gated_loss, mlp_data, mlp_loss,
                    residual_block, residual_data)
from timing import best_of, interleaved, line, ms, us


def training_session(stack, client, data, train):
    """A session of `client` with an autodiff context (both closed by `stack`), the model's
    parameters (requires-grad leaves when `train`), an SGD optimizer and the batch's tensors."""
    sess = stack.enter_context(client.session())
    ctx = stack.enter_context(sess.autodiff())
    xn, yn, init = data()
    params = [sess.tensor(v, requires_grad=train) for v in init]
    opt = tensord.optim.SGD(params, lr=0.01)
    inputs = [sess.tensor(v) for v in (xn, yn) if v is not None]
    return sess, ctx, params, opt, inputs


def fusion_compare(client, unfused, rounds, inner):
    """The MLP, CNN and gated-block training programs, and a residual conv block compiled for
    inference, on this server (products fused with their bias, activation and residual add;
    trees of pointwise calls, in the recorded forward too) against the same programs on a
    server started with --fusion=off."""
    models = [("MLP program", mlp_data, mlp_loss, True), ("CNN program", cnn_data, cnn_loss, True),
              ("gated GELU block program", gated_data, gated_loss, True),
              ("residual block (inference)", residual_data, residual_block, False)]
    for name, data, loss_fn, train in models:
        runs = []
        with ExitStack() as stack:
            for c in (client, unfused):
                sess, ctx, params, opt, inputs = training_session(stack, c, data, train)

                def step(*batch, sess=sess, ctx=ctx, params=params, opt=opt):
                    loss = loss_fn(sess, params, *batch)
                    if train:
                        opt.step(ctx.backward(loss))
                    return loss

                runs.append((sess.compile(step, *inputs), inputs))
            (fused, fi), (plain, pi) = runs
            t_fused, t_plain = interleaved(lambda: fused(*fi), lambda: plain(*pi), rounds, inner)
            line(name + ", fused", ms(t_fused), ms(t_plain) + " unfused", t_plain / t_fused,
                 f"{fused.fused_calls} fused ops ({plain.fused_calls} with --fusion=off); "
                 f"run peak {fused.peak_bytes / 2**20:.2f} / {plain.peak_bytes / 2**20:.2f} MiB")


def batch_fusion_compare(client, unfused, rounds, inner):
    """The MLP and CNN eager training steps (the forward as one sess.batch(), whose dropped
    intermediates the client sends discarded, then Backward and an SGD step) on this server
    (products fused with their bias and activation inside the batch) against the same steps on
    the --fusion=off server."""
    for name, data, loss_fn in (("MLP", mlp_data, mlp_loss), ("CNN", cnn_data, cnn_loss)):
        steps, nodes = [], []
        with ExitStack() as stack:
            for c in (client, unfused):
                sess, ctx, params, opt, (x, y) = training_session(stack, c, data, True)

                def step(sess=sess, ctx=ctx, params=params, opt=opt, x=x, y=y, count=False):
                    with sess.batch():
                        loss = loss_fn(sess, params, x, y)
                    if count:
                        nodes.append(ctx.info().tape_nodes)
                    opt.step(ctx.backward(loss))
                steps.append(step)
                step(count=True)
            t_fused, t_plain = interleaved(steps[0], steps[1], rounds, inner)
            line(f"{name} eager step, batch fused", ms(t_fused), ms(t_plain) + " unfused",
                 t_plain / t_fused, f"forward tape nodes {nodes[0]} / {nodes[1]} with "
                 "--fusion=off")


def gelu_written_out(x, tanh):
    return x * 0.5 * (1.0 + tanh((x + x * x * x * 0.044715) * 0.7978845608028654))


def pointwise_compare(client, unfused, rounds, inner):
    """Trees of pointwise calls compiled for inference, summed (so that no large result is
    fetched): fused_elementwise calls here, the calls one by one with --fusion=off; the note
    gives PyTorch's eager time for the same expression. Large activations (tanh below) run
    oneDNN's kernel and stay apart."""
    rng = np.random.default_rng(0)

    def f32(*shape):
        return rng.standard_normal(shape).astype(np.float32)
    cases = [
        ("relu(x*w + b)*0.5 - x, [1024,1024]",
         lambda s, x, w, b: s.op("relu", x * w + b) * 0.5 - x,
         lambda x, w, b: torch.relu(x * w + b) * 0.5 - x, (f32(1024, 1024), f32(1024), f32(1024))),
        ("GELU written out, [256,1024]", lambda s, x: gelu_written_out(x, lambda v: s.op("tanh", v)),
         lambda x: gelu_written_out(x, torch.tanh), (f32(256, 1024),)),
        ("GELU written out, [64,64]", lambda s, x: gelu_written_out(x, lambda v: s.op("tanh", v)),
         lambda x: gelu_written_out(x, torch.tanh), (f32(64, 64),)),
        ("chain of 64 adds of [4]", lambda s, x, y: reduce(lambda a, _: a + y, range(64), x),
         lambda x, y: reduce(lambda a, _: a + y, range(64), x), (f32(4), f32(4))),
    ]
    for name, build, torch_fn, inputs in cases:
        runs = []
        with ExitStack() as stack:
            for c in (client, unfused):
                sess = stack.enter_context(c.session())
                resident = [sess.tensor(v) for v in inputs]
                program = sess.compile(
                    lambda *xs, sess=sess: sess.op("sum", build(sess, *xs)), *resident)
                runs.append((program, resident))
            (fused, fi), (plain, pi) = runs
            t_fused, t_plain = interleaved(lambda: fused(*fi), lambda: plain(*pi), rounds, inner)
            tt = [torch.from_numpy(v) for v in inputs]
            t_torch = best_of(lambda: torch_fn(*tt).sum(), rounds, inner)
            show = us if t_fused < 1e-3 else ms
            line(name, show(t_fused), show(t_plain) + " unfused", t_plain / t_fused,
                 f"{fused.fused_calls} fused calls of {len(fused.fused_ops)}; "
                 f"PyTorch eager {show(t_torch)}")
