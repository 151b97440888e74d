"""tensord.compile: a PyTorch-style step (forward, loss.backward(), opt.step(),
opt.zero_grad()) traced once into a server program; its losses and trained parameters equal
the eager tensord.nn loop's and torch's; new argument shapes retrace (dynamic=False raises);
the optimizer's state_dict() / load_state_dict() around compiled steps."""
import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn

TOL = {"f32": (1e-6, 1e-5), "f64": (1e-12, 1e-10)}  # (vs eager tensord, vs torch)


def mlp(ns, **dt):
    return ns.Sequential(ns.Linear(5, 16, **dt), ns.ReLU(), ns.Linear(16, 16, **dt), ns.Tanh(),
                         ns.Linear(16, 3, **dt))


def cnn(ns, **dt):
    return ns.Sequential(ns.Conv2d(1, 4, 3, padding=1, **dt), ns.ReLU(), ns.MaxPool2d(2),
                         ns.Conv2d(4, 8, 3, **dt), ns.ReLU(), ns.Flatten(),
                         ns.Linear(8 * 2 * 2, 3, **dt))


def _data(kind, np_dtype, n=6, seed=7):
    rng = np.random.default_rng(seed)
    shape = (n, 5) if kind == "mlp" else (n, 1, 8, 8)
    return [(rng.standard_normal(shape).astype(np_dtype), rng.integers(0, 3, n))
            for _ in range(5)]


def _make(kind, dtype, opt_kind, config):
    make = mlp if kind == "mlp" else cnn
    tdtype = torch.float64 if dtype == "f64" else torch.float32
    torch.manual_seed(1)
    tmodel = make(torch.nn, dtype=tdtype)
    models = []
    for _ in range(2):  # eager, compiled
        m = make(nn, dtype=dtype)
        m.load_state_dict(tmodel.state_dict())
        models.append((m, getattr(tensord.optim, opt_kind)(m.parameters(), **config)))
    topt = getattr(torch.optim, opt_kind)(tmodel.parameters(), foreach=False, **config)
    return tmodel, topt, models


def _step_source(model, opt, criterion):
    def train_step(x, y):  # the same source as torch's loop body
        opt.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        opt.step()
        return loss
    return train_step


