"""tensord.optim over tensord.nn modules, PyTorch-style (model.parameters(), loss.backward(),
opt.step(), opt.zero_grad()), parameter groups and the lr schedulers, against torch.optim over
10 steps; optimizer and scheduler state_dicts both ways with torch.optim; and an MLP and a CNN
training loop written as in PyTorch giving torch's losses."""
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


def _step(model, opt, xn, yn, ns):
    """One step of a PyTorch loop, the same source for both libraries."""
    if ns is torch.nn:
        x, y = torch.from_numpy(xn), torch.from_numpy(yn)
    else:
        x, y = xn, yn
    opt.zero_grad()
    ns.functional.cross_entropy(model(x), y).backward()
    opt.step()


def _states_equal(got, want, tol, what):
    """Optimizer state_dicts in torch's format: the same state entries (values to tol) and the
    same hyperparameters (a torch group has more keys: foreach, differentiable, ...). torch
    1.13's SGD without momentum lists {"momentum_buffer": None} per parameter: no state."""
    want_state = {i: e for i, e in want["state"].items()
                  if any(v is not None for v in e.values())}
    assert list(got["state"]) == list(want_state), what
    for index, entries in want_state.items():
        assert list(got["state"][index]) == list(entries), f"{what}: state {index}"
        for name, value in entries.items():
            np.testing.assert_allclose(np.asarray(got["state"][index][name]), value.numpy(),
                                       rtol=tol, atol=tol, err_msg=f"{what}: {index}.{name}")
    assert len(got["param_groups"]) == len(want["param_groups"])
    for group, tgroup in zip(got["param_groups"], want["param_groups"]):
        assert group == {k: v for k, v in tgroup.items() if k in group}, what


OPT_STATE_CONFIGS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("SGD", dict(lr=0.2)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=1e-2)),
    ("AdamW", dict(lr=0.01, betas=(0.85, 0.99))),
]


@pytest.mark.parametrize("kind,config", OPT_STATE_CONFIGS, ids=lambda v: str(v))
def test_optimizer_state_dict_round_trips_with_torch(nsess, kind, config):
    """After 4 steps both optimizers' state_dicts agree (torch's format, numpy values); each
    loads into a fresh optimizer of the other library (over a copy of the model) which then
    continues exactly as the original does, for 4 more steps."""
    torch.manual_seed(5)
    tmod, dmod = mlp(torch.nn, dtype=torch.float64), mlp(nn, dtype="f64")
    dmod.load_state_dict(tmod.state_dict())

    def groups(model):  # two groups, one with its own lr
        return [{"params": model[0].parameters(), "lr": config["lr"] / 2},
                {"params": model[2].parameters()}]

    topt = getattr(torch.optim, kind)(groups(tmod), foreach=False, **config)
    opt = getattr(tensord.optim, kind)(groups(dmod), **config)
    tsched = torch.optim.lr_scheduler.StepLR(topt, step_size=3, gamma=0.5)
    sched = lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)
    batches = [_data(20 + i) for i in range(8)]
    for xn, yn in batches[:4]:
        _step(dmod, opt, xn, yn, nn)
        _step(tmod, topt, xn, yn, torch.nn)
        sched.step()
        tsched.step()
    saved, tsaved = opt.state_dict(), topt.state_dict()
    _states_equal(saved, tsaved, 1e-10, "after 4 steps")
    assert all(isinstance(v, np.ndarray) for s in saved["state"].values() for v in s.values())
    # Fresh optimizers of the other library, over copies of the models, from the state_dicts.
    dtwin, ttwin = nn.from_torch(tmod), dmod.to_torch()
    opt2 = getattr(tensord.optim, kind)(groups(dtwin), lr=1.0)  # lr: loaded
    opt2.load_state_dict(tsaved)
    assert opt2.defaults["lr"] == 1.0 and opt2.param_groups[1]["lr"] == topt.param_groups[1]["lr"]
    topt2 = getattr(torch.optim, kind)(groups(ttwin), lr=1.0, foreach=False)
    topt2.load_state_dict(nn.to_torch_state_dict(saved))
    sched2 = lr_scheduler.StepLR(opt2, step_size=1)
    sched2.load_state_dict(tsched.state_dict())
    tsched2 = torch.optim.lr_scheduler.StepLR(topt2, step_size=1)
    tsched2.load_state_dict(sched.state_dict())
    _states_equal(opt2.state_dict(), tsaved, 1e-10, "loaded from torch")
    for step, (xn, yn) in enumerate(batches[4:]):
        for model, o, s, ns in ((dmod, opt, sched, nn), (tmod, topt, tsched, torch.nn),
                                (dtwin, opt2, sched2, nn), (ttwin, topt2, tsched2, torch.nn)):
            _step(model, o, xn, yn, ns)
            s.step()
        _params_equal(tmod, dmod, 1e-10, f"continued, step {step}")
        _params_equal(tmod, dtwin, 1e-10, f"tensord from torch's state, step {step}")
        for (name, a), b in zip(tmod.named_parameters(), ttwin.parameters()):
            np.testing.assert_allclose(b.detach().numpy(), a.detach().numpy(), rtol=1e-10,
                                       atol=1e-10, err_msg=f"torch from tensord's, {name}")
        assert opt2.param_groups[0]["lr"] == topt.param_groups[0]["lr"]
    _states_equal(opt2.state_dict(), topt.state_dict(), 1e-10, "after 8 steps")


