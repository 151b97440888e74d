"""tensord.nn.MultiheadAttention, TransformerEncoderLayer and TransformerEncoder against
torch.nn's with the same weights (dropout 0): outputs, attention weights, the inputs' and
every parameter's gradients (f64 to 1e-10), over the layouts (batch_first, unbatched), the
masks (bool / float attn_mask, key_padding_mask, both) and both attention paths
(need_weights=True: softmax written out; False: the scaled_dot_product_attention op); plus
ConvTranspose2d's output_size, copy.deepcopy of modules and the reprs."""
import copy

import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn

TOL = 1e-10
E, H = 8, 2


def _close(got, want, what, tol=TOL):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


def _as_torch(value):
    return torch.from_numpy(value.copy()) if isinstance(value, np.ndarray) else value


def check(sess, tmod, dmod, inputs, call, seed=0):
    """`call(module, *inputs)` returns a tuple of outputs (None for absent ones); inputs are
    numpy arrays (a repeated object stays one tensor on both sides, as self-attention needs).
    Compares the outputs, then the gradients of sum(out0 * g) w.r.t. the floating inputs and
    every parameter."""
    rng = np.random.default_rng(seed)
    dmod.load_state_dict(tmod.state_dict())
    sess.grad_context()
    tin, din, seen = [], [], {}
    for x in inputs:
        if id(x) not in seen:
            floating = isinstance(x, np.ndarray) and x.dtype.kind == "f"
            t = torch.from_numpy(x.copy()).requires_grad_(floating)
            d = sess.tensor(x, requires_grad=floating)
            seen[id(x)] = (t, d)
        tin.append(seen[id(x)][0])
        din.append(seen[id(x)][1])
    touts, douts = call(tmod, *tin), call(dmod, *din)
    assert len(touts) == len(douts)
    for i, (t, d) in enumerate(zip(touts, douts)):
        assert (t is None) == (d is None), f"output {i}"
        if t is not None:
            assert d.shape == tuple(t.shape), f"output {i} shape"
            _close(d.numpy(), t.detach().numpy(), f"output {i}")
    g = rng.standard_normal(tuple(touts[0].shape))
    (touts[0] * torch.from_numpy(g)).sum().backward()
    sess.op("sum", douts[0] * g).backward()
    for i, (t, d) in enumerate(seen.values()):
        if t.requires_grad:
            _close(d.grad.numpy(), t.grad.numpy(), f"gradient of input {i}")
    dparams = dict(dmod.named_parameters())
    assert list(dparams) == [n for n, _ in tmod.named_parameters()]
    for name, p in tmod.named_parameters():
        _close(dparams[name].grad.numpy(), p.grad.numpy(), f"gradient of {name}")
    return douts


def _mha(ns, **kwargs):
    dt = {"dtype": torch.float64} if ns is torch.nn else {"dtype": "f64"}
    return ns.MultiheadAttention(E, H, **kwargs, **dt)


def _mask_values(rng, kind, n, L, S):
    """(attn_mask, key_padding_mask) numpy values for a mask case."""
    causal = np.triu(np.ones((L, S), bool), 1)
    kpm = np.zeros((n, S), bool)
    kpm[0, -2:] = True
    kpm[-1, -1] = True
    floats = rng.standard_normal((n * H, L, S))
    return {
        "none": (None, None),
        "bool-causal": (causal, None),
        "float-3d": (floats, None),
        "float-2d": (np.where(causal, -np.inf, 0.0), None),
        "padding": (None, kpm),
        "float-padding": (None, np.where(kpm, -np.inf, 0.0)),
        "causal+padding": (causal, kpm),
        "float+padding": (floats, kpm),
    }[kind]


