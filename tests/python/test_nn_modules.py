"""tensord.nn layers against torch.nn with the same weights: forward, the input's and every
parameter's gradient, and the buffers (f64 to 1e-10; f32 at per-op tolerances); PyTorch's
default initialization, the Module API (names, state_dict both ways, train/eval, to(dtype),
repr) and tensord.nn.functional's attribute names against the server's catalog."""
import inspect
import math

import numpy as np
import pytest
import torch

import tensord
import tensord.nn as nn
import tensord.nn.functional as F

T64 = {"dtype": torch.float64}
D64 = {"dtype": "f64"}
TOL64 = 1e-10


def _close(got, want, tol, what):
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=what)


def check_module(sess, tmod, dmod, x, tol=TOL64, seed=0):
    """Forward, backward (of sum(out * g), g random) and state of dmod against tmod."""
    rng = np.random.default_rng(seed)
    dmod.load_state_dict(tmod.state_dict())
    floating = x.dtype.kind == "f"
    xt = torch.from_numpy(x.copy()).requires_grad_(floating)
    sess.grad_context()
    xd = sess.tensor(x, requires_grad=floating)
    tout, dout = tmod(xt), dmod(xd)
    _close(dout.numpy(), tout.detach().numpy(), tol, "forward")
    g = rng.standard_normal(tuple(tout.shape)).astype(x.dtype if floating else np.float64)
    (tout * torch.from_numpy(g).to(tout.dtype)).sum().backward()
    sess.op("sum", dout * g.astype(dout.dtype)).backward()
    if floating:
        _close(xd.grad.numpy(), xt.grad.numpy(), tol, "input gradient")
    dparams = dict(dmod.named_parameters())
    assert list(dparams) == [n for n, _ in tmod.named_parameters()]
    for name, p in tmod.named_parameters():
        _close(dparams[name].grad.numpy(), p.grad.numpy(), tol, f"gradient of {name}")
    want = tmod.state_dict()
    got = dmod.state_dict()
    assert list(got) == list(want)
    for name, value in want.items():
        _close(got[name], value.numpy(), tol, f"state {name}")
    return dout


