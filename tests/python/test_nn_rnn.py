"""tensord.nn.RNN, LSTM and GRU against torch.nn with the same weights, in f64: outputs, final
states and the gradients of the input, the initial states and every parameter, for every
mode and the arguments that change the computation; the parameters' names, shapes and order;
the checks PyTorch makes; and a forward that is one module call is a few Executes."""
import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn
from conftest import record_calls

TOL = dict(rtol=1e-10, atol=1e-12)

CASES = {
    "rnn-tanh": ("RNN", {}),
    "rnn-relu-2layers": ("RNN", {"nonlinearity": "relu", "num_layers": 2}),
    "lstm": ("LSTM", {}),
    "lstm-2layers-bidirectional": ("LSTM", {"num_layers": 2, "bidirectional": True}),
    "lstm-proj-batch-first": ("LSTM", {"proj_size": 3, "batch_first": True}),
    "lstm-no-bias": ("LSTM", {"bias": False}),
    "gru": ("GRU", {}),
    "gru-bidirectional-batch-first": ("GRU", {"bidirectional": True, "batch_first": True,
                                              "num_layers": 2}),
}


def pair(kind, kwargs, input_size=4, hidden_size=5, seed=0):
    torch.manual_seed(seed)
    tmod = getattr(torch.nn, kind)(input_size, hidden_size, **kwargs).double()
    dmod = getattr(nn, kind)(input_size, hidden_size, **kwargs).double()
    dmod.load_state_dict(tmod.state_dict())
    return tmod, dmod


def states(kind, tstate):
    """The final states as a flat list of torch tensors."""
    return list(tstate) if kind == "LSTM" else [tstate]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "hx"])
def test_matches_torch_with_gradients(nsess, case, with_state):
    kind, kwargs = CASES[case]
    tmod, dmod = pair(kind, kwargs)
    assert [n for n, _ in dmod.named_parameters()] == [n for n, _ in tmod.named_parameters()]
    rng = np.random.default_rng(1)
    steps, batch = 6, 3
    shape = (batch, steps, 4) if kwargs.get("batch_first") else (steps, batch, 4)
    x = rng.standard_normal(shape)
    layers = kwargs.get("num_layers", 1) * (2 if kwargs.get("bidirectional") else 1)
    h_size = kwargs.get("proj_size", 0) or 5
    tx = torch.tensor(x, requires_grad=True)
    dx = nsess.tensor(x, requires_grad=True)
    targs, dargs = [tx], [dx]
    if with_state:
        h0 = rng.standard_normal((layers, batch, h_size))
        th = [torch.tensor(h0, requires_grad=True)]
        dh = [nsess.tensor(h0, requires_grad=True)]
        if kind == "LSTM":
            c0 = rng.standard_normal((layers, batch, 5))
            th.append(torch.tensor(c0, requires_grad=True))
            dh.append(nsess.tensor(c0, requires_grad=True))
        targs.append(tuple(th) if kind == "LSTM" else th[0])
        dargs.append(tuple(dh) if kind == "LSTM" else dh[0])
    tout, tstate = tmod(*targs)
    dout, dstate = dmod(*dargs)
    np.testing.assert_allclose(dout.numpy(), tout.detach().numpy(), **TOL)
    for d, t in zip(states(kind, dstate), states(kind, tstate)):
        np.testing.assert_allclose(d.numpy(), t.detach().numpy(), **TOL)
    # A loss that reaches the output and every final state.
    weights = [rng.standard_normal(t.shape) for t in [tout] + states(kind, tstate)]
    tloss = sum((torch.tensor(w) * t).sum() for w, t in zip(weights, [tout] +
                                                             states(kind, tstate)))
    dloss = None
    for w, d in zip(weights, [dout] + states(kind, dstate)):
        term = (d * w).sum()
        dloss = term if dloss is None else dloss + term
    tloss.backward()
    dloss.backward()
    np.testing.assert_allclose(dx.grad.numpy(), tx.grad.numpy(), **TOL)
    if with_state:
        for d, t in zip(dh, th):
            np.testing.assert_allclose(d.grad.numpy(), t.grad.numpy(), **TOL)
    for (name, tp), dp in zip(tmod.named_parameters(), dmod.parameters()):
        np.testing.assert_allclose(dp.grad.numpy(), tp.grad.numpy(), err_msg=name, **TOL)


