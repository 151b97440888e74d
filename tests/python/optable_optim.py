"""Conformance rows of the optimizer ops (sgd, adam, adamw): several steps of each op, with
each hyperparameter switched on in some configuration, against torch.optim's single-tensor
step on the same values (parameter and every state tensor compared after each step).

As in opcheck.py the reference does not depend on the CPU: PyTorch runs in float64 on the
float32 values widened, so a float32 row compares with the float32 tolerance what the server
rounded at each operation with what float64 gives."""
import numpy as np
import torch

from opcheck import NP, Spec, arr

F = ("f32", "f64")
TOL = {"f32": (1e-5, 1e-6), "f64": (1e-12, 1e-14)}
STEPS = 4
SHAPES = [(3, 4), (5,), ()]

# (server attributes, torch.optim constructor keywords); the step tensor's dtype is chosen per
# configuration so that every kind of counter is exercised.
SGD_CONFIGS = [
    dict(lr=0.1),
    dict(lr=0.1, momentum=0.9),
    dict(lr=0.05, momentum=0.9, dampening=0.2, weight_decay=0.01),
    dict(lr=0.1, momentum=0.8, nesterov=True),
    dict(lr=0.1, weight_decay=0.1, maximize=True),
    dict(lr=0.1, momentum=0.5, weight_decay=0.05, maximize=True),
]
ADAM_CONFIGS = [
    dict(),
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, amsgrad=True),
    dict(lr=0.02, betas=(0.8, 0.99), eps=1e-6, maximize=True),
    dict(lr=0.01, weight_decay=0.05, amsgrad=True, maximize=True),
]
ADAMW_CONFIGS = ADAM_CONFIGS[:1] + [
    dict(lr=0.01, weight_decay=0.1),
    dict(lr=0.01, weight_decay=0.1, amsgrad=True),
    dict(lr=0.02, betas=(0.7, 0.9), weight_decay=0.0, maximize=True),
]
TORCH_OPTIM = {"sgd": torch.optim.SGD, "adam": torch.optim.Adam, "adamw": torch.optim.AdamW}
STEP_DTYPES = ("f32", "i64", "f64", "i32")


def state_names(name: str, config: dict) -> list:
    """The op's state inputs after param and grad, in order, and torch.optim's names."""
    if name == "sgd":
        return ["momentum_buffer", "step"] if config.get("momentum", 0) else []
    return ["exp_avg", "exp_avg_sq", "step"] + (["max_exp_avg_sq"] if config.get("amsgrad")
                                                 else [])


def server_attrs(config: dict) -> dict:
    attrs = dict(config)
    if "betas" in attrs:
        attrs["betas"] = list(attrs["betas"])
    return attrs


def check_config(sess, name: str, config: dict, dt: str, shape, step_dtype: str, rng):
    rtol, atol = TOL[dt]
    p0 = arr(rng, shape, dt)
    names = state_names(name, config)
    param = sess.tensor(p0)
    state = {}
    for n in names:
        # The momentum buffer's values are unused at step 0 (torch.optim clones the first
        # update direction into it): random values there check that they are ignored.
        value = (np.zeros((), NP[step_dtype]) if n == "step" else
                 arr(rng, shape, dt) if n == "momentum_buffer" else np.zeros(shape, NP[dt]))
        state[n] = sess.tensor(value)
    ref = torch.tensor(p0.astype(np.float64), requires_grad=True)
    opt = TORCH_OPTIM[name]([ref], foreach=False, **({"lr": 0.001} | config))
    where = f"{name}{config} {dt} {shape} step {step_dtype}"
    for k in range(STEPS):
        g = arr(rng, shape, dt)
        with sess.no_grad(), sess.batch():
            out = sess.op(name, param, g, *[state[n] for n in names], **server_attrs(config))
        ref.grad = torch.tensor(g.astype(np.float64))
        opt.step()
        got = param.numpy()
        assert got.dtype == NP[dt] and got.shape == tuple(shape), where
        np.testing.assert_allclose(got, ref.detach().numpy(), rtol=rtol, atol=atol,
                                   err_msg=f"{where}: param after step {k + 1}")
        # The output is the param itself (the op writes in place, as assign).
        np.testing.assert_array_equal(out.numpy(), got, err_msg=where)
        torch_state = opt.state[ref]
        for n in names:
            # torch.optim.SGD keeps no step count; every op counts the steps it took.
            want = np.float64(k + 1) if n == "step" else torch_state[n].numpy()
            np.testing.assert_allclose(state[n].numpy(), want, rtol=rtol, atol=atol,
                                       err_msg=f"{where}: {n} after step {k + 1}")
        if names:
            assert state["step"].numpy().dtype == NP[step_dtype], where


def _run(configs):
    def run(sess, name, spec, dt, rng):
        for i, config in enumerate(configs):
            for shape in SHAPES:
                check_config(sess, name, config, dt, shape, STEP_DTYPES[i % len(STEP_DTYPES)],
                             rng)
    return run


TABLE = {
    "sgd": Spec(None, F, "n", run=_run(SGD_CONFIGS)),
    "adam": Spec(None, F, "n", run=_run(ADAM_CONFIGS)),
    "adamw": Spec(None, F, "n", run=_run(ADAMW_CONFIGS)),
}
