"""Program fusion: a product (linear, matmul, conv2d, conv3d) and the bias, activation and
residual add after it run as one fused op in a compiled program. Each fused program is checked
against the same program on a server started with --fusion=off (values, gradients and trained
parameters) and against PyTorch; values that are not finite give the unfused results bit for
bit; an output something else reads is never folded away."""

import numpy as np
import pytest
import torch

import tensord
from fusion_compare import f32, run_both

F = torch.nn.functional
RTOL, ATOL = 2e-5, 2e-5  # oneDNN's post-op activations against the loop kernels, in f32


INFERENCE = {
    # name: (build, inputs, the fused op expected on each call)
    "linear+relu": (lambda s, x, w, b: s.op("relu", s.op("linear", x, w, b)),
                    lambda r: (f32(r, 8, 16), f32(r, 5, 16), f32(r, 5)),
                    ["fused_linear", "fused_linear"]),
    "matmul+bias+gelu": (lambda s, x, w, b: s.op("gelu", x @ w + b),
                         lambda r: (f32(r, 2, 6, 16), f32(r, 16, 7), f32(r, 7)),
                         ["fused_matmul"] * 3),
    "matmul+gelu_tanh+residual": (
        lambda s, x, w, r: s.op("gelu", x @ w, approximate="tanh") + r,
        lambda r: (f32(r, 6, 16), f32(r, 16, 16), f32(r, 6, 16)), ["fused_matmul"] * 3),
    "conv2d+bias+silu": (lambda s, x, w, b: s.op("silu", s.op("conv2d", x, w, b, padding=1)),
                         lambda r: (f32(r, 2, 3, 9, 9), f32(r, 4, 3, 3, 3), f32(r, 4)),
                         ["fused_conv2d"] * 2),
    "conv2d+residual+relu": (
        lambda s, x, w, r: s.op("relu", s.op("conv2d", x, w, padding=1) + r),
        lambda r: (f32(r, 2, 4, 8, 8), f32(r, 4, 4, 3, 3), f32(r, 2, 4, 8, 8)),
        ["fused_conv2d"] * 3),
    "conv2d+channel bias+leaky_relu": (
        lambda s, x, w, b: s.op("leaky_relu", s.op("conv2d", x, w) + b, negative_slope=0.2),
        lambda r: (f32(r, 2, 3, 8, 8), f32(r, 5, 3, 3, 3), f32(r, 5, 1, 1)),
        ["fused_conv2d"] * 3),
    "conv2d+one value+relu": (  # one added value is no per-channel bias of a convolution
        lambda s, x, w, v: s.op("relu", s.op("conv2d", x, w, padding=1) + v),
        lambda r: (f32(r, 2, 3, 7, 6), f32(r, 4, 3, 3, 3), f32(r, 1)), ["fused_conv2d"] * 3),
    "matrix-vector product+row add+tanh": (  # its output's last dim is a row dim, no column
        lambda s, x, w, v: s.op("tanh", x @ w + v),
        lambda r: (f32(r, 5, 8), f32(r, 8), f32(r, 5)), ["fused_matmul"] * 3),
    "conv3d+sigmoid": (lambda s, x, w: s.op("sigmoid", s.op("conv3d", x, w)),
                       lambda r: (f32(r, 1, 2, 5, 5, 5), f32(r, 3, 2, 2, 2, 2)),
                       ["fused_conv3d"] * 2),
    "linear+elu+tanh": (lambda s, x, w: s.op("tanh", s.op("elu", s.op("linear", x, w),
                                                          alpha=0.5)),
                        lambda r: (f32(r, 4, 8), f32(r, 3, 8)),
                        ["fused_linear", "fused_linear", ""]),
}


@pytest.mark.parametrize("name", list(INFERENCE))
def test_inference_programs_fuse_and_agree_with_the_unfused_program(client, unfused, name):
    build, make, expected = INFERENCE[name]
    inputs = make(np.random.default_rng(1))
    (n_fused, ops, value), (n_plain, plain_ops, plain) = run_both(client, unfused, build, inputs)
    assert ops == expected and n_fused == 1
    assert n_plain == 0 and set(plain_ops) == {""}
    np.testing.assert_allclose(value, plain, rtol=RTOL, atol=ATOL)