@pytest.mark.parametrize("kind", ["RNN", "LSTM", "GRU"])
def test_unbatched_input(nsess, kind):
    tmod, dmod = pair(kind, {"num_layers": 2})
    x = np.random.default_rng(2).standard_normal((5, 4))
    tout, tstate = tmod(torch.tensor(x))
    dout, dstate = dmod(x)
    assert dout.shape == (5, 5)
    np.testing.assert_allclose(dout.numpy(), tout.detach().numpy(), **TOL)
    for d, t in zip(states(kind, dstate), states(kind, tstate)):
        assert d.shape == tuple(t.shape)
        np.testing.assert_allclose(d.numpy(), t.detach().numpy(), **TOL)


def test_parameters_repr_and_initialisation(nsess):
    lstm = nn.LSTM(3, 8, num_layers=2, bidirectional=True, proj_size=2, batch_first=True)
    tlstm = torch.nn.LSTM(3, 8, num_layers=2, bidirectional=True, proj_size=2, batch_first=True)
    assert repr(lstm) == repr(tlstm)
    assert [(n, tuple(p.shape)) for n, p in lstm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in tlstm.named_parameters()]
    assert len(lstm.all_weights) == 4 and len(lstm.all_weights[0]) == 5
    bound = 1 / np.sqrt(8)
    for p in lstm.parameters():
        values = p.numpy()
        assert values.dtype == np.float32 and np.all(np.abs(values) <= bound)
        assert values.std() > bound / 4  # drawn, not constant
    assert repr(nn.RNN(2, 3, nonlinearity="relu", bias=False)) == \
        repr(torch.nn.RNN(2, 3, nonlinearity="relu", bias=False))
    assert repr(nn.GRU(2, 3, dropout=0.5, num_layers=3)) == \
        repr(torch.nn.GRU(2, 3, dropout=0.5, num_layers=3))


def test_the_checks_pytorch_makes(nsess):
    with pytest.raises(ValueError, match="proj_size has to be smaller"):
        nn.LSTM(2, 3, proj_size=3)
    with pytest.raises(ValueError, match="only supported for LSTM"):
        nn.GRU(2, 3, proj_size=1)
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNN(2, 3, nonlinearity="gelu")
    with pytest.raises(ValueError, match="dropout should be a number"):
        nn.RNN(2, 3, dropout=1.5)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers"):
        nn.GRU(2, 3, dropout=0.2)
    lstm = nn.LSTM(2, 3)
    with pytest.raises(RuntimeError, match="input_size. Expected 2, got 4"):
        lstm(np.zeros((5, 1, 4), np.float32))
    with pytest.raises(ValueError, match="Expected input to be 2-D or 3-D"):
        lstm(np.zeros((5, 1, 1, 2), np.float32))
    with pytest.raises(RuntimeError, match=r"Expected hidden size \(1, 1, 3\), got \(1, 2, 3\)"):
        lstm(np.zeros((5, 1, 2), np.float32),
             (np.zeros((1, 2, 3), np.float32), np.zeros((1, 1, 3), np.float32)))
    with pytest.raises(RuntimeError, match="hx must be a tuple"):
        lstm(np.zeros((5, 1, 2), np.float32), np.zeros((1, 1, 3), np.float32))


def test_a_sequence_is_a_few_executes_and_trains(nsess, monkeypatch):
    tensord.manual_seed(0)
    model = nn.LSTM(4, 16, num_layers=2)
    head = nn.Linear(16, 1)
    opt = tensord.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=0.05)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((20, 8, 4)).astype(np.float32)
    y = x.sum(axis=(0, 2))[:, None].astype(np.float32) / 10
    sent = record_calls(monkeypatch, nsess)
    losses = []
    for step in range(30):
        out, _ = model(x)
        if step == 0:
            assert sent.count("Execute") <= 3, sent  # 2 layers x 20 steps, about 600 calls
        pred = head(out[-1])
        loss = ((pred - y) ** 2.0).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(float(loss))
    assert losses[-1] < 0.5 * losses[0], losses


