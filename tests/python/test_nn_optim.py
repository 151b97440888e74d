"""tensord.optim over tensord.nn modules, PyTorch-style (model.parameters(), loss.backward(),
opt.step(), opt.zero_grad()), parameter groups and the lr schedulers, against torch.optim over
10 steps; and an MLP and a CNN training loop written as in PyTorch giving torch's losses."""
import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn
from tensord.optim import lr_scheduler

CONFIGS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("SGD", dict(lr=0.05, momentum=0.5, dampening=0.3, maximize=True)),
    ("SGD", dict(lr=0.2)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=1e-2)),
    ("Adam", dict(lr=0.02, betas=(0.8, 0.9), eps=1e-6)),
    ("AdamW", dict(lr=0.01, betas=(0.85, 0.99))),
]


def mlp(ns, **dt):
    return ns.Sequential(ns.Linear(5, 8, **dt), ns.Tanh(), ns.Linear(8, 3, **dt))


def _data(seed=11, n=16):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((n, 5)), rng.integers(0, 3, n)


def _params_equal(tmod, dmod, tol, what):
    for (name, tp), dp in zip(tmod.named_parameters(), dmod.parameters()):
        np.testing.assert_allclose(dp.numpy(), tp.detach().numpy(), rtol=tol, atol=tol,
                                   err_msg=f"{what}: {name}")