def test_values_that_are_not_finite_give_the_unfused_bits(client, unfused):
    rng = np.random.default_rng(2)
    x, w, b = f32(rng, 2, 3, 8, 8), f32(rng, 4, 3, 3, 3), f32(rng, 4)
    x[0, 1, 2, 3] = np.nan
    x[1, 0, 4, 4] = np.inf
    # Finite operands whose product overflows; a short reduction ([64, 4] by [4, 64]), whose
    # operands the fused call scans (a long one runs its chain after the product unscanned).
    big = f32(rng, 64, 4) * np.float32(3e37)

    def conv(s, x, w, b):
        return s.op("relu", s.op("conv2d", x, w, b, padding=1))

    def linear(s, x, w):
        return s.op("sigmoid", s.op("linear", x, w))

    for build, inputs in ((conv, (x, w, b)), (linear, (big, big))):
        (n, _, value), (_, _, plain) = run_both(client, unfused, build, inputs)
        assert n == 1
        np.testing.assert_array_equal(value, plain)
    (_, _, value), _ = run_both(client, unfused, conv, (x, w, b))
    assert np.isnan(value).any(), "relu keeps NaN, as torch.relu does"


def test_outputs_read_elsewhere_are_not_folded(client):
    rng = np.random.default_rng(3)
    x, w = f32(rng, 4, 8), f32(rng, 3, 8)
    with client.session() as sess:
        # The product is returned (fetched) and also activated: neither call can fold.
        both = sess.compile(lambda x, w: (sess.op("linear", x, w),
                                          sess.op("relu", sess.op("linear", x, w))), x, w)
        assert both.fused_calls == 1  # only the second linear, whose output nothing else reads
        y, z = both(x, w)
        np.testing.assert_allclose(z, np.maximum(y, 0), rtol=RTOL, atol=ATOL)
        # Two readers of one product.
        two = sess.compile(lambda x, w: sess.op("relu", sess.op("linear", x, w)) +
                           sess.op("linear", x, w) * 2.0, x, w)
        shared = sess.compile(lambda x, w: (lambda y: sess.op("relu", y) + y)(
            sess.op("linear", x, w)), x, w)
        # No fused product; relu and the add after it are one fused_elementwise call.
        assert shared.fused_ops == ["", "fused_elementwise", "fused_elementwise"]
        y = x @ w.T
        np.testing.assert_allclose(shared(x, w), np.maximum(y, 0) + y, rtol=RTOL, atol=ATOL)
        assert two.fused_calls >= 1


def cnn_step(sess, ctx, params, opt):
    def loss_of(x, y):
        c1, b1, c2, w, b = params
        h = sess.op("max_pool2d", sess.op("relu", sess.op("conv2d", x, c1, b1, padding=1)),
                    kernel_size=2)
        h = sess.op("tanh", sess.op("conv2d", h, c2, padding=1) + h)  # a residual block
        h = sess.op("gelu", sess.op("linear", sess.op("flatten", h, start_dim=1), w, b))
        return sess.op("cross_entropy", h, y)

    def step(x, y):
        loss = loss_of(x, y)
        opt.step(ctx.backward(loss))
        return loss
    return step


