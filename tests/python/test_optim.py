"""The optimizer ops and tensord.optim: training with a server-side step matches torch.optim,
a step is atomic and in place, and every misuse is a typed error that changes nothing.
(optable_optim.py checks each op's formulas against torch.optim step by step.)"""
import math

import numpy as np
import pytest
import torch

import tensord
from conftest import ServerProcess, server_binary

OPTIMIZERS = [
    ("SGD", dict(lr=0.1, momentum=0.9, nesterov=True, weight_decay=1e-3)),
    ("SGD", dict(lr=0.2)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=1e-2)),
    ("AdamW", dict(lr=0.01, betas=(0.85, 0.99))),
]


def session_state(sess):
    info = sess.info()
    return ([(t.handle, tuple(t.shape)) for t in info.tensors], info.memory_used_bytes,
            [(c.context_id, c.state, c.tape_nodes) for c in info.contexts])


@pytest.mark.parametrize("kind,config", OPTIMIZERS, ids=lambda v: str(v))
def test_training_with_tensord_optim_matches_torch_optim(sess, kind, config):
    rng = np.random.default_rng(11)
    xn = rng.standard_normal((32, 5))
    yn = rng.integers(0, 3, 32)
    w1n, b1n, w2n = (rng.standard_normal(s) * 0.5 for s in ((5, 8), (8,), (8, 3)))
    tparams = [torch.tensor(v, requires_grad=True) for v in (w1n, b1n, w2n)]
    topt = getattr(torch.optim, kind)(tparams, foreach=False, **config)
    with sess.autodiff() as ctx:
        params = [sess.tensor(v, requires_grad=True) for v in (w1n, b1n, w2n)]
        opt = getattr(tensord.optim, kind)(params, **config)
        x, y = sess.tensor(xn), sess.tensor(yn)
        for step in range(6):
            w1, b1, w2 = params
            with sess.batch():
                loss = sess.op("cross_entropy", sess.op("tanh", x @ w1 + b1) @ w2, y)
            opt.step(ctx.backward(loss))
            tw1, tb1, tw2 = tparams
            tloss = torch.nn.functional.cross_entropy(torch.tanh(torch.tensor(xn) @ tw1 + tb1)
                                                      @ tw2, torch.tensor(yn))
            topt.zero_grad()
            tloss.backward()
            topt.step()
            assert loss.item() == pytest.approx(tloss.item(), rel=1e-9), f"step {step}"
            for p, tp in zip(params, tparams):
                np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-9,
                                           atol=1e-12, err_msg=f"{kind} step {step}")
        # The tape does not grow with the steps: updates are never recorded.
        assert ctx.info().tape_nodes == 0


def test_step_leaves_parameters_without_gradient_alone(sess):
    with sess.autodiff() as ctx:
        a = sess.tensor(np.ones(3), requires_grad=True)
        b = sess.tensor(np.ones(3), requires_grad=True)
        opt = tensord.optim.Adam([a, b], lr=0.1)
        opt.step(ctx.backward(sess.op("sum", a * 2.0)))
        assert b not in opt.state and a in opt.state
        np.testing.assert_array_equal(b.numpy(), np.ones(3))
        assert np.all(a.numpy() < 1)
        # A schedule changes the learning rate between steps.
        before = a.numpy()
        opt.defaults["lr"] = 0.0
        opt.step(ctx.backward(sess.op("sum", a * 2.0)))
        np.testing.assert_array_equal(a.numpy(), before)
        assert opt.state[a]["step"].item() == 2


def _adam_state(sess, shape=(2, 3), dtype=np.float64):
    return [sess.tensor(np.zeros(shape, dtype)) for _ in range(2)] + \
        [sess.tensor(np.zeros((), np.float32))]


def test_a_failing_batch_restores_param_and_state(sess):
    p = sess.tensor(np.arange(6.0).reshape(2, 3))
    state = _adam_state(sess)
    before = [t.numpy() for t in [p, *state]]
    with pytest.raises(tensord.ShapeMismatch):
        with sess.no_grad(), sess.batch():
            sess.op("adam", p, np.ones((2, 3)), *state, lr=0.5)
            sess.op("add", np.ones(2), np.ones(3))  # fails after the step ran
    for t, want in zip([p, *state], before):
        np.testing.assert_array_equal(t.numpy(), want)
    # And the same step alone changes them.
    with sess.no_grad():
        sess.op("adam", p, np.ones((2, 3)), *state, lr=0.5)
    assert state[2].item() == 1 and not np.array_equal(p.numpy(), before[0])


