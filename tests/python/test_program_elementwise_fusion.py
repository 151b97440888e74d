"""Elementwise fusion: trees of pointwise calls in a compiled program run as one
fused_elementwise call, computed in one pass over the output. On the CPU the fused call gives
the unfused program's bits exactly (each step applies its own loop kernel's function), so
every program here is checked bit for bit against the same program on a server started with
--fusion=off, NaN and infinities included; outputs read elsewhere are never folded away. In a
forward that records for autodiff the fused call saves its inputs alone and its backward
recomputes what lies between them and its output: gradients are checked against the unfused
program's and PyTorch's."""

import numpy as np
import pytest
import torch

import tensord
from fusion_compare import f32, run_both

FUSED = "fused_elementwise"


def assert_same_bits(a, b, any_nan=False):
    """Bit for bit; with any_nan, a NaN may be any NaN (sign and payload not compared)."""
    for x, y in zip(a if isinstance(a, (list, tuple)) else [a],
                    b if isinstance(b, (list, tuple)) else [b]):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        if any_nan:
            np.testing.assert_array_equal(np.isnan(x), np.isnan(y))
            x, y = np.where(np.isnan(x), 0, x), np.where(np.isnan(y), 0, y)
        np.testing.assert_array_equal(x.reshape(-1).view(np.uint8), y.reshape(-1).view(np.uint8))


PATTERNS = {
    # name: (build, inputs, fused calls, fused ops expected)
    "relu(x*w + b), b per column": (
        lambda s, x, w, b: s.op("relu", x * w + b),
        lambda r: (f32(r, 8, 16), f32(r, 8, 16), f32(r, 16)), 1, [FUSED] * 3),
    "a tree: a*b + c*d": (
        lambda s, a, b, c, d: a * b + c * d,
        lambda r: (f32(r, 5, 7), f32(r, 5, 7), f32(r, 7), f32(r, 5, 1)), 1, [FUSED] * 3),
    "numbers: (x * 2 + 1) / 3, then 1 - x": (
        lambda s, x: 1.0 - (x * 2 + 1) / 3.0,
        lambda r: (f32(r, 33),), 1, [FUSED] * 4),
    "broadcast leaves of three shapes": (
        lambda s, a, b, c: s.op("maximum", a - b, c) * b,
        lambda r: (f32(r, 4, 1, 5), f32(r, 3, 1), f32(r, 5)), 1, [FUSED] * 3),
    "parameters: clamp, leaky_relu, elu, add/sub alpha": (
        lambda s, x, y: s.op("elu", s.op("leaky_relu", s.op(
            "clamp", s.op("sub", s.op("add", x, y, alpha=2.5), y, alpha=0.5), min=-1.5),
            negative_slope=0.2), alpha=0.7),
        lambda r: (f32(r, 6, 5), f32(r, 6, 5)), 1, [FUSED] * 5),
    "math functions": (
        lambda s, x: s.op("rsqrt", s.op("abs", x) + 1) + s.op("log", s.op("square", x) + 1)
        - s.op("reciprocal", s.op("exp", s.op("neg", x)) + 2) + s.op("sqrt", s.op("abs", x)),
        lambda r: (f32(r, 40),), 1, [FUSED] * 15),
    "small activations: sigmoid, tanh, silu, gelu": (
        lambda s, x: s.op("sigmoid", x) + s.op("tanh", x) * s.op("silu", x)
        - s.op("gelu", x) + s.op("gelu", x, approximate="tanh") / 4,
        lambda r: (f32(r, 3, 50),), 1, [FUSED] * 10),
    "a deep right-leaning tree splits at the stack's limit": (
        lambda s, *xs: xs[0] + (xs[1] + (xs[2] + (xs[3] + (xs[4] + (xs[5] + (
            xs[6] + (xs[7] + (xs[8] + xs[9])))))))),
        lambda r: tuple(f32(r, 6) for _ in range(10)), 2, [FUSED] * 9),
    # 75 tiles of 2,048: shared among the intra-op threads, tiles ending mid-row.
    "a large output, its tiles shared among threads": (
        lambda s, x, w, b, c: s.op("maximum", x * w + b, c) * 0.5 - x,
        lambda r: (f32(r, 512, 300), f32(r, 300), f32(r, 512, 1), f32(r, 300)), 1,
        [FUSED] * 5),
    "f64": (
        lambda s, x, y: s.op("tanh", x * y - 0.25) / (y * y + 1),
        lambda r: (r.standard_normal((7, 3)), r.standard_normal(3)), 1, [FUSED] * 6),
}


