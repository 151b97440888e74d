"""sess.compile: a traced training step runs forward, backward and the optimizer update in one
round trip, equals the eager step bit for bit (f64) and PyTorch's; the two autodiff failures
are typed at compile and at run time; a bad input or a failing run changes nothing."""
import numpy as np
import pytest
import torch

import tensord


def session_state(sess):
    info = sess.info()
    return ([(t.handle, tuple(t.shape)) for t in info.tensors], info.memory_used_bytes,
            [(c.context_id, c.state, c.tape_nodes) for c in info.contexts])


def mlp_params(rng):
    return [rng.standard_normal(s) * 0.5 for s in ((5, 8), (8,), (8, 3))]


def forward(sess, params, x, y):
    w1, b1, w2 = params
    return sess.op("cross_entropy", sess.op("tanh", x @ w1 + b1) @ w2, y)


def test_compiled_adam_step_equals_the_eager_step_and_torch(sess):
    rng = np.random.default_rng(3)
    values = mlp_params(rng)
    batches = [(rng.standard_normal((16, 5)), rng.integers(0, 3, 16)) for _ in range(4)]
    tparams = [torch.tensor(v, requires_grad=True) for v in values]
    topt = torch.optim.Adam(tparams, lr=0.05, foreach=False)
    with sess.autodiff() as ctx:
        eager = [sess.tensor(v, requires_grad=True) for v in values]
        compiled = [sess.tensor(v, requires_grad=True) for v in values]
        eager_opt = tensord.optim.Adam(eager, lr=0.05)
        opt = tensord.optim.Adam(compiled, lr=0.05)

        def train_step(x, y):
            loss = forward(sess, compiled, x, y)
            opt.step(ctx.backward(loss))
            return loss

        step = sess.compile(train_step, *batches[0])
        np.testing.assert_array_equal(compiled[0].numpy(), values[0],
                                      err_msg="compiling ran the step once and undid it")
        before = ctx.info().tape_nodes
        for i, (xn, yn) in enumerate(batches):
            with sess.batch():
                eager_loss = forward(sess, eager, sess.tensor(xn), sess.tensor(yn))
            eager_opt.step(ctx.backward(eager_loss))
            loss = step(xn, yn)
            tloss = torch.nn.functional.cross_entropy(
                torch.tanh(torch.tensor(xn) @ tparams[0] + tparams[1]) @ tparams[2],
                torch.tensor(yn))
            topt.zero_grad()
            tloss.backward()
            topt.step()
            assert isinstance(loss, np.ndarray) and loss.shape == ()
            assert loss == eager_loss.item(), f"step {i}"
            assert float(loss) == pytest.approx(tloss.item(), rel=1e-12)
            for p, e, tp in zip(compiled, eager, tparams):
                np.testing.assert_array_equal(p.numpy(), e.numpy(), err_msg=f"step {i}")
                np.testing.assert_allclose(p.numpy(), tp.detach().numpy(), rtol=1e-10,
                                           atol=1e-12)
        assert ctx.info().tape_nodes == before, "each run freed the graph it recorded"
        assert opt.state[compiled[0]]["step"].item() == len(batches)


def test_gradients_and_constants_come_back_in_the_returned_structure(sess):
    with sess.autodiff() as ctx:
        w = sess.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)

        def fn(c, k):
            loss = sess.op("sum", w * c * k)
            grads = ctx.backward(loss)
            return {"loss": loss, "grad": grads[w], "tag": "step"}

        step = sess.compile(fn, np.zeros(3), 1.0)
        out = step(np.array([4.0, -5.0, 6.0]), 2.0)
        assert out["tag"] == "step"
        assert out["loss"] == pytest.approx(2 * (4 - 10 + 18))
        np.testing.assert_array_equal(out["grad"], [8.0, -10.0, 12.0])
        np.testing.assert_array_equal(w.numpy(), [1, 2, 3]), "no update: w unchanged"


def test_inference_program_takes_numbers_and_records_nothing(sess):
    with sess.autodiff() as ctx:
        w = sess.tensor(np.array([[1.0, -1.0], [0.5, 2.0]], dtype=np.float32),
                        requires_grad=True)
        step = sess.compile(lambda x, scale: sess.op("relu", x @ w) * scale,
                            np.ones((3, 2), np.float32), 1.0)
        x = np.arange(6, dtype=np.float32).reshape(3, 2)
        np.testing.assert_allclose(step(x, 0.5), np.maximum(x @ w.numpy(), 0) * 0.5)
        assert ctx.info().tape_nodes == 0, "a program without backward computes without recording"


def test_unmarked_use_fails_at_compile_naming_the_call(sess):
    with sess.autodiff() as ctx:
        w = sess.tensor(np.array([1.0, -2.0]), requires_grad=True)

        def fn():
            h = sess.op("relu", w)
            sess.op("assign", h, 0.0)  # an in-place write into a recorded output
            loss = sess.op("sum", h)
            ctx.backward(loss)
            return loss

        before = session_state(sess)
        with pytest.raises(tensord.TensordError) as e:
            sess.compile(fn)
        assert e.value.reason == "OPERATION_NOT_MARKED_FOR_AUTODIFF"
        assert e.value.metadata["call_index"] == "1"
        assert e.value.metadata["op"] == "assign"
        assert e.value.metadata["phase"] == "forward"
        assert session_state(sess) == before