def test_optimizer_load_state_dict_in_place_and_errors(nsess):
    torch.manual_seed(6)
    model = mlp(nn, dtype="f64")
    opt = tensord.optim.Adam(model.parameters(), lr=0.01)
    xn, yn = _data(7)
    _step(model, opt, xn, yn, nn)
    saved = opt.state_dict()
    state_tensors = {name: t.handle for name, t in opt.state[model[0].weight].items()}
    _step(model, opt, xn, yn, nn)
    assert float(opt.state[model[0].weight]["step"].numpy()) == 2
    # Back to the saved state: written into the same state tensors (a compiled step that
    # names them sees it), every parameter's.
    opt.load_state_dict(saved)
    assert {n: t.handle for n, t in opt.state[model[0].weight].items()} == state_tensors
    again = opt.state_dict()
    assert again["param_groups"] == saved["param_groups"]
    for index, entries in saved["state"].items():
        for name, value in entries.items():
            np.testing.assert_array_equal(again["state"][index][name], value)
    assert again["state"][0]["step"].dtype == np.float32 and again["state"][0]["step"].ndim == 0
    # A state that leaves a parameter out drops its state (as torch.optim); hyperparameters
    # come from the saved groups; the saved dict is not changed by the load.
    partial = {"state": {0: saved["state"][0]},
               "param_groups": [dict(saved["param_groups"][0], lr=0.5)]}
    opt.load_state_dict(partial)
    assert set(opt.state) == {model[0].weight} and opt.param_groups[0]["lr"] == 0.5
    assert saved["param_groups"][0]["lr"] == 0.01
    # Mismatches are refused before anything changes.
    with pytest.raises(ValueError, match="different number of parameter groups"):
        opt.load_state_dict({"state": {}, "param_groups": saved["param_groups"] * 2})
    short = dict(saved["param_groups"][0], params=[0, 1])
    with pytest.raises(ValueError, match="doesn't match the size"):
        opt.load_state_dict({"state": {}, "param_groups": [short]})
    bad = {"state": {1: dict(saved["state"][1], exp_avg=np.zeros((3, 3)))},
           "param_groups": saved["param_groups"]}
    with pytest.raises(ValueError, match="'exp_avg' of parameter 1 has the shape"):
        opt.load_state_dict(bad)
    with pytest.raises(tensord.BadAttribute):
        opt.load_state_dict({"state": {}, "param_groups": [dict(saved["param_groups"][0],
                                                                 lr=-1.0)]})
    assert set(opt.state) == {model[0].weight} and opt.param_groups[0]["lr"] == 0.5
    # amsgrad is one setting for all groups: taken from the saved groups when they agree.
    two = tensord.optim.Adam([{"params": model[0].parameters()},
                              {"params": model[2].parameters()}])
    ams = [dict(g, amsgrad=a, params=p) for g, a, p in
           ((saved["param_groups"][0], True, [0, 1]), (saved["param_groups"][0], False, [2, 3]))]
    with pytest.raises(tensord.BadAttribute, match="one setting for all parameter groups"):
        two.load_state_dict({"state": {}, "param_groups": ams})
    ams[1]["amsgrad"] = True
    two.load_state_dict({"state": {}, "param_groups": ams})
    assert two.defaults["amsgrad"] and "max_exp_avg_sq" in two.state_names


def test_sgd_state_dict_without_momentum_and_from_torch_none(nsess):
    """SGD without momentum keeps no state; torch 1.13's {"momentum_buffer": None} entries
    load as no state, and a loaded buffer continues as torch's (no restart at step 0)."""
    torch.manual_seed(7)
    tmod, dmod = mlp(torch.nn, dtype=torch.float64), mlp(nn, dtype="f64")
    dmod.load_state_dict(tmod.state_dict())
    xn, yn = _data(8)
    plain = tensord.optim.SGD(dmod.parameters(), lr=0.1)
    _step(dmod, plain, xn, yn, nn)
    assert plain.state_dict()["state"] == {}
    tplain = torch.optim.SGD(tmod.parameters(), lr=0.1, foreach=False)
    _step(tmod, tplain, xn, yn, torch.nn)
    opt = tensord.optim.SGD(dmod.parameters(), lr=0.1, momentum=0.9)
    opt.load_state_dict(tplain.state_dict())  # momentum_buffer None: none yet
    assert not opt.state and opt.param_groups[0]["momentum"] == 0.0
    tmom = torch.optim.SGD(tmod.parameters(), lr=0.1, momentum=0.9, foreach=False)
    opt = tensord.optim.SGD(dmod.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        _step(tmod, tmom, xn, yn, torch.nn)
    opt.load_state_dict(tmom.state_dict())
    dmod.load_state_dict(tmod.state_dict())
    assert list(opt.state_dict()["state"][0]) == ["momentum_buffer"]
    for _ in range(3):
        _step(tmod, tmom, xn, yn, torch.nn)
        _step(dmod, opt, xn, yn, nn)
        _params_equal(tmod, dmod, 1e-10, "continued from torch's buffers")
