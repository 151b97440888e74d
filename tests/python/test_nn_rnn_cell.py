"""tensord.nn.RNNCell, LSTMCell and GRUCell against torch.nn's with the same weights, in f64:
a loop of steps written by hand (the state carried over), its outputs and the gradients of
the input, the initial state and every parameter; unbatched input; repr, checks and
conversion both ways."""
import numpy as np
import pytest
import torch

import tensord.nn as nn

TOL = dict(rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("kind, kwargs", [
    ("RNNCell", {}), ("RNNCell", {"nonlinearity": "relu", "bias": False}),
    ("LSTMCell", {}), ("LSTMCell", {"bias": False}), ("GRUCell", {}),
])
@pytest.mark.parametrize("with_state", [False, True], ids=["zeros", "hx"])
def test_a_loop_of_steps_matches_torch(nsess, kind, kwargs, with_state):
    torch.manual_seed(0)
    tcell = getattr(torch.nn, kind)(3, 4, **kwargs).double()
    dcell = getattr(nn, kind)(3, 4, **kwargs).double()
    dcell.load_state_dict(tcell.state_dict())
    assert repr(dcell) == repr(tcell)
    assert [n for n, _ in dcell.named_parameters()] == [n for n, _ in tcell.named_parameters()]
    rng = np.random.default_rng(1)
    xs = rng.standard_normal((5, 2, 3))
    tx = torch.tensor(xs, requires_grad=True)
    dx = nsess.tensor(xs, requires_grad=True)
    lstm = kind == "LSTMCell"
    t_state = d_state = None
    leaves = []
    if with_state:
        h0 = [rng.standard_normal((2, 4)) for _ in range(2 if lstm else 1)]
        tl = [torch.tensor(h, requires_grad=True) for h in h0]
        dl = [nsess.tensor(h, requires_grad=True) for h in h0]
        leaves = list(zip(tl, dl))
        t_state = tuple(tl) if lstm else tl[0]
        d_state = tuple(dl) if lstm else dl[0]
    touts, douts = [], []
    for t in range(5):
        t_state = tcell(tx[t], t_state)
        d_state = dcell(dx[t], d_state)
        touts.append(t_state[0] if lstm else t_state)
        douts.append(d_state[0] if lstm else d_state)
    for d, t in zip(douts, touts):
        np.testing.assert_allclose(d.numpy(), t.detach().numpy(), **TOL)
    weights = rng.standard_normal((5, 2, 4))
    sum((torch.tensor(w) * t).sum() for w, t in zip(weights, touts)).backward()
    loss = None
    for w, d in zip(weights, douts):
        term = (d * w).sum()
        loss = term if loss is None else loss + term
    loss.backward()
    np.testing.assert_allclose(dx.grad.numpy(), tx.grad.numpy(), **TOL)
    for t, d in leaves:
        np.testing.assert_allclose(d.grad.numpy(), t.grad.numpy(), **TOL)
    for (name, tp), dp in zip(tcell.named_parameters(), dcell.parameters()):
        np.testing.assert_allclose(dp.grad.numpy(), tp.grad.numpy(), err_msg=name, **TOL)


def test_unbatched_input_checks_and_conversion(nsess):
    torch.manual_seed(2)
    tcell = torch.nn.GRUCell(3, 4).double()
    dcell = nn.from_torch(tcell)
    assert repr(dcell) == repr(tcell)
    x = np.random.default_rng(3).standard_normal(3)
    h = dcell(x)
    assert h.shape == (4,)
    np.testing.assert_allclose(h.numpy(), tcell(torch.tensor(x)).detach().numpy(), **TOL)
    back = nn.LSTMCell(2, 3, bias=False).to_torch()
    assert repr(back) == repr(torch.nn.LSTMCell(2, 3, bias=False))
    with pytest.raises(AssertionError, match="Expected input to be 1-D or 2-D"):
        dcell(np.zeros((1, 2, 3)))
    with pytest.raises(RuntimeError, match="inconsistent input_size: got 5 expected 3"):
        dcell(np.zeros((2, 5)))
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNNCell(2, 3, nonlinearity="gelu")