LAYERS = [
    ("linear", lambda n, d: n.Linear(5, 4, **d), (3, 5)),
    ("linear-3d-nobias", lambda n, d: n.Linear(5, 4, bias=False, **d), (2, 3, 5)),
    ("conv1d", lambda n, d: n.Conv1d(3, 4, 3, stride=2, padding=1, **d), (2, 3, 9)),
    ("conv2d", lambda n, d: n.Conv2d(3, 4, 3, padding=1, **d), (2, 3, 6, 5)),
    ("conv2d-groups", lambda n, d: n.Conv2d(4, 6, (3, 2), stride=(2, 1), dilation=(1, 2),
                                            groups=2, bias=False, **d), (2, 4, 7, 6)),
    ("conv2d-same", lambda n, d: n.Conv2d(2, 3, 4, padding="same", **d), (1, 2, 5, 5)),
    ("conv2d-reflect", lambda n, d: n.Conv2d(2, 3, 3, padding=1, padding_mode="reflect", **d),
     (2, 2, 5, 4)),
    ("conv3d", lambda n, d: n.Conv3d(2, 3, (3, 2, 2), stride=(1, 2, 1), padding=(1, 0, 1),
                                     **d), (2, 2, 4, 5, 3)),
    ("conv3d-groups-same", lambda n, d: n.Conv3d(4, 2, 3, padding="same", groups=2, bias=False,
                                                 **d), (1, 4, 3, 4, 4)),
    ("conv3d-replicate", lambda n, d: n.Conv3d(2, 2, 3, padding=1, padding_mode="replicate",
                                               **d), (1, 2, 3, 4, 3)),
    ("convtranspose1d", lambda n, d: n.ConvTranspose1d(3, 4, 3, stride=2, padding=1,
                                                       output_padding=1, **d), (2, 3, 5)),
    ("convtranspose2d", lambda n, d: n.ConvTranspose2d(3, 4, 3, stride=2, padding=1, **d),
     (2, 3, 4, 5)),
    ("convtranspose2d-groups", lambda n, d: n.ConvTranspose2d(4, 6, (3, 2), stride=(2, 3),
                                                              padding=(1, 0),
                                                              output_padding=(1, 2), groups=2,
                                                              dilation=(1, 2), bias=False, **d),
     (2, 4, 3, 4)),
    ("batchnorm1d", lambda n, d: n.BatchNorm1d(4, **d), (6, 4)),
    ("batchnorm1d-3d", lambda n, d: n.BatchNorm1d(4, momentum=None, **d), (3, 4, 5)),
    ("batchnorm2d", lambda n, d: n.BatchNorm2d(3, **d), (2, 3, 4, 4)),
    ("batchnorm2d-untracked", lambda n, d: n.BatchNorm2d(3, affine=False,
                                                         track_running_stats=False, **d),
     (2, 3, 3, 3)),
    ("layernorm", lambda n, d: n.LayerNorm(4, **d), (3, 4)),
    ("layernorm-2d", lambda n, d: n.LayerNorm([3, 4], eps=1e-3, **d), (2, 3, 4)),
    ("layernorm-plain", lambda n, d: n.LayerNorm(4, elementwise_affine=False, **d), (3, 4)),
    ("groupnorm", lambda n, d: n.GroupNorm(2, 4, **d), (3, 4, 5)),
    ("maxpool2d", lambda n, d: n.MaxPool2d(2), (2, 3, 6, 6)),
    ("maxpool2d-pad", lambda n, d: n.MaxPool2d(3, stride=2, padding=1, ceil_mode=True),
     (1, 2, 7, 6)),
    ("maxpool1d", lambda n, d: n.MaxPool1d(2), (2, 3, 8)),
    ("avgpool2d", lambda n, d: n.AvgPool2d(2), (2, 3, 6, 6)),
    ("avgpool2d-pad", lambda n, d: n.AvgPool2d(3, 2, padding=1, count_include_pad=False),
     (1, 2, 7, 6)),
    ("avgpool1d", lambda n, d: n.AvgPool1d(3, stride=2), (2, 3, 9)),
    ("adaptiveavgpool2d", lambda n, d: n.AdaptiveAvgPool2d((2, 3)), (2, 3, 7, 8)),
    ("adaptiveavgpool2d-none", lambda n, d: n.AdaptiveAvgPool2d((None, 1)), (2, 3, 4, 5)),
    ("adaptivemaxpool2d", lambda n, d: n.AdaptiveMaxPool2d(2), (2, 3, 5, 5)),
    ("flatten", lambda n, d: n.Flatten(), (2, 3, 4)),
    ("flatten-0-1", lambda n, d: n.Flatten(0, 1), (2, 3, 4)),
    ("identity", lambda n, d: n.Identity(7, x=1), (2, 3)),
    ("dropout-eval", lambda n, d: n.Dropout(0.4).eval(), (3, 4)),
    ("relu", lambda n, d: n.ReLU(), (3, 4)),
    ("relu6", lambda n, d: n.ReLU6(), (3, 4)),
    ("gelu", lambda n, d: n.GELU(), (3, 4)),
    ("gelu-tanh", lambda n, d: n.GELU(approximate="tanh"), (3, 4)),
    ("tanh", lambda n, d: n.Tanh(), (3, 4)),
    ("sigmoid", lambda n, d: n.Sigmoid(), (3, 4)),
    ("silu", lambda n, d: n.SiLU(), (3, 4)),
    ("leakyrelu", lambda n, d: n.LeakyReLU(0.2), (3, 4)),
    ("elu", lambda n, d: n.ELU(alpha=0.7), (3, 4)),
    ("selu", lambda n, d: n.SELU(), (3, 4)),
    ("mish", lambda n, d: n.Mish(), (3, 4)),
    ("softplus", lambda n, d: n.Softplus(beta=2.0, threshold=1.0), (3, 4)),
    ("hardtanh", lambda n, d: n.Hardtanh(-0.5, 0.5), (3, 4)),
    ("softmax", lambda n, d: n.Softmax(dim=1), (3, 4)),
    ("softmax-legacy-dim", lambda n, d: n.Softmax(), (2, 3, 4)),
    ("logsoftmax", lambda n, d: n.LogSoftmax(dim=-1), (2, 3, 4)),
    ("softmin", lambda n, d: n.Softmin(dim=0), (3, 4)),
    ("sequential", lambda n, d: n.Sequential(n.Conv2d(2, 3, 3, **d), n.BatchNorm2d(3, **d),
                                             n.ReLU(), n.MaxPool2d(2), n.Flatten(),
                                             n.Linear(12, 2, **d)), (2, 2, 6, 6)),
]