def test_a_training_program_fuses_what_it_can_differentiate(client, unfused):
    rng = np.random.default_rng(4)
    init = [f32(rng, 4, 3, 3, 3, scale=0.3), f32(rng, 4, scale=0.1),
            f32(rng, 4, 4, 3, 3, scale=0.3), f32(rng, 5, 64, scale=0.2), f32(rng, 5)]
    batches = [(f32(rng, 6, 3, 8, 8), rng.integers(0, 5, 6)) for _ in range(3)]
    results = []
    for c in (client, unfused):
        with c.session() as sess, sess.autodiff() as ctx:
            params = [sess.tensor(v, requires_grad=True) for v in init]
            opt = tensord.optim.SGD(params, lr=0.1, momentum=0.9)
            program = sess.compile(cnn_step(sess, ctx, params, opt), *batches[0])
            losses = [float(program(x, y)) for x, y in batches]
            results.append((program, losses, [p.numpy() for p in params]))
    (fused, losses, trained), (plain, plain_losses, plain_trained) = results
    # conv+bias+relu and conv+residual+tanh fuse; gelu needs its input for the backward, so
    # the linear stays apart.
    assert fused.fused_calls == 2 and plain.fused_calls == 0
    assert fused.fused_ops.count("fused_conv2d") == 5
    assert "fused_linear" not in fused.fused_ops
    np.testing.assert_allclose(losses, plain_losses, rtol=1e-5)
    for a, b in zip(trained, plain_trained):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)

    # And PyTorch's step from the same start.
    tp = [torch.tensor(v, requires_grad=True) for v in init]
    topt = torch.optim.SGD(tp, lr=0.1, momentum=0.9)
    for x, y in batches:
        c1, b1, c2, w, b = tp
        h = F.max_pool2d(F.relu(F.conv2d(torch.tensor(x), c1, b1, padding=1)), 2)
        h = torch.tanh(F.conv2d(h, c2, padding=1) + h)
        loss = F.cross_entropy(F.gelu(F.linear(h.flatten(1), w, b)), torch.tensor(y))
        topt.zero_grad()
        loss.backward()
        topt.step()
    for a, t in zip(trained, tp):
        np.testing.assert_allclose(a, t.detach().numpy(), rtol=1e-4, atol=1e-5)


def test_fused_gradients_match_the_unfused_ones(client, unfused):
    rng = np.random.default_rng(5)
    x, w, b, r = f32(rng, 6, 16), f32(rng, 8, 16), f32(rng, 8), f32(rng, 6, 8)
    grads = []
    for c in (client, unfused):
        with c.session() as sess, sess.autodiff() as ctx:
            leaves = [sess.tensor(v, requires_grad=True) for v in (w, b, r)]

            def step(xx):
                ww, bb, rr = leaves
                y = sess.op("sigmoid", sess.op("linear", xx, ww, bb) + rr)
                g = ctx.backward(sess.op("sum", y * y))
                return [g[leaf] for leaf in leaves]
            program = sess.compile(step, x)
            grads.append((program.fused_calls, [np.asarray(g) for g in program(x)]))
    (n, fused), (n_plain, plain) = grads
    assert n == 1 and n_plain == 0
    for a, p in zip(fused, plain):
        np.testing.assert_allclose(a, p, rtol=1e-5, atol=1e-6)


def test_fused_ops_are_not_part_of_the_api(sess):
    x = sess.tensor(np.ones((2, 3), np.float32))
    w = sess.tensor(np.ones((4, 3), np.float32))
    with pytest.raises(tensord.TensordError) as err:
        sess.op("fused_linear", x, w, post_ops="relu")
    assert err.value.reason == "UNKNOWN_OP"
    names = sess.client.op_names()
    assert "linear" in names and not any(name.startswith("fused_") for name in names)


def test_balanced_checkpointing_recomputes_around_a_fused_op(client, unfused):
    rng = np.random.default_rng(6)
    x, w, b = f32(rng, 4, 3, 8, 8), f32(rng, 5, 3, 3, 3, scale=0.3), f32(rng, 5)
    grads = []
    for c in (client, unfused):
        with c.session() as sess, sess.autodiff(checkpointing="balanced") as ctx:
            ww, bb = (sess.tensor(v, requires_grad=True) for v in (w, b))

            def step(xx):
                h = sess.op("sigmoid", sess.op("conv2d", xx, ww, bb, padding=1))
                h = sess.op("max_pool2d", h, kernel_size=2)
                g = ctx.backward(sess.op("sum", h * h))
                return [g[ww], g[bb]]
            program = sess.compile(step, x)
            grads.append((program.fused_calls, [np.asarray(v) for v in program(x)]))
    (n, fused), (_, plain) = grads
    assert n == 1
    for a, p in zip(fused, plain):
        np.testing.assert_allclose(a, p, rtol=1e-5, atol=1e-6)