@pytest.mark.parametrize("name", list(PATTERNS))
def test_patterns_fuse_and_give_the_unfused_bits(client, unfused, name):
    build, make, calls, expected = PATTERNS[name]
    inputs = make(np.random.default_rng(11))
    (n, ops, value), (n_plain, plain_ops, plain) = run_both(client, unfused, build, inputs)
    assert (n, ops) == (calls, expected)
    assert n_plain == 0 and set(plain_ops) == {""}
    assert_same_bits(value, plain)


def test_values_that_are_not_finite_keep_their_bits(client, unfused):
    rng = np.random.default_rng(12)
    x, y = f32(rng, 64, 300), f32(rng, 300)  # large enough for oneDNN's binary kernels
    x.flat[::97] = np.nan
    x.flat[5::89] = np.inf
    x.flat[7::83] = -np.inf
    y[::7] = 0

    def build(s, x, y):
        return s.op("relu", s.op("maximum", x / y, x * -1.0) - s.op("minimum", x, y)) + 0.5
    (n, _, value), (_, _, plain) = run_both(client, unfused, build, (x, y))
    assert n == 1
    assert_same_bits(value, plain)
    assert np.isnan(value).any() and np.isinf(value).any()


def test_large_activations_computed_by_onednn_stay_apart(client, unfused):
    """sigmoid on a large tensor runs oneDNN's eltwise kernel, whose arithmetic is not the
    loop's: the adds and products around it fuse, the sigmoid does not."""
    rng = np.random.default_rng(13)
    x, y, z = f32(rng, 128, 256), f32(rng, 128, 256), f32(rng, 256)

    def build(s, x, y, z):
        return s.op("sigmoid", (x + y) * z) * 2.0 + y
    (n, ops, value), (_, _, plain) = run_both(client, unfused, build, (x, y, z))
    assert n == 2 and ops == [FUSED, FUSED, "", FUSED, FUSED]
    assert_same_bits(value, plain)


def test_outputs_read_elsewhere_are_not_folded(client, unfused):
    rng = np.random.default_rng(14)
    x, y = f32(rng, 4, 8), f32(rng, 8)

    def returned(s, x, y):
        h = x * y
        return h, s.op("relu", h) + 1.0

    def read_twice(s, x, y):
        h = x - y
        return s.op("tanh", h) * h

    (n, ops, value), (_, _, plain) = run_both(client, unfused, returned, (x, y))
    assert n == 1 and ops == ["", FUSED, FUSED]  # relu and add only: h is returned
    assert_same_bits(value, plain)
    (n, ops, value), (_, _, plain) = run_both(client, unfused, read_twice, (x, y))
    assert n == 1 and ops == ["", FUSED, FUSED]  # h has two readers: it is a leaf
    assert_same_bits(value, plain)


def test_integer_and_mixed_dtype_calls_run_as_written(client):
    rng = np.random.default_rng(15)
    i, x = rng.integers(-5, 5, (4, 6)).astype(np.int32), f32(rng, 4, 6)
    with client.session() as sess:
        ints = sess.compile(lambda i: (i * 3 + 1) * i, i)
        assert ints.fused_calls == 0
        np.testing.assert_array_equal(ints(i), (i * 3 + 1) * i)
        mixed = sess.compile(lambda i, x: (i * 2) + x * x, i, x)  # i32 promoted to f32
        assert mixed.fused_ops == ["", "", ""]
        np.testing.assert_array_equal(mixed(i, x), (i * 2).astype(np.float32) + x * x)


def test_a_training_program_fuses_its_recorded_forward_and_its_updates(client, unfused):
    rng = np.random.default_rng(16)
    w0, x = f32(rng, 8, 8, scale=0.3), f32(rng, 16, 8)
    results = []
    for c in (client, unfused):
        with c.session() as sess, sess.autodiff() as ctx:
            w = sess.tensor(w0, requires_grad=True)
            m = sess.tensor(np.zeros_like(w0))

            def step(xx):
                h = sess.op("tanh", sess.op("matmul", xx, w) * 0.5 + 0.1)
                loss = sess.op("mean", h * h)
                g = ctx.backward(loss)[w]
                # Momentum SGD by hand: m = 0.9 m + g; w -= 0.05 m
                sess.op("assign", m, m * 0.9 + g)
                sess.op("assign", w, w - m * 0.05)
                return loss
            program = sess.compile(step, x)
            losses = [float(program(x)) for _ in range(3)]
            results.append((program.fused_calls, list(program.fused_ops), losses, w.numpy()))
    (n, ops, losses, trained), (n_plain, _, plain_losses, plain_trained) = results
    assert n_plain == 0 and n == 3  # tanh(h * 0.5 + 0.1) and the two update expressions
    assert ops[:6] == ["", FUSED, FUSED, FUSED, "", ""]
    # A chain: the fused call's backward runs the same rules on the same values in the same
    # order as the unfused calls' backward, so training gives the same bits.
    assert losses == plain_losses
    assert_same_bits(trained, plain_trained)