@pytest.mark.parametrize("make,shape", [c[1:] for c in LAYERS], ids=[c[0] for c in LAYERS])
def test_layer_matches_torch_f64(nsess, make, shape):
    torch.manual_seed(0)
    tmod = make(torch.nn, T64)
    x = np.random.default_rng(1).standard_normal(shape)
    dmod = make(nn, D64)
    check_module(nsess, tmod, dmod, x)


F32_LAYERS = [  # (name, make, shape, tolerance): oneDNN's f32 kernels sum in another order
    ("linear", lambda n: n.Linear(16, 8), (4, 16), 1e-5),
    ("conv2d", lambda n: n.Conv2d(3, 4, 3, padding=1), (2, 3, 6, 6), 1e-4),
    ("batchnorm2d", lambda n: n.BatchNorm2d(3), (4, 3, 4, 4), 1e-4),
    ("layernorm", lambda n: n.LayerNorm(8), (3, 8), 1e-5),
    ("gelu", lambda n: n.GELU(), (3, 4), 1e-6),
    ("logsoftmax", lambda n: n.LogSoftmax(dim=1), (3, 5), 1e-6),
    ("maxpool2d", lambda n: n.MaxPool2d(2), (1, 2, 4, 4), 1e-6),
]


@pytest.mark.parametrize("make,shape,tol", [c[1:] for c in F32_LAYERS],
                         ids=[c[0] for c in F32_LAYERS])
def test_layer_matches_torch_f32(nsess, make, shape, tol):
    torch.manual_seed(0)
    tmod = make(torch.nn)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    dmod = make(nn)
    out = check_module(nsess, tmod, dmod, x, tol)
    assert out.dtype == np.float32 and all(p.dtype == np.float32 for p in dmod.parameters())


def test_embedding_matches_torch(nsess):
    torch.manual_seed(0)
    tmod = torch.nn.Embedding(10, 3, padding_idx=-2, dtype=torch.float64)
    dmod = nn.Embedding(10, 3, padding_idx=-2, dtype="f64")
    assert dmod.padding_idx == tmod.padding_idx == 8
    idx = np.array([[0, 8, 3, 3], [9, 8, 1, 0]], np.int64)
    check_module(nsess, tmod, dmod, idx)
    assert np.all(dmod.weight.grad.numpy()[8] == 0)
    pre = nn.Embedding.from_pretrained(np.eye(3))
    assert not pre.weight.requires_grad and pre.weight.dtype == np.float64
    np.testing.assert_array_equal(pre(np.array([2, 0])).numpy(), np.eye(3)[[2, 0]])


def test_batchnorm_training_steps_then_eval(nsess):
    rng = np.random.default_rng(3)
    for kwargs in ({}, {"momentum": None}, {"momentum": 0.3, "affine": False}):
        tmod = torch.nn.BatchNorm2d(3, dtype=torch.float64, **kwargs)
        dmod = nn.BatchNorm2d(3, dtype="f64", **kwargs)
        for step in range(3):
            check_module(nsess, tmod, dmod, rng.standard_normal((4, 3, 2, 2)), seed=step)
            tmod.zero_grad()
            dmod.zero_grad()
        assert int(dmod.num_batches_tracked) == 3
        tmod.eval()
        dmod.eval()
        before = dmod.state_dict()
        check_module(nsess, tmod, dmod, rng.standard_normal((2, 3, 2, 2)), seed=9)
        for name, value in dmod.state_dict().items():
            np.testing.assert_array_equal(value, before[name])
    with pytest.raises(ValueError, match="expected 4D input"):
        dmod(np.zeros((2, 3)))


