"""tensord.nn.MultiheadAttention, TransformerEncoderLayer, TransformerEncoder,
TransformerDecoderLayer, TransformerDecoder and Transformer against torch.nn's with the same
weights (dropout 0, train and eval mode): outputs, attention weights, the inputs' and every
parameter's gradients (f64 to 1e-10), over the layouts (batch_first, unbatched), the masks
(bool / float attn_mask, key_padding_mask, both; numpy or tensors; the causal mask of
generate_square_subsequent_mask), add_bias_kv / add_zero_attn and both attention paths
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
    extra = nn.MultiheadAttention(16, 4, add_bias_kv=True, add_zero_attn=True)
    textra = torch.nn.MultiheadAttention(16, 4, add_bias_kv=True, add_zero_attn=True)
    assert [(n, p.shape) for n, p in extra.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in textra.named_parameters()]
    assert extra.bias_k.shape == (1, 1, 16) and extra.add_zero_attn and m.bias_k is None
    assert 0 < extra.bias_k.numpy().std() < 1  # xavier_normal: std sqrt(2 / (16 + 16))
    x = np.zeros((3, 2, 16), np.float32)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        m(x, x, x, is_causal=True)
    with pytest.raises(AssertionError, match="only bool and floating"):
        m(x, x, x, key_padding_mask=np.zeros((2, 3), np.int64))


EXTRA_KEYS = [
    ("bias-kv", dict(add_bias_kv=True)),
    ("zero-attn", dict(add_zero_attn=True)),
    ("both", dict(add_bias_kv=True, add_zero_attn=True)),
    ("both-kdim-vdim", dict(add_bias_kv=True, add_zero_attn=True, kdim=3, vdim=5)),
    ("both-batch-first", dict(add_bias_kv=True, add_zero_attn=True, batch_first=True)),
    ("both-unbatched", dict(add_bias_kv=True, add_zero_attn=True)),
]


@pytest.mark.parametrize("need_weights", [True, False], ids=["weights", "sdpa"])
@pytest.mark.parametrize("masks", ["none", "causal+padding", "float+padding", "tensors"])
@pytest.mark.parametrize("case,kwargs", EXTRA_KEYS, ids=[c[0] for c in EXTRA_KEYS])
def test_attention_bias_kv_and_zero_attn(nsess, case, kwargs, masks, need_weights):
    """add_bias_kv / add_zero_attn: one or two more keys and values, which every query attends
    (the masks are padded for them), against torch with the same bias_k / bias_v."""
    torch.manual_seed(16)
    rng = np.random.default_rng(17)
    L, S, n = 4, 6, 2
    kdim, vdim = kwargs.get("kdim", E), kwargs.get("vdim", E)
    q, k, v = (rng.standard_normal((L, n, E)), rng.standard_normal((S, n, kdim)),
               rng.standard_normal((S, n, vdim)))
    attn_mask, kpm = _mask_values(rng, "float+padding" if masks == "tensors" else masks, n,
                                  L, S)
    inputs = [q, k, v]
    if kwargs.get("batch_first"):
        inputs = [a.transpose(1, 0, 2).copy() for a in inputs]
    elif case == "both-unbatched":
        inputs = [a[:, 0].copy() for a in inputs]
        if attn_mask is not None and attn_mask.ndim == 3:
            attn_mask = attn_mask[:H]
        kpm = None if kpm is None else kpm[-1].copy()
    tmod, dmod = _mha(torch.nn, **kwargs), _mha(nn, **kwargs)
    dmasks = {"attn_mask": attn_mask, "key_padding_mask": kpm}
    if masks == "tensors":  # tensord tensors: a float attn_mask, a bool key_padding_mask
        dmasks = {key: None if val is None else nsess.tensor(val) for key, val in dmasks.items()}

    def call(m, *args):
        if m is tmod:
            return m(*args, attn_mask=_as_torch(attn_mask), key_padding_mask=_as_torch(kpm),
                     need_weights=need_weights)
        return m(*args, need_weights=need_weights, **dmasks)

    outs = check(nsess, tmod, dmod, inputs, call)
    if need_weights:
        extra = kwargs.get("add_bias_kv", False) + kwargs.get("add_zero_attn", False)
        assert outs[1].shape[-1] == S + extra


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


DECODER_CASES = [
    ("relu", dict(), (4, 3), (6, 3)),
    ("gelu-norm-first", dict(activation="gelu", norm_first=True), (4, 3), (6, 3)),
    ("batch-first", dict(batch_first=True, layer_norm_eps=1e-3), (3, 4), (3, 6)),
]


def _decoder_masks(rng, kind, n, T, S):
    """(tgt_mask, memory_mask, tgt_key_padding_mask, memory_key_padding_mask) for a case."""
    tgt_mask, tgt_kpm = _mask_values(rng, kind, n, T, T)
    memory_mask, memory_kpm = _mask_values(rng, kind, n, T, S)
    return tgt_mask, memory_mask, tgt_kpm, memory_kpm


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("masks", ["none", "causal+padding", "float+padding"])
@pytest.mark.parametrize("kwargs,tgt_shape,mem_shape", [c[1:] for c in DECODER_CASES],
                         ids=[c[0] for c in DECODER_CASES])
def test_decoder_layer_matches_torch(nsess, kwargs, tgt_shape, mem_shape, masks, mode):
    """TransformerDecoderLayer: outputs, the gradients of tgt and memory and of every
    parameter, with every mask of both attentions, in train and eval mode (dropout 0)."""
    torch.manual_seed(18)
    rng = np.random.default_rng(19)
    bf = kwargs.get("batch_first", False)
    n = tgt_shape[0] if bf else tgt_shape[1]
    T, S = (tgt_shape[1], mem_shape[1]) if bf else (tgt_shape[0], mem_shape[0])
    tgt_mask, memory_mask, tgt_kpm, memory_kpm = _decoder_masks(rng, masks, n, T, S)
    tgt, memory = rng.standard_normal((*tgt_shape, E)), rng.standard_normal((*mem_shape, E))
    tmod = torch.nn.TransformerDecoderLayer(E, H, 16, dropout=0.0, dtype=torch.float64,
                                            **kwargs)
    dmod = nn.TransformerDecoderLayer(E, H, 16, dropout=0.0, dtype="f64", **kwargs)
    assert repr(dmod) == repr(tmod)
    tmod.train(mode == "train")
    dmod.train(mode == "train")
    masks_kw = dict(tgt_mask=tgt_mask, memory_mask=memory_mask, tgt_key_padding_mask=tgt_kpm,
                    memory_key_padding_mask=memory_kpm)

    def call(m, t, mem):
        kw = {k: _as_torch(v) for k, v in masks_kw.items()} if m is tmod else masks_kw
        return (m(t, mem, **kw),)

    check(nsess, tmod, dmod, [tgt, memory], call)


def test_decoder_stack_matches_torch_and_layers_are_copies(nsess):
    torch.manual_seed(20)
    rng = np.random.default_rng(21)

    def build(ns, dt):
        layer = ns.TransformerDecoderLayer(E, H, 12, dropout=0.0, batch_first=True,
                                           norm_first=True, dtype=dt)
        return ns.TransformerDecoder(layer, 3, norm=ns.LayerNorm(E, dtype=dt))

    tmod, dmod = build(torch.nn, torch.float64), build(nn, "f64")
    assert repr(dmod) == repr(tmod)
    names = [n for n, _ in dmod.named_parameters()]
    assert names == [n for n, _ in tmod.named_parameters()] and len(names) == 3 * 18 + 2
    layers = list(dmod.layers)
    assert len({m.multihead_attn.in_proj_weight.handle for m in layers}) == 3
    np.testing.assert_array_equal(layers[0].linear2.weight.numpy(),
                                  layers[2].linear2.weight.numpy())
    tgt_mask = np.triu(np.full((4, 4), -np.inf), 1)
    memory_kpm = np.array([[False] * 5, [False, False, False, True, True]])
    tgt, memory = rng.standard_normal((2, 4, E)), rng.standard_normal((2, 5, E))

    def call(m, t, mem):
        if m is tmod:
            return (m(t, mem, tgt_mask=_as_torch(tgt_mask),
                      memory_key_padding_mask=_as_torch(memory_kpm)),)
        return (m(t, mem, tgt_mask=tgt_mask, memory_key_padding_mask=memory_kpm,
                  tgt_is_causal=True),)

    check(nsess, tmod, dmod, [tgt, memory], call)
    with pytest.raises(RuntimeError, match="Need attn_mask"):
        dmod(tgt, memory, tgt_is_causal=True)


TRANSFORMER_CASES = [
    ("relu", dict()),
    ("gelu-norm-first", dict(activation="gelu", norm_first=True, layer_norm_eps=1e-4)),
    ("batch-first", dict(batch_first=True)),
    ("unbatched", dict()),
]


@pytest.mark.parametrize("mode", ["train", "eval"])
@pytest.mark.parametrize("case,kwargs", TRANSFORMER_CASES, ids=[c[0] for c in TRANSFORMER_CASES])
def test_transformer_matches_torch(nsess, case, kwargs, mode):
    """nn.Transformer (2 encoder and 2 decoder layers) with every mask: the causal tgt_mask of
    generate_square_subsequent_mask (a tensor of the session), a float memory_mask, a bool
    src_mask and the three key padding masks; outputs, the gradients of src and tgt and of
    every parameter, in train and eval mode (dropout 0)."""
    torch.manual_seed(22)
    rng = np.random.default_rng(23)
    S, T, n = 5, 4, 3
    tmod = torch.nn.Transformer(E, H, 2, 2, 16, dropout=0.0, dtype=torch.float64, **kwargs)
    dmod = nn.Transformer(E, H, 2, 2, 16, dropout=0.0, dtype="f64", **kwargs)
    assert repr(dmod) == repr(tmod)
    assert [n for n, _ in dmod.named_parameters()] == [n for n, _ in tmod.named_parameters()]
    tmod.train(mode == "train")
    dmod.train(mode == "train")
    if case == "unbatched":
        src, tgt = rng.standard_normal((S, E)), rng.standard_normal((T, E))
        src_kpm, tgt_kpm = np.array([False] * 3 + [True] * 2), np.array([False] * 4)
    else:
        shape = (lambda L: (n, L, E)) if kwargs.get("batch_first") else (lambda L: (L, n, E))
        src, tgt = rng.standard_normal(shape(S)), rng.standard_normal(shape(T))
        src_kpm = np.zeros((n, S), bool)
        src_kpm[0, -2:] = True
        tgt_kpm = np.zeros((n, T), bool)
        tgt_kpm[-1, -1] = True
    tmask = torch.nn.Transformer.generate_square_subsequent_mask(T).double()
    dmask = nn.Transformer.generate_square_subsequent_mask(T, dtype="f64")
    src_mask = np.eye(S, k=1, dtype=bool)  # each position may not attend its successor
    memory_mask = rng.standard_normal((T, S))
    masks = dict(src_mask=src_mask, memory_mask=memory_mask, src_key_padding_mask=src_kpm,
                 tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=src_kpm)

    def call(m, s, t):
        if m is tmod:
            return (m(s, t, tgt_mask=tmask, **{k: _as_torch(v) for k, v in masks.items()}),)
        return (m(s, t, tgt_mask=dmask, **masks),)

    check(nsess, tmod, dmod, [src, tgt], call)


def test_transformer_init_mask_errors_and_batch(nsess):
    tensord.manual_seed(24)
    m = nn.Transformer(16, 4, 1, 1, 32)
    assert m.d_model == 16 and m.nhead == 4 and not m.batch_first
    assert repr(m) == repr(torch.nn.Transformer(16, 4, 1, 1, 32))
    # _reset_parameters: every matrix xavier_uniform (linear1: bound sqrt(6 / (16 + 32))).
    w = m.encoder.layers[0].linear1.weight.numpy()
    bound = np.sqrt(6 / (16 + 32))
    assert np.abs(w).max() <= bound and np.abs(w).max() > 0.9 * bound
    assert not m.decoder.layers[0].self_attn.in_proj_bias.numpy().any()
    np.testing.assert_array_equal(m.decoder.norm.weight.numpy(), np.ones(16, np.float32))
    # The causal mask: -inf above the diagonal, float32 unless told, made on the server.
    mask = nn.Transformer.generate_square_subsequent_mask(5)
    assert isinstance(mask, tensord.Tensor) and mask.dtype == np.float32
    np.testing.assert_array_equal(mask.numpy(),
                                  torch.nn.Transformer.generate_square_subsequent_mask(5).numpy())
    x = np.zeros((3, 2, 16), np.float32)
    with pytest.raises(RuntimeError, match="batch number of src and tgt"):
        m(x, np.zeros((3, 1, 16), np.float32))
    with pytest.raises(RuntimeError, match="feature number"):
        m(x, np.zeros((3, 2, 8), np.float32))
    # Custom encoder and decoder are taken as they are (and re-drawn, as PyTorch's).
    enc = nn.TransformerEncoder(nn.TransformerEncoderLayer(16, 4, 8), 1)
    dec = nn.TransformerDecoder(nn.TransformerDecoderLayer(16, 4, 8), 2)
    custom = nn.Transformer(16, 4, custom_encoder=enc, custom_decoder=dec)
    assert custom.encoder is enc and len(custom.decoder.layers) == 2
    # Eval inside one batch (no shapes read): torch's values, bias_kv attention included.
    torch.manual_seed(25)
    tmod = torch.nn.Transformer(E, H, 1, 1, 16, dropout=0.5, batch_first=True).double().eval()
    tmod.decoder.layers[0].multihead_attn = torch.nn.MultiheadAttention(
        E, H, add_bias_kv=True, add_zero_attn=True, batch_first=True, dtype=torch.float64)
    dmod = nn.from_torch(tmod)
    assert dmod.decoder.layers[0].multihead_attn.bias_k is not None and not dmod.training
    rng = np.random.default_rng(26)
    src, tgt = rng.standard_normal((2, 5, E)), rng.standard_normal((2, 3, E))
    causal = nn.Transformer.generate_square_subsequent_mask(3)
    kpm = np.array([[False] * 5, [False, False, False, True, True]])
    with torch.no_grad():  # (torch's fast path; without src_key_padding_mask, same values)
        want = tmod(torch.from_numpy(src), torch.from_numpy(tgt), tgt_mask=causal.torch(),
                    memory_key_padding_mask=torch.from_numpy(kpm)).numpy()
    with tensord.no_grad():
        with nsess.batch():
            out = dmod(nsess.tensor(src) * 1.0, nsess.tensor(tgt) * 1.0, tgt_mask=causal,
                       memory_key_padding_mask=kpm)
    _close(out.numpy(), want, "eval in a batch")


@pytest.mark.parametrize("dtype,tol", [("f32", 1e-5), ("bf16", 5e-2)])
def test_transformer_low_precision(nsess, dtype, tol):
    torch.manual_seed(27)
    tmod = torch.nn.Transformer(E, H, 2, 2, 16, dropout=0.0, batch_first=True).eval()
    dmod = nn.Transformer(E, H, 2, 2, 16, dropout=0.0, batch_first=True, dtype=dtype).eval()
    dmod.load_state_dict(tmod.state_dict())
    rng = np.random.default_rng(28)
    src = rng.standard_normal((2, 5, E)).astype(np.float32)
    tgt = rng.standard_normal((2, 4, E)).astype(np.float32)
    with torch.no_grad():
        want = tmod(torch.from_numpy(src), torch.from_numpy(tgt),
                    tgt_mask=torch.nn.Transformer.generate_square_subsequent_mask(4)).numpy()
    with tensord.no_grad():
        got = dmod(nsess.tensor(src, dtype=dtype), nsess.tensor(tgt, dtype=dtype),
                   tgt_mask=nn.Transformer.generate_square_subsequent_mask(4))
    assert tensord.dtypes.name(got.dtype) == dtype
    np.testing.assert_allclose(got.numpy().astype(np.float64), want, rtol=tol, atol=tol)