def _grad_program(sess, ctx, build, inputs):
    """A program (no parameters) computing sum(build(inputs)) and its gradient for every input
    that requires grad: a leaf the expression does not read still reaches the loss through
    sum(leaf) * 0."""
    leaves = [t for t in inputs if t.requires_grad]

    def step():
        loss = sess.op("sum", build(sess, *inputs))
        for leaf in leaves:
            loss = loss + sess.op("sum", leaf) * 0.0
        grads = ctx.backward(loss)
        return [loss] + [grads[leaf] for leaf in leaves]
    return sess.compile(step)


def _random_recorded_cases(client, unfused, rng, cases, checkpointing="none", device=None):
    """Random trees of pointwise calls in forwards that record, over leaves and plain tensors,
    compiled with their backward on both servers: asserts the forward's bits and every leaf's
    gradient against the unfused program's, and returns how many fused calls this server
    made."""
    fused = 0
    for case in range(cases):
        build, inputs, plan = random_expression(rng)
        inputs = [np.nan_to_num(v, nan=0.3, posinf=1.5, neginf=-1.5) for v in inputs]
        # Some inputs are plain tensors: the values above them are read, not differentiated.
        needs = rng.random(len(inputs)) < 0.7
        needs[int(rng.integers(len(inputs)))] = True
        results = []
        for c in (client, unfused):
            with c.session(device=device) as sess, \
                    sess.autodiff(checkpointing=checkpointing) as ctx:
                tensors = [sess.tensor(v, requires_grad=bool(grad))
                           for v, grad in zip(inputs, needs)]
                program = _grad_program(sess, ctx, build, tensors)
                results.append((program.fused_calls, program()))
        (n, got), (n_plain, want) = results
        assert n_plain == 0
        fused += n
        try:
            assert_same_bits(got[0], want[0], any_nan=True)
            for g, w in zip(got[1:], want[1:]):
                tol = 1e-12 if np.asarray(w).dtype == np.float64 else 2e-5
                np.testing.assert_allclose(g, w, rtol=tol, atol=tol, equal_nan=True)
        except AssertionError as e:
            raise AssertionError(f"case {case}: {plan}") from e
    return fused


@pytest.mark.parametrize("checkpointing", ["none", "balanced"])
def test_random_recorded_expressions_give_the_unfused_gradients(client, unfused, checkpointing):
    """The forward fuses and gives the unfused bits; the gradients match the unfused
    program's, to rounding where a leaf is read twice (its gradients are summed in another
    order)."""
    rng = np.random.default_rng(21 if checkpointing == "none" else 22)
    assert _random_recorded_cases(client, unfused, rng, 40, checkpointing) >= 20, \
        "most random expressions fuse"


def test_gpu_recorded_expressions_give_the_unfused_gradients(client, unfused, gpu_device):
    """On a GPU device the fused forward is one generated kernel, and its backward runs the
    steps' own ops there."""
    rng = np.random.default_rng(24)
    assert _random_recorded_cases(client, unfused, rng, 8, device=gpu_device) >= 3, \
        "most random expressions fuse"


