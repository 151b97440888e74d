"""torch interop: sess.tensor(torch_tensor) and Tensor.torch() over every dtype the wire has
(bf16 included, bit for bit, read and handed over through numpy without copies),
tensord.nn.from_torch (a CNN, a transformer encoder and a Transformer give torch's outputs and
gradients; buffers, training flags and frozen parameters carried over), Module.to_torch (round
trips), and the error naming a layer that cannot be converted."""
import inspect

import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn
from tensord import dtypes

TOL = 1e-10
T = torch.nn


def _close(got, want, what, tol=TOL):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


TORCH_DTYPES = [torch.float32, torch.float64, torch.int32, torch.int64, torch.bool,
                torch.bfloat16, torch.float16]


@pytest.mark.parametrize("dtype", TORCH_DTYPES, ids=str)
def test_torch_tensors_round_trip_bit_for_bit(nsess, dtype):
    t = (torch.randn(3, 5, generator=torch.Generator().manual_seed(0)) * 50).to(dtype)
    d = nsess.tensor(t)
    assert d.shape == (3, 5) and d.dtype == dtypes.to_numpy_dtype(str(dtype))
    back = d.torch()
    assert back.dtype == dtype and not back.requires_grad and torch.equal(back, t)
    # Strided and requires-grad tensors too (the autograd history stays in torch).
    if dtype.is_floating_point:
        g = t.clone().requires_grad_()
        assert torch.equal(nsess.tensor(g.T).torch(), t.T)
        leaf = nsess.tensor(g, requires_grad=True, ctx=nsess.grad_context())
        assert leaf.requires_grad and leaf.is_leaf
    # A torch tensor is an operand of any op as it is (bf16 included).
    doubled = nsess.op("add", d, t)
    assert doubled.dtype == d.dtype and torch.equal(doubled.torch(), t + t)


def test_no_copies_through_numpy(nsess, monkeypatch):
    for dtype in (torch.float32, torch.bfloat16):
        t = torch.randn(64, 32).to(dtype)
        array, wire = dtypes.encode_torch(t)
        # The bytes numpy hands to the upload are the torch tensor's own.
        assert array.__array_interface__["data"][0] == t.data_ptr()
        assert wire == dtypes.to_wire("bf16" if dtype == torch.bfloat16 else "f32")
        d = nsess.tensor(t)
        seen = {}
        download = nsess._download

        def spy(handle, bf16_bits=False):
            seen["array"] = download(handle, bf16_bits)
            return seen["array"]

        monkeypatch.setattr(nsess, "_download", spy)
        back = d.torch()
        monkeypatch.undo()
        # torch's tensor is a view of the downloaded buffer, not a copy of it.
        assert back.data_ptr() == seen["array"].__array_interface__["data"][0]
        assert torch.equal(back, t)


def test_torch_dtype_conversion_and_errors(nsess):
    with pytest.raises(TypeError, match="torch.complex64 has no tensord dtype"):
        nsess.tensor(torch.zeros(3, dtype=torch.complex64))
    t = nsess.tensor(torch.arange(3, dtype=torch.uint8), dtype="i32")
    assert t.dtype == np.int32 and t.tolist() == [0, 1, 2]
    x = torch.tensor([1.0, 1.00390625, 3.14159], dtype=torch.float32)
    bf = nsess.tensor(x, dtype="bf16")
    assert torch.equal(bf.torch(), x.to(torch.bfloat16))  # torch's rounding
    p = nn.Parameter(torch.ones(2, 3, dtype=torch.bfloat16))
    assert p.dtype == "bf16" and p.requires_grad
    assert torch.equal(p.torch(), torch.ones(2, 3).bfloat16())


def cnn():
    return T.Sequential(
        T.Conv2d(1, 4, 3, padding=1), T.BatchNorm2d(4), T.ReLU(), T.MaxPool2d(2),
        T.Conv2d(4, 6, 3, padding="same", padding_mode="reflect"), T.GELU(),
        T.ConvTranspose2d(6, 4, 2, stride=2), T.LeakyReLU(0.1), T.AdaptiveAvgPool2d(2),
        T.Flatten(), T.Dropout(0.3), T.Linear(16, 5), T.LogSoftmax(dim=1))