MASKS = ["none", "bool-causal", "float-3d", "float-2d", "padding", "float-padding",
         "causal+padding", "float+padding"]


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "sdpa"])
@pytest.mark.parametrize("masks", MASKS)
def test_self_attention_masks(nsess, masks, need_weights):
    torch.manual_seed(0)
    rng = np.random.default_rng(1)
    L, n = 5, 3
    attn_mask, kpm = _mask_values(rng, masks, n, L, L)
    x = rng.standard_normal((L, n, E))

    def call(m, q):
        return m(q, q, q, key_padding_mask=_as_torch(kpm) if m is tmod else kpm,
                 need_weights=need_weights,
                 attn_mask=_as_torch(attn_mask) if m is tmod else attn_mask)

    tmod, dmod = _mha(torch.nn), _mha(nn)
    check(nsess, tmod, dmod, [x], call)


@pytest.mark.parametrize("case", ["batch_first", "cross", "key-is-value", "kdim-vdim",
                                  "no-bias", "per-head-weights", "unbatched",
                                  "unbatched-masks"])
def test_attention_layouts(nsess, case):
    torch.manual_seed(2)
    rng = np.random.default_rng(3)
    L, S, n = 4, 6, 2
    kwargs, call_kwargs = {}, {}
    q, k, v = (rng.standard_normal((L, n, E)), rng.standard_normal((S, n, E)),
               rng.standard_normal((S, n, E)))
    inputs = [q, k, v]
    if case == "batch_first":
        kwargs["batch_first"] = True
        inputs = [a.transpose(1, 0, 2).copy() for a in inputs]
    elif case == "key-is-value":
        inputs = [q, k, k]
    elif case == "kdim-vdim":
        kwargs.update(kdim=3, vdim=5)
        inputs = [q, rng.standard_normal((S, n, 3)), rng.standard_normal((S, n, 5))]
    elif case == "no-bias":
        kwargs["bias"] = False
    elif case == "per-head-weights":
        call_kwargs["average_attn_weights"] = False
    elif case == "unbatched":
        inputs = [q[:, 0].copy(), k[:, 0].copy(), v[:, 0].copy()]
    elif case == "unbatched-masks":
        inputs = [q[:, 0].copy(), k[:, 0].copy(), v[:, 0].copy()]
        kpm = np.array([False, False, True, False, False, True])
        call_kwargs["attn_mask"] = rng.standard_normal((H, L, S))
        call_kwargs["key_padding_mask"] = kpm
    tmod, dmod = _mha(torch.nn, **kwargs), _mha(nn, **kwargs)

    def call(m, *args):
        kw = {key: _as_torch(val) if m is tmod else val for key, val in call_kwargs.items()}
        return m(*args, **kw)

    outs = check(nsess, tmod, dmod, inputs, call)
    if case == "per-head-weights":
        assert outs[1].shape == (n, H, L, S)
    # need_weights=False: the same output through the scaled_dot_product_attention op.
    with tensord.no_grad():
        out, weights = dmod(*inputs, need_weights=False, **call_kwargs)
    assert weights is None
    _close(out.numpy(), outs[0].numpy(), "sdpa path")


def test_attention_parameters_init_and_errors(nsess):
    tensord.manual_seed(4)
    m = nn.MultiheadAttention(16, 4)
    t = torch.nn.MultiheadAttention(16, 4)
    assert [(n, p.shape) for n, p in m.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in t.named_parameters()]
    assert repr(m) == repr(t) and m.head_dim == 4 and m.in_proj_weight.dtype == np.float32
    w = m.in_proj_weight.numpy()
    bound = np.sqrt(6 / (16 + 48))  # xavier_uniform over [3E, E]
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not m.in_proj_bias.numpy().any() and not m.out_proj.bias.numpy().any()
    sep = nn.MultiheadAttention(16, 4, kdim=8, vdim=4)
    assert [n for n, _ in sep.named_parameters()] == \
        [n for n, _ in torch.nn.MultiheadAttention(16, 4, kdim=8, vdim=4).named_parameters()]
    with pytest.raises(AssertionError, match="divisible"):
        nn.MultiheadAttention(10, 3)
    with pytest.raises(NotImplementedError, match="add_bias_kv"):
        nn.MultiheadAttention(8, 2, add_bias_kv=True)
    x = np.zeros((3, 2, 16), np.float32)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="only bool and floating"):
        m(x, x, x, key_padding_mask=np.zeros((2, 3), np.int64))