@pytest.mark.parametrize("checkpointing", ["none", "balanced"])
def test_a_fused_block_trains_as_pytorch_does(client, checkpointing):
    """A transformer-like block, y = sigmoid(a) * a - 0.01 x^2 with a = gelu(x w + b) * g + x,
    trained with Adam as a program: its elementwise trees fuse in the recorded forward, and
    loss, gradients and trained weights follow PyTorch's in f64."""
    rng = np.random.default_rng(23)
    x = rng.standard_normal((16, 12))
    w0, b0, g0 = rng.standard_normal((12, 12)) * 0.3, rng.standard_normal(12) * 0.1, \
        rng.standard_normal(12)
    with client.session() as sess, sess.autodiff(checkpointing=checkpointing) as ctx:
        params = [sess.tensor(v, requires_grad=True) for v in (w0, b0, g0)]
        opt = tensord.optim.Adam(params, lr=0.01)

        def step(xx):
            w, b, g = params
            a = sess.op("gelu", sess.op("matmul", xx, w) + b, approximate="tanh") * g + xx
            y = sess.op("sigmoid", a) * a - sess.op("square", xx) * 0.01
            loss = sess.op("mean", y * y)
            grads = ctx.backward(loss)
            out = [loss] + [grads[p] for p in params]
            opt.step(grads)
            return out
        program = sess.compile(step, x)
        assert program.fused_calls >= 2
        assert FUSED in program.fused_ops[:8]
        runs = [program(x) for _ in range(3)]
        trained = [p.numpy() for p in params]

    tp = [torch.tensor(v, requires_grad=True) for v in (w0, b0, g0)]
    topt = torch.optim.Adam(tp, lr=0.01, foreach=False)
    tx = torch.tensor(x)
    for got in runs:
        w, b, g = tp
        a = torch.nn.functional.gelu(tx @ w + b, approximate="tanh") * g + tx
        y = torch.sigmoid(a) * a - tx * tx * 0.01
        loss = (y * y).mean()
        topt.zero_grad()
        loss.backward()
        np.testing.assert_allclose(got[0], loss.item(), rtol=1e-12)
        for mine, p in zip(got[1:], tp):
            np.testing.assert_allclose(mine, p.grad.numpy(), rtol=1e-10, atol=1e-12)
        topt.step()
    for mine, p in zip(trained, tp):
        np.testing.assert_allclose(mine, p.detach().numpy(), rtol=1e-10, atol=1e-12)


def test_the_fused_op_is_not_part_of_the_api(sess):
    x = sess.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(tensord.TensordError) as err:
        sess.op(FUSED, x, x, steps="$0,$1,add")
    assert err.value.reason == "UNKNOWN_OP"


def test_gpu_programs_fuse_into_one_generated_kernel_with_the_unfused_bits(client, unfused,
                                                                          gpu_device):
    """On a GPU device the expression is one generated kernel, each step the expression of its
    op's own map in the same compute dtype; kernels are compiled without contraction, so the
    result is the unfused program's on that device bit for bit, except for which NaN a NaN
    is: OpenCL leaves the sign and payload of a NaN (sqrt of a negative, a NaN through neg or
    tanh) to the device's compiler, which may fold them differently in one kernel."""
    rng = np.random.default_rng(17)
    cases = [(PATTERNS[name][0], PATTERNS[name][1](rng), PATTERNS[name][2])
             for name in PATTERNS]
    for _ in range(25):
        build, inputs, _plan = random_expression(rng)
        cases.append((build, inputs, None))
    fused = 0
    for case, (build, inputs, calls) in enumerate(cases):
        results = []
        for c in (client, unfused):
            with c.session(device=gpu_device) as sess:
                program = sess.compile(lambda *xs, sess=sess: build(sess, *xs), *inputs)
                results.append((program.fused_calls, program(*inputs)))
        (n, value), (n_plain, plain) = results
        assert n_plain == 0
        if calls is not None:
            assert n == calls, f"case {case}"
        fused += n
        try:
            assert_same_bits(value, plain, any_nan=True)
        except AssertionError as e:
            raise AssertionError(f"case {case}") from e
    assert fused >= 20


UNARY = [("neg", {}), ("abs", {}), ("square", {}), ("exp", {}), ("log", {}), ("sqrt", {}),
         ("rsqrt", {}), ("reciprocal", {}), ("relu", {}), ("sigmoid", {}), ("tanh", {}),
         ("silu", {}), ("gelu", {}), ("gelu", {"approximate": "tanh"}),
         ("leaky_relu", {"negative_slope": 0.1}), ("elu", {"alpha": 1.3}),
         ("clamp", {"min": -0.5, "max": 0.75}), ("clamp", {"max": 0.0})]
BINARY = [("add", {}), ("sub", {}), ("mul", {}), ("div", {}), ("maximum", {}),
          ("minimum", {}), ("add", {"alpha": -1.0}), ("sub", {"alpha": 3.0})]