@pytest.mark.parametrize("kind,config", CONFIGS, ids=lambda v: str(v))
def test_optimizers_over_model_parameters_match_torch(nsess, kind, config):
    torch.manual_seed(0)
    tmod, dmod = mlp(torch.nn, dtype=torch.float64), mlp(nn, dtype="f64")
    dmod.load_state_dict(tmod.state_dict())
    topt = getattr(torch.optim, kind)(tmod.parameters(), foreach=False, **config)
    opt = getattr(tensord.optim, kind)(dmod.parameters(), **config)
    xn, yn = _data()
    x, y = nsess.tensor(xn), nsess.tensor(yn)
    for step in range(10):
        loss = nn.functional.cross_entropy(dmod(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        tloss = torch.nn.functional.cross_entropy(tmod(torch.from_numpy(xn)), torch.from_numpy(yn))
        topt.zero_grad()
        tloss.backward()
        topt.step()
        assert loss.item() == pytest.approx(tloss.item(), rel=1e-10), f"step {step}"
        _params_equal(tmod, dmod, 1e-10, f"{kind} step {step}")
    assert all(p.grad is not None for p in dmod.parameters())
    opt.zero_grad()
    assert all(p.grad is None for p in dmod.parameters())


def test_param_groups_and_closure_match_torch(nsess):
    torch.manual_seed(1)
    tmod, dmod = mlp(torch.nn, dtype=torch.float64), mlp(nn, dtype="f64")
    dmod.load_state_dict(tmod.state_dict())

    def groups(model):
        return [{"params": model[0].parameters(), "lr": 0.3, "momentum": 0.5},
                {"params": model[2].parameters()}]

    topt = torch.optim.SGD(groups(tmod), lr=0.1, momentum=0.9, foreach=False)
    opt = tensord.optim.SGD(groups(dmod), lr=0.1, momentum=0.9)
    assert len(opt.param_groups) == 2 and opt.param_groups[1]["lr"] == 0.1
    assert opt.param_groups[0]["lr"] == 0.3 and len(opt.param_groups[0]["params"]) == 2
    xn, yn = _data(2)

    def closure():
        opt.zero_grad()
        loss = nn.functional.cross_entropy(dmod(xn), yn)
        loss.backward()
        return loss

    def tclosure():
        topt.zero_grad()
        loss = torch.nn.functional.cross_entropy(tmod(torch.from_numpy(xn)), torch.from_numpy(yn))
        loss.backward()
        return loss

    for step in range(10):
        loss, tloss = opt.step(closure), topt.step(tclosure)
        assert loss.item() == pytest.approx(tloss.item(), rel=1e-10), f"step {step}"
        _params_equal(tmod, dmod, 1e-10, f"step {step}")
    with pytest.raises(ValueError, match="more than one parameter group"):
        opt.add_param_group({"params": [dmod[0].weight]})
    with pytest.raises(tensord.BadAttribute):
        tensord.optim.SGD([{"params": dmod[0].parameters(), "lr": -1.0}], lr=0.1)


SCHEDULERS = [
    ("StepLR", dict(step_size=3, gamma=0.5)),
    ("CosineAnnealingLR", dict(T_max=4, eta_min=0.01)),  # 10 epochs: down, up, down again
    ("CosineAnnealingLR", dict(T_max=10)),
]


@pytest.mark.parametrize("kind,config", SCHEDULERS, ids=lambda v: str(v))
def test_schedulers_match_torch(nsess, kind, config):
    torch.manual_seed(2)
    tmod, dmod = mlp(torch.nn, dtype=torch.float64), mlp(nn, dtype="f64")
    dmod.load_state_dict(tmod.state_dict())
    topt = torch.optim.SGD(tmod.parameters(), lr=0.2, momentum=0.9, foreach=False)
    opt = tensord.optim.SGD(dmod.parameters(), lr=0.2, momentum=0.9)
    tsched = getattr(torch.optim.lr_scheduler, kind)(topt, **config)
    sched = getattr(lr_scheduler, kind)(opt, **config)
    assert sched.get_last_lr() == tsched.get_last_lr()
    xn, yn = _data(3)
    for epoch in range(10):
        opt.zero_grad()
        nn.functional.cross_entropy(dmod(xn), yn).backward()
        opt.step()
        topt.zero_grad()
        torch.nn.functional.cross_entropy(tmod(torch.from_numpy(xn)),
                                          torch.from_numpy(yn)).backward()
        topt.step()
        sched.step()
        tsched.step()
        assert sched.get_last_lr() == tsched.get_last_lr(), f"epoch {epoch}"  # bit for bit
        assert opt.param_groups[0]["lr"] == topt.param_groups[0]["lr"]
        _params_equal(tmod, dmod, 1e-10, f"epoch {epoch}")
    state = sched.state_dict()
    assert state["last_epoch"] == tsched.state_dict()["last_epoch"] == 10
    again = getattr(lr_scheduler, kind)(tensord.optim.SGD(dmod.parameters(), lr=0.2), **config)
    again.load_state_dict(state)
    assert again.last_epoch == 10 and again.get_last_lr() == sched.get_last_lr()


def test_the_explicit_gradient_api_still_works_with_modules(nsess):
    model = mlp(nn, dtype="f64")
    opt = tensord.optim.Adam(model.parameters(), lr=0.1)
    ctx = nsess.grad_context()
    xn, yn = _data(4)
    before = [p.numpy() for p in model.parameters()]
    with nsess.batch():
        loss = nn.functional.cross_entropy(model(xn), yn)
    opt.step(ctx.backward(loss))
    assert all(p.grad is None for p in model.parameters())  # backward() was not called
    assert all(not np.array_equal(p.numpy(), b) for p, b in zip(model.parameters(), before))
    opt.defaults["lr"] = 0.0  # a group without its own lr reads the defaults
    now = [p.numpy() for p in model.parameters()]
    opt.step(ctx.backward(nn.functional.cross_entropy(model(xn), yn)))
    for p, b in zip(model.parameters(), now):
        np.testing.assert_array_equal(p.numpy(), b)


def _train(model, opt, batches, loss_fn):
    """A PyTorch training loop, the same source for both libraries."""
    losses = []
    model.train()
    for x, y in batches:
        out = model(x)
        loss = loss_fn(out, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


@pytest.mark.parametrize("dtype,tol", [("f64", 1e-10), ("f32", 1e-5)])
def test_mlp_training_loop_matches_torch(nsess, dtype, tol):
    tdtype = torch.float64 if dtype == "f64" else torch.float32
    np_dtype = np.float64 if dtype == "f64" else np.float32
    torch.manual_seed(3)
    tmodel = torch.nn.Sequential(torch.nn.Linear(5, 16), torch.nn.ReLU(), torch.nn.Linear(16, 16),
                                 torch.nn.GELU(), torch.nn.Linear(16, 3)).to(tdtype)
    model = nn.Sequential(nn.Linear(5, 16), nn.ReLU(), nn.Linear(16, 16), nn.GELU(),
                          nn.Linear(16, 3)).to(dtype)
    model.load_state_dict(tmodel.state_dict())
    rng = np.random.default_rng(5)
    data = [(rng.standard_normal((32, 5)).astype(np_dtype), rng.integers(0, 3, 32))] * 5
    losses = _train(model, tensord.optim.Adam(model.parameters(), lr=0.01), data,
                    nn.CrossEntropyLoss())
    tlosses = _train(tmodel, torch.optim.Adam(tmodel.parameters(), lr=0.01,
                                                        foreach=False),
                     [(torch.from_numpy(x), torch.from_numpy(y)) for x, y in data],
                     torch.nn.CrossEntropyLoss())
    np.testing.assert_allclose(losses, tlosses, rtol=tol)
    assert losses[-1] < losses[0]
    _params_equal(tmodel, model, tol * 10, "after training")


def _build_cnn(self, ns, **dt):
    self.features = ns.Sequential(
        ns.Conv2d(1, 4, 3, padding=1, **dt), ns.BatchNorm2d(4, **dt), ns.ReLU(),
        ns.MaxPool2d(2), ns.Conv2d(4, 8, 3, **dt), ns.ReLU(), ns.AdaptiveAvgPool2d(1))
    self.flatten = ns.Flatten()
    self.head = ns.Linear(8, 3, **dt)


def _cnn_forward(self, x):
    return self.head(self.flatten(self.features(x)))


class SmallCNN(nn.Module):
    def __init__(self, **dt):
        super().__init__()
        _build_cnn(self, nn, **dt)

    forward = _cnn_forward


class TorchCNN(torch.nn.Module):
    def __init__(self, **dt):
        super().__init__()
        _build_cnn(self, torch.nn, **dt)

    forward = _cnn_forward


@pytest.mark.parametrize("dtype,tol", [("f64", 1e-10), ("f32", 1e-4)])
def test_cnn_training_loop_matches_torch(nsess, dtype, tol):
    tdtype = torch.float64 if dtype == "f64" else torch.float32
    np_dtype = np.float64 if dtype == "f64" else np.float32
    torch.manual_seed(4)
    tmodel = TorchCNN(dtype=tdtype)
    model = SmallCNN(dtype=dtype)
    model.load_state_dict(tmodel.state_dict())
    rng = np.random.default_rng(6)
    data = [(rng.standard_normal((6, 1, 8, 8)).astype(np_dtype), rng.integers(0, 3, 6))
            for _ in range(5)]
    opt = tensord.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4)
    sched = lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    topt = torch.optim.SGD(tmodel.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-4,
                           foreach=False)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=2, gamma=0.5)
    losses, tlosses = [], []
    for x, y in data:  # an epoch per batch, to step the schedulers too
        losses += _train(model, opt, [(x, y)], nn.CrossEntropyLoss())
        tlosses += _train(tmodel, topt, [(torch.from_numpy(x), torch.from_numpy(y))],
                          torch.nn.CrossEntropyLoss())
        sched.step()
        tsched.step()
    np.testing.assert_allclose(losses, tlosses, rtol=tol)
    state, tstate = model.state_dict(), tmodel.state_dict()
    for name, value in tstate.items():  # weights and BatchNorm's running statistics
        np.testing.assert_allclose(state[name], value.numpy(), rtol=tol * 10, atol=tol * 10,
                                   err_msg=name)
    model.eval()
    tmodel.eval()
    with tensord.no_grad(), torch.no_grad():
        x = rng.standard_normal((2, 1, 8, 8)).astype(np_dtype)
        np.testing.assert_allclose(model(x).numpy(), tmodel(torch.from_numpy(x)).numpy(),
                                   rtol=tol * 10, atol=tol * 10)