def test_attention_dropout_and_batch(nsess):
    torch.manual_seed(5)
    tmod, dmod = _mha(torch.nn, dropout=0.5), _mha(nn, dropout=0.5)
    dmod.load_state_dict(tmod.state_dict())
    x = np.random.default_rng(6).standard_normal((4, 2, E))
    tmod.eval()
    want = tmod(*[torch.from_numpy(x)] * 3)[0].detach().numpy()
    # Training: dropout on the attention weights (written out, also with need_weights=False).
    tensord.manual_seed(0)
    out, weights = dmod(x, x, x)
    assert not np.allclose(out.numpy(), want)
    w = weights.numpy()
    assert w.shape == (2, 4, 4) and np.allclose(w.sum(-1), 1)  # the weights before dropout
    tensord.manual_seed(0)
    again, _ = dmod(x, x, x, need_weights=False)
    _close(again.numpy(), out.numpy(), "same seed, same masks")
    # Eval: no dropout, torch's values; also inside one batch (no shapes needed).
    dmod.eval()
    with tensord.no_grad():
        with nsess.batch():
            out, _ = dmod(nsess.tensor(x) * 1.0, x, x, need_weights=False)
        _close(out.numpy(), want, "eval in a batch")


ENCODER_CASES = [
    ("relu", dict(), (5, 3)),
    ("gelu-norm-first", dict(activation="gelu", norm_first=True), (5, 3)),
    ("batch-first", dict(batch_first=True, layer_norm_eps=1e-3), (3, 5)),
]


@pytest.mark.parametrize("kwargs,shape", [c[1:] for c in ENCODER_CASES],
                         ids=[c[0] for c in ENCODER_CASES])
@pytest.mark.parametrize("masks", ["none", "causal+padding", "float-2d"])
def test_encoder_layer_matches_torch(nsess, kwargs, shape, masks):
    torch.manual_seed(7)
    rng = np.random.default_rng(8)
    first, second = shape
    n = first if kwargs.get("batch_first") else second
    L = second if kwargs.get("batch_first") else first
    attn_mask, kpm = _mask_values(rng, masks, n, L, L)
    x = rng.standard_normal((first, second, E))
    tmod = torch.nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, dtype=torch.float64, **kwargs)
    dmod = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, dtype="f64", **kwargs)
    assert repr(dmod) == repr(tmod)

    def call(m, src):
        if m is tmod:
            return (m(src, src_mask=_as_torch(attn_mask), src_key_padding_mask=_as_torch(kpm)),)
        return (m(src, src_mask=attn_mask, src_key_padding_mask=kpm),)

    check(nsess, tmod, dmod, [x], call)


def test_encoder_stack_matches_torch_and_layers_are_copies(nsess):
    torch.manual_seed(9)
    rng = np.random.default_rng(10)

    def build(ns, dt):
        layer = ns.TransformerEncoderLayer(E, H, 12, dropout=0.0, batch_first=True,
                                           activation="gelu", dtype=dt)
        return ns.TransformerEncoder(layer, 3, norm=ns.LayerNorm(E, dtype=dt))

    tmod, dmod = build(torch.nn, torch.float64), build(nn, "f64")
    names = [n for n, _ in dmod.named_parameters()]
    assert names == [n for n, _ in tmod.named_parameters()] and len(names) == 3 * 12 + 2
    layers = list(dmod.layers)
    assert len({id(m.linear1.weight) for m in layers}) == 3
    # The copies start equal and are independent tensors.
    np.testing.assert_array_equal(layers[0].linear1.weight.numpy(),
                                  layers[2].linear1.weight.numpy())
    assert len({m.linear1.weight.handle for m in layers}) == 3
    mask = np.triu(np.full((4, 4), -np.inf), 1)
    x = rng.standard_normal((2, 4, E))
    check(nsess, tmod, dmod, [x], lambda m, src: (m(src, mask=_as_torch(mask) if m is tmod
                                                    else mask),))