def _compare(tmodel, dmodel, sess, x, what, seed=0):
    """Forward and the gradients of every parameter: dmodel against tmodel."""
    sess.grad_context()
    tmodel.zero_grad()
    tout = tmodel(torch.from_numpy(x))
    dout = dmodel(sess.tensor(x))
    _close(dout.numpy(), tout.detach().numpy(), f"{what}: forward")
    g = np.random.default_rng(seed).standard_normal(tuple(tout.shape))
    (tout * torch.from_numpy(g)).sum().backward()
    sess.op("sum", dout * g).backward()
    dparams = dict(dmodel.named_parameters())
    for name, p in tmodel.named_parameters():
        if p.requires_grad:
            _close(dparams[name].grad.numpy(), p.grad.numpy(), f"{what}: gradient of {name}")
        else:
            assert dparams[name].grad is None and not dparams[name].requires_grad


def test_from_torch_cnn_matches_torch(nsess):
    torch.manual_seed(0)
    tmodel = cnn().double()
    with torch.no_grad():
        tmodel[1].running_mean.add_(0.25)
        tmodel[1].running_var.mul_(1.5)
    tmodel[1].num_batches_tracked += 7
    tmodel[0].bias.requires_grad_(False)
    dmodel = nn.from_torch(tmodel)
    assert repr(dmodel) == repr(tmodel)
    assert list(dmodel.state_dict()) == list(tmodel.state_dict())
    for name, value in tmodel.state_dict().items():
        np.testing.assert_array_equal(dmodel.state_dict()[name], value.numpy(), err_msg=name)
    assert dmodel[0].weight.dtype == np.float64 and int(dmodel[1].num_batches_tracked) == 7
    assert not dmodel[0].bias.requires_grad
    x = np.random.default_rng(1).standard_normal((3, 1, 8, 8))
    tmodel.eval()
    dmodel = nn.from_torch(tmodel)
    assert not any(m.training for m in dmodel.modules())
    _compare(tmodel, dmodel, nsess, x, "eval")
    tmodel.train()
    tmodel[10].p = 0.0  # dropout masks differ between the two libraries
    dmodel = nn.from_torch(tmodel)
    assert all(m.training for m in dmodel.modules())
    _compare(tmodel, dmodel, nsess, x, "train")
    # Training mode updated BatchNorm's running statistics alike.
    _close(dmodel[1].running_mean.numpy(), tmodel[1].running_mean.numpy(), "running_mean")


def small_transformer():
    layer = T.TransformerEncoderLayer(8, 2, dim_feedforward=16, dropout=0.0, batch_first=True,
                                      activation="gelu")
    return T.Sequential(T.Linear(3, 8), T.TransformerEncoder(layer, 2, norm=T.LayerNorm(8)),
                        T.Linear(8, 4))


def test_from_torch_transformer_matches_torch(nsess):
    torch.manual_seed(2)
    tmodel = small_transformer().double()
    dmodel = nn.from_torch(tmodel)
    assert repr(dmodel) == repr(tmodel)
    assert isinstance(dmodel[1].layers[1], nn.TransformerEncoderLayer)
    x = np.random.default_rng(3).standard_normal((2, 5, 3))
    _compare(tmodel, dmodel, nsess, x, "sequential")
    # The encoder alone, with a causal mask and a key padding mask.
    mask = np.triu(np.full((5, 5), -np.inf), 1)
    kpm = np.array([[False] * 5, [False, False, False, True, True]])
    h = np.random.default_rng(4).standard_normal((2, 5, 8))
    tout = tmodel[1](torch.from_numpy(h), mask=torch.from_numpy(mask),
                     src_key_padding_mask=torch.from_numpy(kpm))
    with tensord.no_grad():
        dout = dmodel[1](h, mask=mask, src_key_padding_mask=kpm)
    _close(dout.numpy(), tout.detach().numpy(), "encoder with masks")
    # A layer with a torch activation module and norm_first.
    tlayer = T.TransformerEncoderLayer(8, 4, 12, dropout=0.0, activation=T.GELU(),
                                       norm_first=True).double()
    dlayer = nn.from_torch(tlayer)
    assert isinstance(dlayer.activation, nn.GELU) and dlayer.norm_first
    _compare(tlayer, dlayer, nsess, np.random.default_rng(5).standard_normal((5, 2, 8)),
             "layer")