LOSSES = [  # (name, make, input shape, target maker)
    ("mse", lambda n, w: n.MSELoss(), (4, 3), lambda r: r.standard_normal((4, 3))),
    ("mse-sum", lambda n, w: n.MSELoss(reduction="sum"), (4, 3),
     lambda r: r.standard_normal((4, 3))),
    ("l1", lambda n, w: n.L1Loss(), (4, 3), lambda r: r.standard_normal((4, 3))),
    ("l1-legacy-none", lambda n, w: n.L1Loss(reduce=False), (4, 3),
     lambda r: r.standard_normal((4, 3))),
    ("smoothl1", lambda n, w: n.SmoothL1Loss(beta=0.5), (4, 3),
     lambda r: r.standard_normal((4, 3))),
    ("huber", lambda n, w: n.HuberLoss(delta=0.7), (4, 3), lambda r: r.standard_normal((4, 3))),
    ("crossentropy", lambda n, w: n.CrossEntropyLoss(), (5, 3),
     lambda r: r.integers(0, 3, 5)),
    ("crossentropy-weighted", lambda n, w: n.CrossEntropyLoss(weight=w(np.array([0.2, 1.0, 3.0])),
                                                              ignore_index=1,
                                                              label_smoothing=0.1), (6, 3),
     lambda r: np.array([0, 1, 2, 2, 0, 1])),
    ("crossentropy-2d", lambda n, w: n.CrossEntropyLoss(reduction="sum"), (2, 3, 4),
     lambda r: r.integers(0, 3, (2, 4))),
    ("crossentropy-probs", lambda n, w: n.CrossEntropyLoss(), (4, 3),
     lambda r: r.dirichlet(np.ones(3), 4)),
    ("nll", lambda n, w: n.NLLLoss(weight=w(np.array([1.0, 2.0, 0.5]))), (5, 3),
     lambda r: r.integers(0, 3, 5)),
    ("bce", lambda n, w: n.BCELoss(), (4, 3), lambda r: r.uniform(0, 1, (4, 3))),
    ("bcewithlogits", lambda n, w: n.BCEWithLogitsLoss(), (4, 3),
     lambda r: r.integers(0, 2, (4, 3)).astype(np.float64)),
    ("bcewithlogits-posweight", lambda n, w: n.BCEWithLogitsLoss(
        pos_weight=w(np.array([0.5, 2.0, 3.0]))), (4, 3),
     lambda r: r.integers(0, 2, (4, 3)).astype(np.float64)),
    ("bcewithlogits-both", lambda n, w: n.BCEWithLogitsLoss(
        weight=w(np.array([1.5, 1.0, 0.5])), pos_weight=w(np.array([0.5, 2.0, 3.0])),
        reduction="none"), (4, 3), lambda r: r.uniform(0, 1, (4, 3))),
    ("kldiv", lambda n, w: n.KLDivLoss(reduction="sum", log_target=True), (4, 3),
     lambda r: np.log(r.dirichlet(np.ones(3), 4))),
    ("kldiv-batchmean", lambda n, w: n.KLDivLoss(reduction="batchmean"), (4, 3),
     lambda r: r.dirichlet(np.ones(3), 4)),
]


@pytest.mark.parametrize("make,shape,target", [c[1:] for c in LOSSES],
                         ids=[c[0] for c in LOSSES])
def test_loss_matches_torch(nsess, make, shape, target):
    rng = np.random.default_rng(4)
    x = rng.standard_normal(shape)
    if "BCELoss" in repr(make(torch.nn, torch.tensor)):
        x = 1 / (1 + np.exp(-x))
    y = target(rng)
    tloss_fn, dloss_fn = make(torch.nn, torch.tensor), make(nn, np.asarray)
    xt = torch.from_numpy(x.copy()).requires_grad_()
    nsess.grad_context()
    xd = nsess.tensor(x, requires_grad=True)
    tl, dl = tloss_fn(xt, torch.from_numpy(y)), dloss_fn(xd, y)
    _close(dl.numpy(), tl.detach().numpy(), TOL64, "loss")
    g = np.asarray(rng.standard_normal(tuple(tl.shape)))
    tl.backward(torch.from_numpy(g))
    dl.backward(g)
    _close(xd.grad.numpy(), xt.grad.numpy(), TOL64, "input gradient")


