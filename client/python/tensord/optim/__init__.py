"""Optimizers whose step runs on the server, like torch.optim's SGD, Adam and AdamW.

    opt = tensord.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    loss.backward()              # fills param.grad
    opt.step()                   # one fused sgd op per parameter, in one no_grad batch
    opt.zero_grad()

or, with the gradients AutodiffContext.backward returns (and in sess.compile'd steps):

    opt = tensord.optim.Adam(params, lr=1e-3)
    opt.step(ctx.backward(loss))

Hyperparameters live in `opt.param_groups` (over `opt.defaults`) and are read at every step,
so a schedule (tensord.optim.lr_scheduler) may change them between steps.
"""
from . import lr_scheduler
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "lr_scheduler"]