def seq2seq():
    """A Transformer with a decoder layer whose cross-attention has add_bias_kv and
    add_zero_attn (given after construction: converted on its own)."""
    model = T.Transformer(8, 2, 1, 2, 12, dropout=0.0, activation="gelu", norm_first=True)
    model.decoder.layers[1].multihead_attn = T.MultiheadAttention(8, 2, add_bias_kv=True,
                                                                 add_zero_attn=True)
    return model


def test_from_torch_seq2seq_transformer_matches_torch(nsess):
    torch.manual_seed(8)
    tmodel = seq2seq().double()
    dmodel = nn.from_torch(tmodel)
    assert repr(dmodel) == repr(tmodel) and isinstance(dmodel, nn.Transformer)
    assert list(dmodel.state_dict()) == list(tmodel.state_dict())
    assert dmodel.decoder.layers[1].multihead_attn.bias_k is not None
    rng = np.random.default_rng(9)
    src, tgt = rng.standard_normal((5, 2, 8)), rng.standard_normal((3, 2, 8))
    tmask = T.Transformer.generate_square_subsequent_mask(3).double()
    tout = tmodel(torch.from_numpy(src), torch.from_numpy(tgt), tgt_mask=tmask)
    g = rng.standard_normal(tuple(tout.shape))
    (tout * torch.from_numpy(g)).sum().backward()
    dout = dmodel(src, tgt, tgt_mask=nn.Transformer.generate_square_subsequent_mask(3))
    _close(dout.numpy(), tout.detach().numpy(), "forward")
    nsess.op("sum", dout * g).backward()
    dparams = dict(dmodel.named_parameters())
    for name, p in tmodel.named_parameters():
        _close(dparams[name].grad.numpy(), p.grad.numpy(), f"gradient of {name}")


def zoo():
    return T.ModuleDict({
        "attention": T.MultiheadAttention(8, 2, kdim=4, vdim=6, batch_first=True, bias=False),
        "attention_kv": T.MultiheadAttention(8, 2, add_bias_kv=True, add_zero_attn=True,
                                             kdim=3),
        "decoder": T.TransformerDecoder(T.TransformerDecoderLayer(8, 2, 12, batch_first=True),
                                        2, norm=T.LayerNorm(8)),
        "convs": T.ModuleList([T.Conv3d(2, 3, 2, padding=1, groups=1),
                               T.ConvTranspose1d(4, 2, 3, stride=2, output_padding=1),
                               T.Conv1d(2, 4, 3, padding_mode="circular", padding=1)]),
        "norms": T.Sequential(T.BatchNorm1d(4, momentum=None), T.GroupNorm(2, 4),
                              T.LayerNorm([4], elementwise_affine=False), T.Embedding(5, 4, 1)),
        "pools": T.Sequential(T.AvgPool2d(3, 2, 1, count_include_pad=False),
                              T.MaxPool1d(2, return_indices=True), T.AdaptiveMaxPool2d((2, 1))),
        "acts": T.Sequential(T.Softplus(2.0, 10.0), T.Hardtanh(-2, 2), T.ELU(0.5), T.SiLU(),
                             T.Softmax(dim=0), T.Identity()),
        "losses": T.ModuleList([T.CrossEntropyLoss(weight=torch.tensor([1.0, 2.0]),
                                                   label_smoothing=0.1),
                                T.BCEWithLogitsLoss(pos_weight=torch.tensor([3.0])),
                                T.HuberLoss(delta=0.5), T.KLDivLoss(reduction="batchmean")]),
    })


