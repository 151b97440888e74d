"""tensord.nn.utils against torch.nn.utils in f64: clip_grad_norm_ (norm 2, 1 and inf, the
total it returns, a gradient left alone below the limit, the non-finite error),
clip_grad_value_, rnn.pad_sequence; and clipping inside a step tensord.compile traces."""
import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn


def pair(seed=0):
    torch.manual_seed(seed)
    tmod = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.Tanh(),
                               torch.nn.Linear(6, 2)).double()
    dmod = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)).double()
    dmod.load_state_dict(tmod.state_dict())
    x = np.random.default_rng(seed).standard_normal((5, 4)) * 3
    (tmod(torch.tensor(x)) ** 2).sum().backward()
    (dmod(x) ** 2.0).sum().backward()
    return tmod, dmod


@pytest.mark.parametrize("norm_type", [2.0, 1.0, float("inf")])
@pytest.mark.parametrize("max_norm", [0.5, 1e6])
def test_clip_grad_norm_matches_torch(nsess, norm_type, max_norm):
    tmod, dmod = pair()
    ttotal = torch.nn.utils.clip_grad_norm_(tmod.parameters(), max_norm, norm_type)
    dtotal = nn.utils.clip_grad_norm_(dmod.parameters(), max_norm, norm_type)
    np.testing.assert_allclose(float(dtotal), float(ttotal), rtol=1e-12)
    for (name, tp), dp in zip(tmod.named_parameters(), dmod.parameters()):
        np.testing.assert_allclose(dp.grad.numpy(), tp.grad.numpy(), rtol=1e-12, err_msg=name)


def test_clip_grad_value_and_the_non_finite_error(nsess):
    tmod, dmod = pair(1)
    torch.nn.utils.clip_grad_value_(tmod.parameters(), 0.25)
    assert nn.utils.clip_grad_value_(dmod.parameters(), 0.25) is None
    for tp, dp in zip(tmod.parameters(), dmod.parameters()):
        np.testing.assert_allclose(dp.grad.numpy(), tp.grad.numpy(), rtol=1e-12)
        assert np.abs(dp.grad.numpy()).max() == 0.25
    first = next(iter(dmod.parameters()))
    first.grad = first.grad * float("inf")
    kept = [p.grad for p in dmod.parameters()]
    with pytest.raises(RuntimeError, match="non-finite, so it cannot be clipped"):
        nn.utils.clip_grad_norm_(dmod.parameters(), 1.0, error_if_nonfinite=True)
    assert all(p.grad is g for p, g in zip(dmod.parameters(), kept))  # left alone
    single = nn.Linear(2, 2)
    assert float(nn.utils.clip_grad_norm_(single.parameters(), 1.0)) == 0.0  # no gradients


@pytest.mark.parametrize("batch_first", [False, True])
def test_pad_sequence_matches_torch(nsess, batch_first):
    rng = np.random.default_rng(2)
    seqs = [rng.standard_normal((n, 3)) for n in (4, 1, 6)]
    tout = torch.nn.utils.rnn.pad_sequence([torch.tensor(s) for s in seqs],
                                           batch_first=batch_first, padding_value=-1.0)
    dout = nn.utils.rnn.pad_sequence([nsess.tensor(s) for s in seqs], batch_first=batch_first,
                                     padding_value=-1.0)
    np.testing.assert_array_equal(dout.numpy(), tout.numpy())
    flat = nn.utils.rnn.pad_sequence([np.arange(3.0), np.arange(1.0)])
    np.testing.assert_array_equal(flat.numpy(), [[0.0, 0.0], [1.0, 0.0], [2.0, 0.0]])


def test_clipping_inside_a_compiled_step(nsess):
    rng = np.random.default_rng(3)
    x = nsess.tensor(rng.standard_normal((8, 4)) * 5)
    y = nsess.tensor(rng.standard_normal((8, 2)))
    results = {}
    for mode in ("eager", "compiled"):
        tensord.manual_seed(4)
        model = nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 2)).double()
        opt = tensord.optim.SGD(model.parameters(), lr=0.1)

        def step(x, y):
            opt.zero_grad()
            loss = ((model(x) - y) ** 2.0).mean()
            loss.backward()
            total = nn.utils.clip_grad_norm_(model.parameters(), 0.1)
            opt.step()
            return total

        run = tensord.compile(step) if mode == "compiled" else step
        results[mode] = [float(np.asarray(run(x, y) if mode == "compiled" else
                                          run(x, y).numpy())) for _ in range(3)]
        results[mode + " weight"] = model[0].weight.numpy()
    np.testing.assert_allclose(results["compiled"], results["eager"], rtol=1e-10)
    np.testing.assert_allclose(results["compiled weight"], results["eager weight"], rtol=1e-10)
    assert results["eager"][0] > 0.1  # the clipping applied


def test_parameters_to_vector_and_back(nsess):
    tmod, dmod = pair(5)
    tvec = torch.nn.utils.parameters_to_vector(tmod.parameters())
    dvec = nn.utils.parameters_to_vector(dmod.parameters())
    np.testing.assert_array_equal(dvec.numpy(), tvec.detach().numpy())
    assert dvec.requires_grad  # recorded, as torch's is
    new = np.arange(dvec.shape[0], dtype=np.float64) / 10
    torch.nn.utils.vector_to_parameters(torch.tensor(new), tmod.parameters())
    handles = [p.handle for p in dmod.parameters()]
    nn.utils.vector_to_parameters(nsess.tensor(new), dmod.parameters())
    assert [p.handle for p in dmod.parameters()] == handles  # written in place
    for (name, tp), dp in zip(tmod.named_parameters(), dmod.parameters()):
        np.testing.assert_array_equal(dp.numpy(), tp.detach().numpy(), err_msg=name)
    with pytest.raises(RuntimeError, match="the vector has 3 elements"):
        nn.utils.vector_to_parameters(nsess.tensor(np.zeros(3)), dmod.parameters())
