"""Forward hooks as PyTorch's: pre-hooks may replace the arguments, hooks the output, in
registration order (prepend first), each removable; they run inside the module call's
forward batch, so a feature-extraction hook costs no round trip of its own."""
import numpy as np
import pytest
import torch

import tensord.nn as nn
from conftest import record_calls


def test_hooks_see_and_replace_like_torch(nsess):
    torch.manual_seed(0)
    tmod = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.Tanh(),
                               torch.nn.Linear(4, 2)).double()
    dmod = nn.Sequential(nn.Linear(3, 4), nn.Tanh(), nn.Linear(4, 2)).double()
    dmod.load_state_dict(tmod.state_dict())
    x = np.random.default_rng(0).standard_normal((5, 3))
    seen = {"torch": [], "tensord": []}
    for side, mod in (("torch", tmod), ("tensord", dmod)):
        mod[0].register_forward_pre_hook(lambda m, args: (args[0] * 2.0,))
        mod[1].register_forward_hook(lambda m, args, out, side=side: seen[side].append(out))
        if side == "torch":  # torch 1.13 has no prepend=: registered in the order to run
            mod[2].register_forward_hook(lambda m, args, out: out * 3.0)
            mod[2].register_forward_hook(lambda m, args, out: out + 1.0)
        else:
            mod[2].register_forward_hook(lambda m, args, out: out + 1.0)
            first = mod[2].register_forward_hook(lambda m, args, out: out * 3.0, prepend=True)
            assert isinstance(first.id, int)
    tout = tmod(torch.tensor(x))
    dout = dmod(x)
    np.testing.assert_allclose(dout.numpy(), tout.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(seen["tensord"][0].numpy(), seen["torch"][0].detach().numpy(),
                               rtol=1e-12)
    assert not seen["tensord"][0].is_lazy  # the kept activation was resolved with the call


def test_with_kwargs_and_remove(nsess):
    calls = []

    class Scaled(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale

    mod = Scaled()
    pre = mod.register_forward_pre_hook(
        lambda m, args, kwargs: (args, {**kwargs, "scale": 10.0}), with_kwargs=True)
    post = mod.register_forward_hook(
        lambda m, args, kwargs, out: calls.append(kwargs["scale"]), with_kwargs=True)
    x = nsess.tensor(np.ones(2))
    np.testing.assert_array_equal(mod(x, scale=2.0).numpy(), [10.0, 10.0])
    assert calls == [10.0]
    pre.remove()
    pre.remove()  # a second remove does nothing
    with post:
        np.testing.assert_array_equal(mod(x, scale=2.0).numpy(), [2.0, 2.0])
    assert calls == [10.0, 2.0]
    np.testing.assert_array_equal(mod(x).numpy(), [1.0, 1.0])
    assert calls == [10.0, 2.0]  # removed when the with block ended
    with pytest.raises(TypeError, match="callable"):
        mod.register_forward_hook("not a function")
    bad = mod.register_forward_pre_hook(lambda m, a, k: 1, with_kwargs=True)
    with pytest.raises(RuntimeError, match=r"\(new_args, new_kwargs\)"):
        mod(x)
    bad.remove()


def test_a_feature_hook_costs_no_round_trip(nsess, monkeypatch):
    mod = nn.Sequential(nn.Linear(3, 8), nn.ReLU(), nn.Linear(8, 1)).double()
    features = {}
    mod[1].register_forward_hook(lambda m, args, out: features.__setitem__("relu", out))
    sent = record_calls(monkeypatch, nsess)
    mod(np.ones((2, 3)))
    assert sent == ["Execute"]
    assert features["relu"].shape == (2, 8)