def test_compiled_step_equals_the_eager_step(nsess):
    """tensord.compile traces a step whose recurrent layer takes the step's input (its shape
    is the example's while tracing); a layer on a pending output is refused, saying why."""
    rng = np.random.default_rng(4)
    x = nsess.tensor(rng.standard_normal((7, 3, 4)))
    y = nsess.tensor(rng.standard_normal((3, 5)))
    losses = {}
    for mode in ("eager", "compiled"):
        tensord.manual_seed(1)
        gru = nn.GRU(4, 5, num_layers=2, bidirectional=True).double()
        head = nn.Linear(10, 5).double()
        opt = tensord.optim.SGD(list(gru.parameters()) + list(head.parameters()), lr=0.1)
        loss_fn = nn.MSELoss()

        def step(x, y):
            opt.zero_grad()
            out, _ = gru(x)
            loss = loss_fn(head(out[-1]), y)
            loss.backward()
            opt.step()
            return loss

        run = tensord.compile(step) if mode == "compiled" else step
        losses[mode] = [float(np.asarray(run(x, y) if mode == "compiled" else
                                         run(x, y).numpy())) for _ in range(4)]
    np.testing.assert_allclose(losses["compiled"], losses["eager"], rtol=1e-10)
    assert losses["eager"][-1] < losses["eager"][0]

    gru = nn.GRU(4, 5).double()
    with pytest.raises(ValueError, match="needs the input's shape"):
        tensord.compile(lambda x: gru(x * 2.0)[0].sum())(x)


@pytest.mark.parametrize("kind, kwargs", [
    ("LSTM", {"num_layers": 2, "proj_size": 2, "batch_first": True, "bidirectional": True}),
    ("GRU", {"bias": False}),
    ("RNN", {"nonlinearity": "relu", "dropout": 0.25, "num_layers": 2}),
])
def test_converts_to_and_from_torch(nsess, kind, kwargs):
    torch.manual_seed(5)
    tmodel = torch.nn.Sequential(getattr(torch.nn, kind)(3, 4, **kwargs)).double().eval()
    dmodel = nn.from_torch(tmodel)
    assert repr(dmodel) == repr(tmodel) and not dmodel[0].training
    x = np.random.default_rng(6).standard_normal((2, 5, 3))
    tout = tmodel[0](torch.tensor(x))[0]
    np.testing.assert_allclose(dmodel[0](x)[0].numpy(), tout.detach().numpy(), **TOL)
    back = dmodel.to_torch()
    assert repr(back) == repr(tmodel)
    for (name, a), b in zip(back.state_dict().items(), tmodel.state_dict().values()):
        assert a.dtype == b.dtype, name
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_dropout_between_layers_in_training_only(nsess):
    tmod, dmod = pair("GRU", {"num_layers": 2, "dropout": 0.5})
    x = np.random.default_rng(7).standard_normal((6, 3, 4))
    dmod.eval()
    tmod.eval()
    np.testing.assert_allclose(dmod(x)[0].numpy(), tmod(torch.tensor(x))[0].detach().numpy(),
                               **TOL)
    evaluated = dmod(x)[0].numpy()
    dmod.train()
    trained = dmod(x)[0].numpy()
    assert not np.allclose(trained, evaluated)  # the first layer's output was dropped out


def test_numpy_input_and_state_in_the_session_of_the_parameters(client):
    """No default session: the layer's ops go to its parameters' session."""
    sess = client.session()
    try:
        assert tensord.defaults.get_session() is not sess
        torch.manual_seed(8)
        tmod = torch.nn.LSTM(3, 4, num_layers=2, batch_first=True).double()
        dmod = nn.LSTM(3, 4, num_layers=2, batch_first=True, session=sess).double()
        dmod.load_state_dict(tmod.state_dict())
        rng = np.random.default_rng(8)
        x, h0, c0 = (rng.standard_normal(s) for s in ((2, 5, 3), (2, 2, 4), (2, 2, 4)))
        out, (h, c) = dmod(x, (h0, c0))
        tout, (th, tc) = tmod(torch.tensor(x), (torch.tensor(h0), torch.tensor(c0)))
        assert out.session is sess
        for d, t in ((out, tout), (h, th), (c, tc)):
            np.testing.assert_allclose(d.numpy(), t.detach().numpy(), **TOL)
    finally:
        sess.close()