def test_programs_on_a_gpu_device_fuse_to_the_unfused_bits(client, unfused, gpu_device):
    """On a GPU device a fused product is the producer's kernel and its post-ops in one pass:
    the values, and the gradients a program takes through it, are the unfused calls' bits."""
    rng = np.random.default_rng(7)
    x, w, b = f32(rng, 6, 8), f32(rng, 5, 8), f32(rng, 5)
    img, k, kb = f32(rng, 2, 3, 6, 6), f32(rng, 3, 3, 3, 3), f32(rng, 3)
    programs = [
        ("fused_linear", lambda s, x, w, b: s.op("relu", s.op("linear", x, w, b)), [x, w, b]),
        ("fused_matmul", lambda s, x, w: s.op("gelu", x @ w, approximate="tanh"), [x, w.T.copy()]),
        ("fused_conv2d",
         lambda s, i, k, kb: s.op("relu", s.op("conv2d", i, k, kb, padding=1) + i), [img, k, kb]),
    ]
    for op, build, inputs in programs:
        (n, ops, fused), (n_off, _, plain) = run_both(client, unfused, build, inputs, gpu_device)
        assert (n, n_off) == (1, 0) and op in ops, (op, n, n_off, ops)
        np.testing.assert_array_equal(fused, plain)
    np.testing.assert_allclose(fused, np.maximum(torch_conv(img, k, kb) + img, 0),
                               rtol=1e-5, atol=1e-5)

    grads = []
    for c in (client, unfused):
        with c.session(device=gpu_device) as sess, sess.autodiff() as ctx:
            ww, bb = (sess.tensor(v, requires_grad=True) for v in (w, b))

            def step(xx):
                g = ctx.backward(sess.op("sum", sess.op("tanh", sess.op("linear", xx, ww, bb))))
                return [g[ww], g[bb]]
            program = sess.compile(step, x)
            grads.append((program.fused_calls, [np.asarray(v) for v in program(x)]))
    (n, fused), (n_off, plain) = grads
    assert (n, n_off) == (1, 0)
    for a, p in zip(fused, plain):
        np.testing.assert_array_equal(a, p)


def torch_conv(x, w, b):
    return torch.nn.functional.conv2d(torch.tensor(x), torch.tensor(w), torch.tensor(b),
                                      padding=1).numpy()


ACTIVATIONS = [("relu", {}), ("sigmoid", {}), ("tanh", {}), ("gelu", {}),
               ("gelu", {"approximate": "tanh"}), ("silu", {}),
               ("leaky_relu", {"negative_slope": 0.3}), ("elu", {"alpha": 0.7})]