def test_module_deepcopy(nsess):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    model[1].num_batches_tracked = np.array(3, np.int64)
    twin = copy.deepcopy(model)
    assert type(twin) is nn.Sequential and repr(twin) == repr(model)
    for (name, a), b in zip(model.state_dict(keep_vars=True).items(),
                            twin.state_dict(keep_vars=True).values()):
        assert a is not b, name
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=name)
    p = twin[0].weight
    assert isinstance(p, nn.Parameter) and p.requires_grad and p.is_leaf
    with tensord.no_grad():
        nsess.op("assign", twin[0].weight, 0.0)
    assert model[0].weight.numpy().any()  # the original is untouched
    twin.zero_grad()
    nsess.op("sum", twin(np.ones((2, 3), np.float32))).backward()
    assert twin[0].weight.grad is not None and model[0].weight.grad is None


def test_conv_transpose_output_size_init_and_repr(nsess):
    torch.manual_seed(11)
    tmod = torch.nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, dtype=torch.float64)
    dmod = nn.ConvTranspose2d(2, 3, 3, stride=2, padding=1, dtype="f64")
    dmod.load_state_dict(tmod.state_dict())
    x = np.random.default_rng(12).standard_normal((1, 2, 4, 4))
    for size in ([8, 8], [1, 3, 8, 7], None):
        want = tmod(torch.from_numpy(x), output_size=size).detach().numpy()
        _close(dmod(x, output_size=size).numpy(), want, f"output_size={size}")
    with pytest.raises(ValueError, match="valid sizes"):
        dmod(x, output_size=[10, 10])
    with pytest.raises(ValueError, match="zeros"):
        nn.ConvTranspose2d(2, 3, 3, padding_mode="reflect")
    tensord.manual_seed(13)
    w = nn.ConvTranspose2d(16, 8, 3, groups=2).weight.numpy()
    assert w.shape == (16, 4, 3, 3)
    bound = 1 / np.sqrt(4 * 9)  # fan_in of a transposed weight: out / groups * kernel
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.95 * bound

    def build(ns):
        return ns.Sequential(ns.ConvTranspose2d(3, 4, 3, stride=2, output_padding=1),
                             ns.ConvTranspose1d(2, 2, 3, bias=False),
                             ns.Conv3d(2, 4, (1, 2, 3), padding=(0, 1, 1)),
                             ns.MultiheadAttention(8, 2, batch_first=True),
                             ns.TransformerEncoderLayer(8, 2, 16, norm_first=True))

    text, want = repr(build(nn)), repr(build(torch.nn))
    assert text == want


@pytest.mark.parametrize("dtype,tol", [("f32", 1e-5), ("bf16", 5e-2)])
def test_encoder_layer_low_precision(nsess, dtype, tol):
    torch.manual_seed(14)
    tmod = torch.nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, batch_first=True)
    dmod = nn.TransformerEncoderLayer(E, H, 16, dropout=0.0, batch_first=True, dtype=dtype)
    dmod.load_state_dict(tmod.state_dict())
    assert all(tensord.dtypes.name(p.dtype) == dtype for p in dmod.parameters())
    rng = np.random.default_rng(15)
    x = rng.standard_normal((2, 5, E)).astype(np.float32)
    kpm = np.array([[False] * 5, [False, False, False, False, True]])
    causal = np.triu(np.ones((5, 5), bool), 1)
    want = tmod(torch.from_numpy(x), src_mask=torch.from_numpy(causal),
                src_key_padding_mask=torch.from_numpy(kpm)).detach().numpy()
    xin = nsess.tensor(x, dtype=dtype)
    with tensord.no_grad():
        got = dmod(xin, src_mask=causal, src_key_padding_mask=kpm)
        weights = dmod.self_attn(xin, xin, xin, attn_mask=causal.astype(np.float64) * -1e9,
                                 key_padding_mask=kpm)[1]
    assert tensord.dtypes.name(got.dtype) == tensord.dtypes.name(weights.dtype) == dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=tol, atol=tol)
    w = weights.numpy()
    assert np.allclose(w.sum(-1), 1, atol=tol) and np.all(w[1, :, 4] == 0)
    assert np.all(np.triu(w[0], 1) == 0)