def test_dropout_masks_scale_and_gradient(nsess):
    drop = nn.Dropout(p=0.3)
    assert drop.training and repr(drop) == repr(torch.nn.Dropout(p=0.3))
    nsess.grad_context()
    x = nsess.tensor(np.ones(4000), requires_grad=True)
    tensord.manual_seed(5)
    y = drop(x)
    out = y.numpy()
    kept = out != 0
    np.testing.assert_allclose(out[kept], 1 / 0.7, rtol=1e-12)
    assert abs((~kept).mean() - 0.3) < 0.04
    y.backward(np.ones(4000))
    np.testing.assert_allclose(x.grad.numpy(), out, rtol=1e-12)  # d(mask * x / 0.7) / dx
    tensord.manual_seed(5)
    np.testing.assert_array_equal(drop(x).numpy(), out)  # a seed gives the same mask
    assert drop.eval()(x) is x


def test_default_initialization_is_pytorchs(nsess):
    tensord.manual_seed(6)
    lin = nn.Linear(400, 300)
    w, b = lin.weight.numpy(), lin.bias.numpy()
    bound = 1 / math.sqrt(400)  # kaiming_uniform(a=sqrt(5)) over fan_in 400
    assert w.dtype == np.float32 and w.shape == (300, 400) and b.shape == (300,)
    for values in (w, b):
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.99 * bound
        assert abs(values.std() - bound / math.sqrt(3)) < 0.05 * bound
    conv = nn.Conv2d(16, 32, 3, groups=2)
    bound = 1 / math.sqrt(8 * 9)
    for values in (conv.weight.numpy(), conv.bias.numpy()):
        assert np.abs(values).max() <= bound and np.abs(values).max() > 0.95 * bound
    emb = nn.Embedding(500, 20, padding_idx=3).weight.numpy()
    assert abs(emb.std() - 1) < 0.05 and np.all(emb[3] == 0)
    bn, ln = nn.BatchNorm1d(5), nn.LayerNorm(5)
    for m in (bn, ln):
        np.testing.assert_array_equal(m.weight.numpy(), np.ones(5))
        np.testing.assert_array_equal(m.bias.numpy(), np.zeros(5))
    np.testing.assert_array_equal(bn.running_var.numpy(), np.ones(5))
    # The same seed draws the same weights; init functions work in place on Parameters.
    tensord.manual_seed(6)
    np.testing.assert_array_equal(nn.Linear(400, 300).weight.numpy(), w)
    before = lin.weight
    nn.init.constant_(lin.weight, 0.25)
    nn.init.zeros_(lin.bias)
    assert lin.weight is before and np.all(lin.weight.numpy() == 0.25)
    assert lin.weight.requires_grad and lin.weight.is_leaf and np.all(lin.bias.numpy() == 0)
    nn.init.kaiming_normal_(lin.weight, nonlinearity="relu")
    assert abs(lin.weight.numpy().std() - math.sqrt(2 / 400)) < 0.05 * math.sqrt(2 / 400)
    assert nn.init.calculate_gain("leaky_relu", 0.2) == torch.nn.init.calculate_gain(
        "leaky_relu", 0.2)


def _build_net(self, ns, **dt):
    self.features = ns.Sequential(ns.Conv2d(1, 2, 3, **dt), ns.BatchNorm2d(2, **dt), ns.ReLU())
    self.heads = ns.ModuleList([ns.Linear(8, 3, **dt), ns.Linear(8, 2, bias=False, **dt)])
    self.scale = ns.Parameter(torch.ones(2, dtype=torch.float64) if ns is torch.nn
                              else np.ones(2))


def _net_forward(self, x):
    h = self.features(x)
    h = h.reshape(h.shape[0], -1)[:, :8]
    return self.heads[0](h), self.heads[1](h) * self.scale