CASES = [("mlp", "f32", "Adam", dict(lr=0.01)),
         ("mlp", "f64", "SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
         ("cnn", "f32", "SGD", dict(lr=0.05, momentum=0.9, weight_decay=1e-4)),
         ("cnn", "f64", "AdamW", dict(lr=0.01))]


@pytest.mark.parametrize("kind,dtype,opt_kind,config", CASES, ids=lambda v: str(v))
def test_compiled_training_equals_eager_and_torch(nsess, kind, dtype, opt_kind, config):
    np_dtype = np.float64 if dtype == "f64" else np.float32
    tol_eager, tol_torch = TOL[dtype]
    tmodel, topt, [(emodel, eopt), (cmodel, copt)] = _make(kind, dtype, opt_kind, config)
    data = _data(kind, np_dtype)
    criterion = nn.CrossEntropyLoss()

    eager_step = _step_source(emodel, eopt, criterion)
    eager = [eager_step(nsess.tensor(x), nsess.tensor(y)).item() for x, y in data]

    step = tensord.compile(_step_source(cmodel, copt, criterion))
    compiled = []
    for x, y in data:
        loss = step(x, y)
        assert isinstance(loss, np.ndarray) and loss.shape == ()
        compiled.append(float(loss))
    assert step.traces == 1 and len(step.programs) == 1

    tstep = _step_source(tmodel, topt, torch.nn.CrossEntropyLoss())
    tlosses = [tstep(torch.from_numpy(x), torch.from_numpy(y)).item() for x, y in data]

    np.testing.assert_allclose(compiled, eager, rtol=tol_eager, atol=tol_eager)
    np.testing.assert_allclose(compiled, tlosses, rtol=tol_torch, atol=tol_torch)
    assert len(set(compiled)) == len(compiled)  # the parameters moved every step
    for (name, tp), ep, cp in zip(tmodel.named_parameters(), emodel.parameters(),
                                  cmodel.parameters()):
        np.testing.assert_allclose(cp.numpy(), ep.numpy(), rtol=tol_eager, atol=tol_eager,
                                   err_msg=name)
        np.testing.assert_allclose(cp.numpy(), tp.detach().numpy(), rtol=tol_torch * 10,
                                   atol=tol_torch * 10, err_msg=name)
        assert cp.grad is None  # compiled runs keep their gradients on the server
    step.reset()
    assert not step.programs


def test_new_shapes_retrace_and_dynamic_false_raises(nsess):
    _, _, [(emodel, eopt), (cmodel, copt)] = _make("mlp", "f64", "SGD", dict(lr=0.1))
    criterion = nn.MSELoss()
    rng = np.random.default_rng(3)
    batches = [(rng.standard_normal((n, 5)), rng.standard_normal((n, 3))) for n in (4, 4, 7, 4)]
    eager_step = _step_source(emodel, eopt, criterion)
    step = tensord.compile(_step_source(cmodel, copt, criterion))
    for x, y in batches:
        np.testing.assert_allclose(float(step(x, y)), eager_step(x, y).item(), rtol=1e-12)
    assert step.traces == 2 and len(step.programs) == 2  # (4, 5) and (7, 5); the 4 reused
    for cp, ep in zip(cmodel.parameters(), emodel.parameters()):
        np.testing.assert_allclose(cp.numpy(), ep.numpy(), rtol=1e-12, atol=1e-12)
    # A dtype change retraces too.
    step(batches[0][0].astype(np.float32).astype(np.float64), batches[0][1])
    assert step.traces == 2
    with pytest.raises(tensord.TensordError):  # f32 into an f64 model: the trace fails
        step(batches[0][0].astype(np.float32), batches[0][1].astype(np.float32))

    strict = tensord.compile(_step_source(cmodel, copt, criterion), dynamic=False)
    strict(*batches[0])
    with pytest.raises(tensord.InvalidRequest, match=r"dynamic=False.*shape=\(7, 5\)"):
        strict(*batches[2])
    assert strict.traces == 1


def test_decorator_tensor_arguments_and_returned_structure(nsess):
    model = nn.Linear(3, 1, dtype="f64")
    opt = tensord.optim.SGD(model.parameters(), lr=0.1)

    @tensord.compile(mode="reduce-overhead")
    def step(x):
        out = model(x)
        loss = (out * out).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
        return {"loss": loss, "out": out}

    x = nsess.tensor(np.ones((2, 3)))
    before = model.bias.numpy().copy()
    res = step(x)
    assert set(res) == {"loss", "out"} and res["out"].shape == (2, 1)
    assert model.bias.numpy() != pytest.approx(before)
    assert res["loss"] == pytest.approx(float(res["out"][0, 0]) ** 2)


def test_gradients_from_before_the_step_are_refused_with_the_way_out(nsess):
    model = nn.Linear(3, 1, dtype="f64")
    opt = tensord.optim.SGD(model.parameters(), lr=0.1)
    x = np.ones((2, 3))
    model(nsess.tensor(x)).sum().backward()  # an eager .grad, never cleared

    def step(x):
        loss = model(x).sum()
        loss.backward()
        opt.step()
        return loss

    with pytest.raises(tensord.InvalidRequest, match="zero_grad"):
        tensord.compile(step)(x)
    opt.zero_grad()
    compiled = tensord.compile(step)
    b = model.bias.numpy()
    compiled(x)
    np.testing.assert_allclose(model.bias.numpy(), b - 0.2, rtol=1e-12)


def test_backward_inside_sess_compile_still_names_both_ways(nsess):
    model = nn.Linear(2, 1)

    def bad_step(x):
        loss = model(x).sum()
        loss.backward()
        return loss

    with pytest.raises(tensord.InvalidRequest, match="tensord.compile"):
        nsess.compile(bad_step, np.ones((3, 2), np.float32))


def test_compiled_steps_and_optimizer_state_dict(nsess):
    """The optimizer state a compiled step updates on the server is what state_dict() reads;
    load_state_dict() writes into the same state tensors, so the compiled step continues from
    the loaded state (as the eager optimizer does from it)."""
    tmodel, topt, [(emodel, eopt), (cmodel, copt)] = _make("mlp", "f64", "Adam",
                                                            dict(lr=0.01))
    data = _data("mlp", np.float64)
    criterion = nn.CrossEntropyLoss()
    eager_step = _step_source(emodel, eopt, criterion)
    step = tensord.compile(_step_source(cmodel, copt, criterion))
    for x, y in data[:2]:
        eager_step(x, y)
        step(x, y)
    saved, esaved = copt.state_dict(), eopt.state_dict()
    params = cmodel.state_dict()
    for index, entries in esaved["state"].items():
        for name, value in entries.items():
            np.testing.assert_allclose(saved["state"][index][name], value, rtol=1e-12,
                                       atol=1e-12, err_msg=f"{index}.{name}")
    x, y = data[2]
    step(x, y)
    after = cmodel.state_dict()
    step(*data[3])
    # Rewind the parameters and the optimizer: the same step updates them alike again (the
    # update reads the moments and the step count of the loaded state).
    cmodel.load_state_dict(params)
    copt.load_state_dict(saved)
    step(x, y)
    for name, value in cmodel.state_dict().items():
        np.testing.assert_allclose(value, after[name], rtol=1e-12, atol=1e-12, err_msg=name)
    assert step.traces == 1
    assert float(copt.state_dict()["state"][0]["step"]) == 3