def test_to_torch_round_trips(nsess):
    torch.manual_seed(6)
    for make in (cnn, small_transformer, zoo, seq2seq):
        tmodel = make().double().eval()
        back = nn.from_torch(tmodel).to_torch()
        assert type(back) is type(tmodel) and repr(back) == repr(tmodel) and not back.training
        for (name, a), (other, b) in zip(back.state_dict().items(),
                                         tmodel.state_dict().items()):
            assert name == other and a.dtype == b.dtype and torch.equal(a, b), name
    # A model written with tensord.nn, trained a step, then handed to torch.
    tensord.manual_seed(7)
    model = nn.Sequential(nn.Embedding(12, 8, padding_idx=0), nn.Identity(), nn.LayerNorm(8),
                          nn.Linear(8, 3), nn.Softmax(dim=-1))
    model[3].weight.requires_grad_(False)
    idx = np.array([[1, 2, 0], [5, 11, 3]])
    opt = tensord.optim.SGD(model.parameters(), lr=0.5)
    loss = nn.functional.nll_loss(model(idx).reshape(6, 3), np.array([0, 1, 2, 0, 1, 2]))
    loss.backward()
    opt.step()
    tmodel = model.to_torch()
    assert repr(tmodel) == repr(model) and not tmodel[3].weight.requires_grad
    with tensord.no_grad():
        want = model(idx).numpy()
    np.testing.assert_allclose(tmodel(torch.from_numpy(idx)).detach().numpy(), want,
                               rtol=1e-6, atol=1e-6)
    # bf16 layers keep their dtype and values both ways.
    tl = T.Linear(4, 3).to(torch.bfloat16)
    dl = nn.from_torch(tl)
    assert dl.weight.dtype == "bf16" and torch.equal(dl.weight.torch(), tl.weight.detach())
    back = dl.to_torch()
    assert back.weight.dtype == torch.bfloat16 and torch.equal(back.weight, tl.weight)


def test_unsupported_layers_are_named(nsess):
    class Block(T.Module):
        def __init__(self):
            super().__init__()
            self.fc = T.Linear(2, 2)

        def forward(self, x):
            return self.fc(x).relu()

    model = T.Sequential(T.Linear(2, 2), T.ModuleDict({"blocks": T.ModuleList([T.ReLU(),
                                                                               Block()])}))
    with pytest.raises(NotImplementedError) as err:
        nn.from_torch(model)
    text = str(err.value)
    assert "'1.blocks.1' (Block)" in text and "its own forward()" in text
    with pytest.raises(NotImplementedError, match=r"'0' \(Bilinear\): torch.nn.Bilinear has "
                                                  "no tensord.nn counterpart"):
        nn.from_torch(T.Sequential(T.Bilinear(2, 2, 2)))
    with pytest.raises(NotImplementedError, match="the model itself"):
        nn.from_torch(Block())
    with pytest.raises(TypeError, match="torch.nn.Module"):
        nn.from_torch(nn.Linear(2, 2))

    class Mine(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(2, 2)

        def forward(self, x):
            return self.fc(x)

    with pytest.raises(NotImplementedError, match=r"'2' \(Mine\).*its own forward\(\)"):
        nn.Sequential(nn.Linear(2, 2), nn.ReLU(), Mine()).to_torch()
    if "bias" not in inspect.signature(T.LayerNorm.__init__).parameters:  # torch < 2.1
        with pytest.raises(NotImplementedError, match=r"'0' \(LayerNorm\): torch.nn.LayerNorm"):
            nn.Sequential(nn.LayerNorm(4, bias=False)).to_torch()
        with pytest.raises(NotImplementedError, match="has no bias argument"):
            nn.TransformerEncoderLayer(8, 2, bias=False).to_torch()
        with pytest.raises(NotImplementedError, match="has no bias argument"):
            nn.TransformerDecoderLayer(8, 2, bias=False).to_torch()