class Net(nn.Module):
    def __init__(self, **dt):
        super().__init__()
        _build_net(self, nn, **dt)

    forward = _net_forward


class TorchNet(torch.nn.Module):
    def __init__(self, **dt):
        super().__init__()
        _build_net(self, torch.nn, **dt)

    forward = _net_forward


def test_module_names_state_dict_round_trip_and_modes(nsess):
    torch.manual_seed(7)
    tnet, dnet = TorchNet(**T64), Net(**D64)
    assert [n for n, _ in dnet.named_parameters()] == [n for n, _ in tnet.named_parameters()]
    assert list(dnet.state_dict()) == list(tnet.state_dict())
    assert [n for n, _ in dnet.named_modules()] == [n for n, _ in tnet.named_modules()]
    assert [n for n, _ in dnet.named_buffers()] == [n for n, _ in tnet.named_buffers()]
    # torch -> tensord: numpy values of torch's state, exactly.
    tnet.features[1].running_mean.add_(0.5)
    tnet.features[1].num_batches_tracked.add_(4)
    assert dnet.load_state_dict(tnet.state_dict()) == ([], [])
    for name, value in tnet.state_dict().items():
        np.testing.assert_array_equal(dnet.state_dict()[name], value.numpy(), err_msg=name)
    x = np.random.default_rng(8).standard_normal((2, 1, 4, 4))
    for mode in ("train", "eval"):
        getattr(tnet, mode)()
        getattr(dnet, mode)()
        assert all(m.training == (mode == "train") for m in dnet.modules())
        for t, d in zip(tnet(torch.from_numpy(x)), dnet(x)):
            _close(d.numpy(), t.detach().numpy(), TOL64, mode)
    # tensord -> torch, through to_torch_state_dict (strict).
    with tensord.no_grad():
        for p in dnet.parameters():
            nsess.op("assign", p, p * 2.0 + 1.0)
    fresh = TorchNet(**T64)
    fresh.load_state_dict(nn.to_torch_state_dict(dnet.state_dict()))
    for name, value in dnet.state_dict().items():
        np.testing.assert_array_equal(fresh.state_dict()[name].numpy(), value, err_msg=name)
    # load_state_dict also takes another model's live tensors (keep_vars=True).
    other = Net(**D64)
    other.load_state_dict(dnet.state_dict(keep_vars=True))
    for name, value in dnet.state_dict().items():
        np.testing.assert_array_equal(other.state_dict()[name], value, err_msg=name)


def test_load_state_dict_errors_are_pytorchs_and_change_nothing(nsess):
    model = nn.Sequential(nn.Linear(3, 2), nn.BatchNorm1d(2))
    before = model.state_dict()
    bad = dict(before)
    bad["0.weight"] = np.zeros((3, 3))
    bad["extra"] = np.zeros(1)
    del bad["1.running_var"]
    with pytest.raises(RuntimeError) as err:
        model.load_state_dict(bad)
    text = str(err.value)
    assert text.startswith("Error(s) in loading state_dict for Sequential:")
    assert 'Unexpected key(s) in state_dict: "extra".' in text
    assert 'Missing key(s) in state_dict: "1.running_var".' in text
    assert "size mismatch for 0.weight: copying a param with shape (3, 3) from checkpoint, " \
        "the shape in current model is (2, 3)." in text
    for name, value in model.state_dict().items():
        np.testing.assert_array_equal(value, before[name])
    del bad["0.weight"]
    result = model.load_state_dict(bad, strict=False)
    assert result.missing_keys == ["0.weight", "1.running_var"]
    assert result.unexpected_keys == ["extra"]
    with pytest.raises(TypeError):
        model.load_state_dict([("0.weight", np.zeros((2, 3)))])