def test_step_on_an_autodiff_param_while_recording_is_not_marked(sess):
    with sess.autodiff() as ctx:
        w = sess.tensor(np.ones(3), requires_grad=True)
        before = session_state(sess)
        with pytest.raises(tensord.OperationNotMarkedForAutodiff) as e:
            sess.op("sgd", w, np.ones(3), lr=0.1)
        assert e.value.metadata["op"] == "sgd"
        assert e.value.metadata["context_id"] == str(ctx.id)
        assert "no_grad" in e.value.message
        assert session_state(sess) == before
        np.testing.assert_array_equal(w.numpy(), np.ones(3))
    # Its context closed, the parameter cannot be stepped even under no_grad.
    with pytest.raises(tensord.AutodiffContextNotEnabled) as e:
        with sess.no_grad():
            sess.op("sgd", w, np.ones(3), lr=0.1)
    assert e.value.metadata["context_state"] == "closed"


def test_a_step_invalidates_saved_tensors_of_the_param(sess):
    with sess.autodiff() as ctx:
        w = sess.tensor(np.ones(3), requires_grad=True)
        loss = sess.op("sum", w * w)  # saves w
        with sess.no_grad():
            sess.op("sgd", w, np.ones(3), lr=0.1)
        with pytest.raises(tensord.SavedTensorModified):
            ctx.backward(loss)


def bad_calls(sess):
    p = sess.tensor(np.zeros((2, 3)))
    g = np.ones((2, 3))
    m, v, step = _adam_state(sess)
    return [
        ("grad shape", tensord.ShapeMismatch, "adam", [p, np.ones((3, 2)), m, v, step], {}),
        ("state dtype", tensord.DtypeMismatch, "adam",
         [p, g, sess.tensor(np.zeros((2, 3), np.float32)), v, step], {}),
        ("state shape", tensord.ShapeMismatch, "adam", [p, g, sess.tensor(np.zeros(6)), v, step],
         {}),
        ("aliased state", tensord.BadOperand, "adam", [p, g, m, m, step], {}),
        ("param as its state", tensord.BadOperand, "sgd", [p, g, p, step], {"momentum": 0.9,
                                                                          "lr": 0.1}),
        ("step not 0-d", tensord.BadOperand, "adam", [p, g, m, v, sess.tensor(np.zeros(1))], {}),
        ("bool step", tensord.BadOperand, "adam", [p, g, m, v, sess.tensor(np.array(False))], {}),
        ("number step", tensord.BadOperand, "adam", [p, g, m, v, 0], {}),
        ("amsgrad without max", tensord.BadOperand, "adam", [p, g, m, v, step],
         {"amsgrad": True}),
        ("max without amsgrad", tensord.BadOperand, "adam",
         [p, g, m, v, step, sess.tensor(np.zeros((2, 3)))], {}),
        ("momentum without state", tensord.BadOperand, "sgd", [p, g], {"lr": 0.1,
                                                                       "momentum": 0.9}),
        ("three sgd inputs", tensord.BadOperand, "sgd", [p, g, m], {"lr": 0.1}),
        ("negative lr", tensord.BadAttribute, "sgd", [p, g], {"lr": -0.1}),
        ("NaN lr", tensord.BadAttribute, "adam", [p, g, m, v, step], {"lr": math.nan}),
        ("sgd without lr", tensord.BadAttribute, "sgd", [p, g], {}),
        ("beta of 1", tensord.BadAttribute, "adam", [p, g, m, v, step], {"betas": [1.0, 0.9]}),
        ("three betas", tensord.BadAttribute, "adamw", [p, g, m, v, step],
         {"betas": [0.9, 0.9, 0.9]}),
        ("negative eps", tensord.BadAttribute, "adam", [p, g, m, v, step], {"eps": -1.0}),
        ("nesterov without momentum", tensord.BadAttribute, "sgd", [p, g],
         {"lr": 0.1, "nesterov": True}),
        ("integer param", tensord.DtypeMismatch, "sgd",
         [sess.tensor(np.zeros(3, np.int64)), np.ones(3, np.int64)], {"lr": 1.0}),
    ]


def test_misuse_is_typed_and_changes_nothing(sess):
    for label, cls, op, inputs, attrs in bad_calls(sess):
        before = session_state(sess)
        values = [t.numpy() for t in inputs if isinstance(t, tensord.Tensor)]
        with pytest.raises(cls) as e:
            with sess.no_grad():
                sess.op(op, *inputs, **attrs)
        assert e.value.metadata.get("op") == op, f"{label}: {e.value}"
        assert session_state(sess) == before, label
        for t, want in zip([t for t in inputs if isinstance(t, tensord.Tensor)], values):
            np.testing.assert_array_equal(t.numpy(), want, err_msg=label)