def random_expression(rng):
    """A random tree of pointwise calls over a few inputs of shapes that broadcast to one
    output shape, with numbers, NaN and infinities now and then, f32 or f64."""
    out = tuple(int(v) for v in rng.integers(1, 6, int(rng.integers(1, 4))))
    if rng.random() < 0.2:
        out = (int(rng.integers(40, 90)), 300)  # large: oneDNN's binary kernels, activations
    dtype = np.float64 if rng.random() < 0.25 else np.float32

    def leaf_shape():
        return tuple(d if rng.random() < 0.7 else 1 for d in out)[int(rng.integers(0, 2)):]
    inputs = []
    for _ in range(int(rng.integers(1, 5))):
        v = rng.standard_normal(leaf_shape()).astype(dtype)
        if rng.random() < 0.15 and v.size:
            v.flat[int(rng.integers(v.size))] = rng.choice([np.nan, np.inf, -np.inf, 0.0])
        inputs.append(v)
    # The plan: a list of calls, each naming its operands among earlier values.
    n_calls = int(rng.integers(2, 12))
    plan = []
    for k in range(n_calls):
        values = len(inputs) + k
        if rng.random() < 0.4:
            op, attrs = UNARY[int(rng.integers(len(UNARY)))]
            plan.append((op, attrs, [values - 1 if rng.random() < 0.7
                                     else int(rng.integers(values))]))
        else:
            op, attrs = BINARY[int(rng.integers(len(BINARY)))]
            a = values - 1 if rng.random() < 0.7 else int(rng.integers(values))
            b = "num" if rng.random() < 0.25 else int(rng.integers(values))
            plan.append((op, attrs, [a, b] if rng.random() < 0.8 else [b, a]))

    def build(s, *xs):
        vals = list(xs)
        for op, attrs, args in plan:
            operands = [1.5 if a == "num" else vals[a] for a in args]
            if all(isinstance(o, float) for o in operands):
                operands[0] = vals[-1]
            vals.append(s.op(op, *operands, **attrs))
        return vals[-1]
    return build, inputs, plan


def test_random_expressions_give_the_unfused_bits(client, unfused):
    rng = np.random.default_rng(18)
    fused = 0
    for case in range(120):
        build, inputs, plan = random_expression(rng)
        (n, _, value), (_, _, plain) = run_both(client, unfused, build, inputs)
        fused += n
        try:
            assert_same_bits(value, plain, any_nan=True)
        except AssertionError as e:
            raise AssertionError(f"case {case}: {plan}") from e
    assert fused >= 60, "most random expressions fuse"


def test_fused_results_match_pytorch(client):
    rng = np.random.default_rng(19)
    x, y = f32(rng, 9, 10), f32(rng, 10)
    with client.session() as sess:
        program = sess.compile(
            lambda x, y: sess.op("gelu", sess.op("clamp", x * y - 0.5, min=-1.0)) / (y * y + 1),
            x, y)
        assert program.fused_calls == 1
        tx, ty = torch.tensor(x), torch.tensor(y)
        want = torch.nn.functional.gelu(torch.clamp(tx * ty - 0.5, min=-1.0)) / (ty * ty + 1)
        np.testing.assert_allclose(program(x, y), want.numpy(), rtol=1e-6, atol=1e-6)


def test_a_failing_fused_run_reports_the_calls_as_written(client):
    """A run of a fused program that fails (here: an autodiff tensor of a closed context bound
    to a parameter) fails as the program as written would: naming the call, op and input the
    client wrote, not the fused call."""
    rng = np.random.default_rng(20)
    x, w, b = f32(rng, 4, 3), f32(rng, 2, 3), f32(rng, 2)
    with client.session() as sess:
        program = sess.compile(
            lambda x, w, b: sess.op("relu", sess.op("linear", x, w) + b) * 2.0 - 1.0, x, w, b)
        assert (program.fused_calls, program.fused_ops) == (2, ["fused_linear"] * 3 + [FUSED] * 2)
        with sess.autodiff():
            ws = sess.tensor(w, requires_grad=True)
        with pytest.raises(tensord.TensordError) as err:
            program(x, ws, b)
        assert err.value.reason == "AUTODIFF_CONTEXT_NOT_ENABLED"
        md = err.value.metadata
        assert (md["op"], md["call_index"], md["input_index"]) == ("linear", "0", "1")
        want = np.maximum(x @ w.T + b, 0) * 2 - 1
        np.testing.assert_allclose(program(x, w, b), want, rtol=1e-6, atol=1e-6)