def test_attribute_registration_rules(nsess):
    m = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="cannot assign"):
        m.weight = nsess.tensor(np.zeros((2, 2), np.float32))
    m.bias = None
    assert [n for n, _ in m.named_parameters()] == ["weight"] and m.bias is None
    m.extra = nn.Parameter(np.ones(3))
    m.child = nn.ReLU()
    assert [n for n, _ in m.named_parameters()] == ["weight", "extra"]
    assert list(dict(m.named_children())) == ["child"]
    del m.extra
    assert [n for n, _ in m.named_parameters()] == ["weight"]
    m.register_buffer("stat", nsess.tensor(np.zeros(2)), persistent=False)
    assert "stat" not in m.state_dict() and [n for n, _ in m.named_buffers()] == ["stat"]
    with pytest.raises(KeyError):
        m.register_parameter("a.b", None)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        m.nothing
    with pytest.raises(RuntimeError, match="needs a session"):
        with tensord.default_session(None):
            nn.Linear(2, 2)
    with pytest.raises(TypeError, match="pickled"):
        import copy
        copy.deepcopy(m.weight)
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(seq) == 3 and isinstance(seq[-1], nn.Linear) and len(seq[:2]) == 2
    tseq = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    assert [n for n, _ in seq[1:].named_parameters()] == \
        [n for n, _ in tseq[1:].named_parameters()] == ["2.weight", "2.bias"]


def test_repr_is_pytorchs(nsess):
    def build(n, **dt):
        return n.Sequential(n.Conv2d(3, 4, 3, padding=1, **dt), n.BatchNorm2d(4, **dt),
                            n.ReLU(), n.MaxPool2d(2), n.Dropout(0.25), n.AdaptiveAvgPool2d(1),
                            n.Flatten(), n.Linear(4, 2, **dt), n.LogSoftmax(dim=1),
                            n.ModuleList([n.LayerNorm(4), n.GELU(), n.LeakyReLU(0.1)]),
                            n.Embedding(5, 2, padding_idx=0), n.CrossEntropyLoss())
    assert repr(build(nn)) == repr(build(torch.nn))


def test_to_dtype_keeps_parameter_identity(nsess):
    model = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    params = list(model.parameters())
    values = [p.numpy() for p in params]
    assert model.double() is model
    assert [id(p) for p in model.parameters()] == [id(p) for p in params]
    for p, v in zip(params, values):
        assert p.dtype == np.float64 and p.requires_grad and p.is_leaf
        np.testing.assert_array_equal(p.numpy(), v.astype(np.float64))
    assert model[1].running_mean.dtype == np.float64
    assert model[1].num_batches_tracked.dtype == np.int64
    loss = nsess.op("sum", model(np.ones((2, 3))))
    loss.backward()
    assert all(p.grad is not None and p.grad.dtype == np.float64 for p in params)
    model.float()
    assert all(p.dtype == np.float32 and p.grad.dtype == np.float32 for p in params)


def test_functional_attributes_exist_in_the_catalog(nsess, catalog):
    # Every keyword a functional wrapper sends is an attribute of its op (a wrong name would
    # be BadAttribute at the call; this also covers functions no test above calls).
    import ast
    source = inspect.getsource(F) + inspect.getsource(tensord.nn._loss)
    calls = [node for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Call) and
             getattr(node.func, "id", "") in ("_op", "op") and node.args and
             isinstance(node.args[0], ast.Constant)]
    assert len(calls) > 40
    for call in calls:
        op = catalog[call.args[0].value]
        names = {a["name"] for a in op["attrs"]}
        for kw in call.keywords:
            assert kw.arg in names, f"{op['name']}: {kw.arg} is not one of {sorted(names)}"
    x = np.random.default_rng(9).standard_normal((2, 4, 6))
    tx = torch.from_numpy(x)
    for fn, args in ((F.glu, {}), (F.softsign, {}), (F.hardswish, {}), (F.logsigmoid, {}),
                     (F.celu, {"alpha": 0.5}), (F.softmin, {"dim": 2}),
                     (F.pad, {"pad": [1, 2], "mode": "replicate"}),
                     (F.cosine_similarity, None), (F.interpolate, {"scale_factor": 2.0})):
        if args is None:
            got, want = fn(x, x[::-1].copy()), getattr(torch.nn.functional, fn.__name__)(
                tx, tx.flip(0))
        else:
            got, want = fn(x, **args), getattr(torch.nn.functional, fn.__name__)(tx, **args)
        _close(got.numpy(), want.numpy(), TOL64, fn.__name__)