def test_low_precision_params_are_refused(sess):
    # Computing in f32 (as other ops on bf16 do) would update a copy: refused instead, and
    # ListOps does not list the 2-byte dtypes for them.
    listed = {o["name"]: o["dtypes"] for o in sess.ops()}
    assert all(not {"bf16", "f16"} & set(listed[op]) for op in ("sgd", "adam", "adamw"))
    p = sess.tensor(np.ones(3, np.float32), dtype="bf16")
    for op, state in (("sgd", []), ("adam", [sess.tensor(np.zeros(3, np.float32), dtype="bf16")
                                             for _ in range(2)] + [sess.tensor(np.zeros(()))])):
        with pytest.raises(tensord.DtypeMismatch) as e:
            with sess.no_grad():
                sess.op(op, p, sess.tensor(np.ones(3, np.float32), dtype="bf16"), *state, lr=0.1)
        assert e.value.metadata["op"] == op and e.value.metadata["dtype"] == "bf16"
        np.testing.assert_array_equal(p.numpy().astype(np.float32), np.ones(3, np.float32))


def test_tensord_optim_refuses_bad_hyperparameters_itself(sess):
    p = sess.tensor(np.zeros(3))
    for make in (lambda: tensord.optim.SGD([p], lr=-1.0),
                 lambda: tensord.optim.SGD([p], lr=0.1, nesterov=True),
                 lambda: tensord.optim.Adam([p], betas=(0.9, 1.5)),
                 lambda: tensord.optim.AdamW([p], eps=float("nan"))):
        with pytest.raises(tensord.BadAttribute) as e:
            make()
        assert isinstance(e.value, ValueError) and isinstance(e.value, tensord.TensordClientError)
        assert e.value.metadata["origin"] == "client"
    with pytest.raises(tensord.BadOperand):
        tensord.optim.Adam([])
    with pytest.raises(tensord.BadOperand):
        tensord.optim.Adam([np.zeros(3)])


LARGE_STEPS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.1, momentum=0.9)),
    ("SGD", dict(lr=0.1, momentum=0.9, dampening=0.3, weight_decay=1e-2, maximize=True)),
    ("SGD", dict(lr=0.1, momentum=0.8, nesterov=True, weight_decay=1e-3)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, amsgrad=True, weight_decay=1e-2, maximize=True)),
    ("AdamW", dict(lr=0.01, betas=(0.85, 0.99), weight_decay=0.1)),
    ("AdamW", dict(lr=0.01, amsgrad=True)),
]


@pytest.fixture(scope="module")
def one_thread_sess(tmp_path_factory):
    proc = ServerProcess(server_binary(), tmp_path_factory.mktemp("one") / "tensord.log",
                         ["--threads=1"])
    proc.start()
    with tensord.connect(proc.address) as c:
        s = c.session()
        yield s
        s.close()
    proc.stop()


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("kind,config", LARGE_STEPS, ids=lambda v: str(v))
def test_large_updates_match_torch_optim(sess, one_thread_sess, kind, config, dtype):
    # 70,001 elements: above the size the CPU kernels share among threads, in blocks that do not
    # divide it; every option changes the loop the step runs. A server with one thread gives the
    # same bits.
    rng = np.random.default_rng(12)
    start = rng.standard_normal(70001).astype(dtype)
    tparam = torch.tensor(start, requires_grad=True)
    topt = getattr(torch.optim, kind)([tparam], foreach=False, **config)
    with sess.autodiff(), one_thread_sess.autodiff():
        param = sess.tensor(start, requires_grad=True)
        alone = one_thread_sess.tensor(start, requires_grad=True)
        opt = getattr(tensord.optim, kind)([param], **config)
        opt_alone = getattr(tensord.optim, kind)([alone], **config)
        for step in range(3):
            grad = rng.standard_normal(70001).astype(dtype)
            opt.step({param: sess.tensor(grad)})
            opt_alone.step({alone: one_thread_sess.tensor(grad)})
            tparam.grad = torch.tensor(grad)
            topt.step()
            got = param.numpy()
            np.testing.assert_array_equal(got, alone.numpy(), err_msg=f"{kind} step {step}")
            # torch's step rounds the same operations, but not always as one term: an element
            # near zero may differ in its last bit.
            tight = dtype == np.float64
            np.testing.assert_allclose(got, tparam.detach().numpy(),
                                       rtol=1e-13 if tight else 1e-6,
                                       atol=1e-15 if tight else 1e-7,
                                       err_msg=f"{kind} step {step}")