def test_run_in_a_closed_context_is_autodiff_context_not_enabled(sess):
    ctx = sess.autodiff()
    w = sess.tensor(np.array([1.0, 2.0]), requires_grad=True)
    opt = tensord.optim.SGD([w], lr=0.5)

    def fn():
        loss = sess.op("sum", w * w)
        opt.step(ctx.backward(loss))
        return loss

    step = sess.compile(fn)
    assert step() == 5.0
    np.testing.assert_array_equal(w.numpy(), [0.0, 0.0])
    ctx.close()
    with pytest.raises(tensord.TensordError) as e:
        step()
    assert e.value.reason == "AUTODIFF_CONTEXT_NOT_ENABLED"
    assert e.value.metadata["context_state"] == "closed"
    assert e.value.metadata["program_id"] == str(step.id)


def test_bad_inputs_and_failing_runs_change_nothing(sess):
    with sess.autodiff() as ctx:
        w = sess.tensor(np.array([1.0, 2.0, 3.0]), requires_grad=True)
        opt = tensord.optim.SGD([w], lr=0.25, momentum=0.9)

        def fn(idx):
            loss = sess.op("sum", w * w)
            opt.step(ctx.backward(loss))
            # Reads the updated weights where the run says: out of range fails after the step.
            return sess.op("index_select", w, idx, dim=0)

        step = sess.compile(fn, np.array([0]))
        before = session_state(sess)
        buf = opt.state[w]["momentum_buffer"].numpy()
        with pytest.raises(tensord.TensordError) as e:
            step(np.array([7]))
        assert e.value.reason == "INDEX_OUT_OF_RANGE"
        assert e.value.metadata["phase"] == "update"
        np.testing.assert_array_equal(w.numpy(), [1, 2, 3])
        np.testing.assert_array_equal(opt.state[w]["momentum_buffer"].numpy(), buf)
        assert session_state(sess) == before
        with pytest.raises(tensord.TensordError) as e:
            step(np.array([0, 1]))
        assert e.value.reason == "SHAPE_MISMATCH"
        assert e.value.metadata["parameter_index"] == "0"
        with pytest.raises(tensord.TensordError) as e:
            step(np.array([0.0]))
        assert e.value.reason == "DTYPE_MISMATCH"
        with pytest.raises(tensord.TensordError) as e:
            step()
        assert e.value.reason == "INVALID_REQUEST"
        assert session_state(sess) == before
        np.testing.assert_array_equal(step(np.array([2])), [3 - 0.25 * 6])


def test_programs_are_listed_released_and_private_to_the_session(client, sess):
    step = sess.compile(lambda x: sess.op("neg", x), np.ones(2))
    np.testing.assert_array_equal(step(np.array([1.0, -2.0])), [-1.0, 2.0])
    [info] = sess.info().programs
    assert (info.program_id, info.parameters, info.calls, info.runs) == (step.id, 1, 1, 1)
    other = client.session()
    from tensord._pb import service_pb2
    with pytest.raises(tensord.TensordError) as e:
        other._call("RunProgram", service_pb2.RunProgramRequest(
            session_id=other.id, program_id=step.id))
    assert e.value.reason == "PROGRAM_NOT_FOUND"
    other.close()
    step.release()
    assert not sess.info().programs
    with pytest.raises(tensord.TensordError) as e:
        step(np.ones(2))
    assert e.value.reason == "PROGRAM_NOT_FOUND"


def test_misuse_while_tracing_is_refused_by_the_client(sess):
    with sess.autodiff() as ctx:
        w = sess.tensor(np.ones(2), requires_grad=True)

        def read_after_backward():
            loss = sess.op("sum", w)
            ctx.backward(loss)
            return sess.op("neg", w)  # after the backward: an update, not recorded

        np.testing.assert_array_equal(sess.compile(read_after_backward)(), [-1.0, -1.0])
        assert ctx.info().tape_nodes == 0
        with pytest.raises(tensord.TensordError) as e:
            sess.compile(lambda: ctx.backward(sess.op("sum", w), seed=np.ones(())))
        assert e.value.reason == "INVALID_REQUEST"
        # The session is usable after a failed trace.
        assert sess.op("sum", w).item() == 2.0


def test_calls_whose_inputs_change_shape_between_runs_are_planned_again(sess):
    # A run reuses what the call decided the run before (attributes, output types, kernel)
    # only for inputs of the same types: masked_select's output length follows the values.
    def fn(x):
        picked = sess.op("masked_select", x, x > 0.0)
        return sess.op("sum", picked * 2.0 + 1.0), picked * 3.0

    step = sess.compile(fn, np.ones(6, np.float32))
    for values in ([1, -1, 2, -2, 3, -3], [-1, -1, -1, -1, -1, 4], [5, 6, 7, 8, 9, 10],
                   [-1] * 6, [1, -1, 2, -2, 3, -3]):
        x = np.array(values, np.float32)
        total, tripled = step(x)
        kept = x[x > 0]
        np.testing.assert_array_equal(tripled, kept * 3)
        assert float(total) == pytest.approx(float(np.sum(kept * 2 + 1)))


def test_a_program_reports_the_peak_its_run_holds(sess):
    n = 1 << 16  # f32: 256 KiB per tensor
    x = np.ones(n, np.float32)
    step = sess.compile(lambda v: (((v * 2 + 1) * 3 + 1) * 5 + 1) * 0.5, x)
    np.testing.assert_array_equal(step(x), np.full(n, 25.5, np.float32))
    # What a run holds at its peak (one output of 256 KiB at least), listed with the program.
    assert n * 4 <= step.peak_bytes <= 3 * n * 4
    [info] = sess.info().programs
    assert info.peak_bytes == step.peak_bytes