def random_chain(rng):
    """A product of a random kind and shape, then a random chain of an add (of the output's
    shape, one value, per last dim or per channel), an activation and another add; now and
    then a NaN in the input."""
    kind = rng.choice(["linear", "linear_bias", "matmul", "matrix_vector", "conv2d",
                       "conv2d_bias", "conv3d"])
    if kind.startswith("linear"):
        x, w = f32(rng, int(rng.integers(1, 5)), int(rng.integers(1, 9)), 12), \
            f32(rng, int(rng.integers(1, 7)), 12)
        inputs = [x, w] + ([f32(rng, w.shape[0])] if kind == "linear_bias" else [])
        out, product = x.shape[:-1] + (w.shape[0],), lambda s, *t: s.op("linear", *t)
    elif kind == "matmul":
        x, w = f32(rng, int(rng.integers(1, 4)), int(rng.integers(1, 6)), 8), \
            f32(rng, 8, int(rng.integers(1, 6)))
        inputs, out, product = [x, w], x.shape[:2] + (w.shape[1],), lambda s, a, b: a @ b
    elif kind == "matrix_vector":
        x, w = f32(rng, int(rng.integers(2, 6)), 8), f32(rng, 8)
        inputs, out, product = [x, w], (x.shape[0],), lambda s, a, b: a @ b
    elif kind.startswith("conv2d"):
        x, w = f32(rng, int(rng.integers(1, 3)), 3, 7, 6), f32(rng, 4, 3, 3, 3)
        inputs = [x, w] + ([f32(rng, 4)] if kind == "conv2d_bias" else [])
        out, product = (x.shape[0], 4, 7, 6), lambda s, *t: s.op("conv2d", *t, padding=1)
    else:
        inputs = [f32(rng, 1, 2, 4, 5, 5), f32(rng, 3, 2, 2, 2, 2)]
        out, product = (1, 3, 3, 4, 4), lambda s, *t: s.op("conv3d", *t)

    def operand():
        spread = [out, (1,), (out[-1],),
                  (out[1],) + (1,) * (len(out) - 2) if len(out) >= 3 else out]
        return f32(rng, *spread[int(rng.integers(0, 4))])
    chain = []
    if rng.random() < 0.6:
        chain.append(("add", operand()))
    if rng.random() < 0.8 or not chain:
        chain.append(("act", ACTIVATIONS[int(rng.integers(len(ACTIVATIONS)))]))
    if rng.random() < 0.4:
        chain.append(("add", operand()))
    if rng.random() < 0.1:
        inputs[0].flat[0] = np.nan
    n = len(inputs)

    def build(s, *t):
        y, j = product(s, *t[:n]), n
        for what, arg in chain:
            if what == "add":
                y, j = y + t[j], j + 1
            else:
                y = s.op(arg[0], y, **arg[1])
        return y
    return kind, inputs + [arg for what, arg in chain if what == "add"], build


def test_random_chains_agree_with_the_unfused_program(client, unfused):
    rng = np.random.default_rng(8)
    fused = 0
    for case in range(60):
        kind, inputs, build = random_chain(rng)
        (n, _, value), (_, _, plain) = run_both(client, unfused, build, inputs)
        fused += n
        np.testing.assert_allclose(value, plain, rtol=3e-5, atol=3e-5, equal_nan=True,
                                   err_msg=f"case {case}: {kind}")
    assert fused >= 40, "most random chains fuse"


def test_random_chains_on_a_gpu_device_give_the_unfused_bits(client, unfused, gpu_device):
    """On a GPU device a fused product runs the producer's kernel and the chain's maps: the
    unfused program's bits, NaN included."""
    rng = np.random.default_rng(11)
    fused = 0
    for case in range(30):
        kind, inputs, build = random_chain(rng)
        (n, _, value), (_, _, plain) = run_both(client, unfused, build, inputs, gpu_device)
        fused += n
        np.testing.assert_array_equal(value, plain, err_msg=f"case {case}: {kind}")
    assert fused >= 20, "most random chains fuse on a GPU device too"


def test_random_chains_differentiate_as_the_unfused_program(client, unfused):
    """The same random chains in a training program: what a recording forward fuses (chains
    ending in relu, sigmoid or tanh) gives the unfused program's gradients."""
    rng = np.random.default_rng(3)
    fused = 0
    for case in range(40):
        kind, inputs, build = random_chain(rng)
        inputs[0] = np.nan_to_num(inputs[0])
        grads = []
        for c in (client, unfused):
            with c.session() as sess, sess.autodiff() as ctx:
                leaves = [sess.tensor(v, requires_grad=True) for v in inputs[1:]]

                def step(x, sess=sess, ctx=ctx, leaves=leaves):
                    y = build(sess, x, *leaves)
                    g = ctx.backward(sess.op("sum", y * y))
                    return [g[leaf] for leaf in leaves]
                program = sess.compile(step, inputs[0])
                grads.append((program.fused_calls, [np.asarray(g) for g in program(inputs[0])]))
        (n, got), (_, want) = grads
        fused += n
        for a, b in zip(got, want):
            np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4, err_msg=f"case {case}: {kind}")
    assert fused >= 15, "chains ending in relu, sigmoid or tanh fuse while recording"
