"""Sessions on an accelerator device through the Python client (TENSORD_TEST_GPU_DEVICE,
default opencl:0): transfers of every dtype, training with gradients, moves, mixed devices,
quota and atomic rollback on the device, the two autodiff failures naming the device. Skips
on a server without the device, unless TENSORD_REQUIRE_GPU is set (CI), where it fails."""
import os
import time

import numpy as np
import pytest
import tensord

DEVICE = os.environ.get("TENSORD_TEST_GPU_DEVICE", "opencl:0")


def require_device(client):
    names = [d["name"] for d in client.devices()]
    if DEVICE not in names:
        if os.environ.get("TENSORD_REQUIRE_GPU"):
            pytest.fail(f"the server has no device {DEVICE} (devices: {names})")
        pytest.skip(f"the server has no device {DEVICE}")


@pytest.fixture
def dsess(client):
    require_device(client)
    s = client.session(device=DEVICE)
    yield s
    s.close()


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64, np.bool_])
def test_put_and_get_round_trip_on_the_device(dsess, dtype):
    rng = np.random.default_rng(1)
    # 1 MiB and more streams in several chunks.
    value = (rng.standard_normal((512, 600)) * 10).astype(dtype)
    t = dsess.tensor(value)
    assert t.device == DEVICE
    np.testing.assert_array_equal(t.numpy(), value)
    np.testing.assert_array_equal(dsess.tensor(np.zeros((0, 3), dtype)).numpy(), np.zeros((0, 3), dtype))


def test_training_steps_match_the_cpu(client, dsess):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((32, 8))
    y = rng.standard_normal((32, 1))
    w0 = rng.standard_normal((1, 8)) * 0.3
    losses = {}
    with client.session(device="cpu") as csess:
        for s in (csess, dsess):
            w = s.tensor(w0)
            xs, ys = s.tensor(x), s.tensor(y)
            history = []
            for _ in range(5):
                with s.autodiff() as ctx:
                    leaf = s.tensor(w, requires_grad=True, ctx=ctx)
                    loss = s.op("mse_loss", s.op("linear", xs, leaf), ys)
                    grads = ctx.backward(loss)
                    assert grads[leaf].device == s.device
                    w = s.op("sub", leaf.detach(), grads[leaf], alpha=0.1)
                history.append(float(loss.numpy()))
            losses[s.device] = history
    np.testing.assert_allclose(losses[DEVICE], losses["cpu"], rtol=1e-12)
    assert losses["cpu"][-1] < losses["cpu"][0]


def test_moves_are_differentiable_and_mixing_devices_is_refused(dsess):
    with dsess.autodiff() as ctx:
        x = dsess.tensor(np.array([1.0, -2.0, 3.0]), requires_grad=True, ctx=ctx, device="cpu")
        assert x.device == "cpu"
        on_device = dsess.op("to_device", x, device=DEVICE)
        assert on_device.device == DEVICE
        loss = dsess.op("sum", dsess.op("mul", on_device, on_device))
        grads = ctx.backward(loss)
        assert grads[x].device == "cpu"
        np.testing.assert_allclose(grads[x].numpy(), [2.0, -4.0, 6.0])
    on_cpu = dsess.tensor(np.ones(3), device="cpu")
    on_dev = dsess.tensor(np.ones(3))
    with pytest.raises(tensord.TensordError) as err:
        dsess.op("add", on_cpu, on_dev)
    assert err.value.reason == "DEVICE_MISMATCH"
    assert err.value.metadata["device"] == "cpu"
    assert err.value.metadata["other_device"] == DEVICE
    # A Python number joins an op on any device.
    np.testing.assert_array_equal((on_dev + 1.5).numpy(), np.full(3, 2.5))


def test_autodiff_failures_name_the_device(dsess):
    ctx = dsess.autodiff()
    w = dsess.tensor(np.ones(3, np.float32), requires_grad=True, ctx=ctx)
    with pytest.raises(tensord.OperationNotMarkedForAutodiff) as err:
        dsess.op("assign", w, 0.0)
    assert err.value.metadata["device"] == DEVICE
    ctx.close()
    with pytest.raises(tensord.AutodiffContextNotEnabled) as err:
        w * 2.0
    assert err.value.metadata["device"] == DEVICE
    assert err.value.metadata["context_state"] == "closed"


def test_a_failing_batch_on_the_device_changes_nothing(dsess):
    target = dsess.tensor(np.arange(4, dtype=np.float32))
    other = dsess.tensor(np.ones(3, np.float32))
    used = dsess.info().memory_used_bytes
    with pytest.raises(tensord.TensordError) as err:
        with dsess.batch():
            dsess.op("assign", target, 7.0)
            dsess.op("add", target, other)  # [4] + [3]
    assert err.value.reason == "SHAPE_MISMATCH"
    np.testing.assert_array_equal(target.numpy(), np.arange(4, dtype=np.float32))
    assert dsess.info().memory_used_bytes == used


def test_device_memory_counts_against_the_quota(client):
    require_device(client)
    with client.session(device=DEVICE, memory_quota_bytes=4096) as s:
        held = s.tensor(np.zeros(512, np.float32))  # 2 KiB, held to the end
        with pytest.raises(tensord.TensordError) as err:
            s.op("zeros", shape=[1024])  # 4 KiB more
        assert err.value.reason == "QUOTA_EXCEEDED"
        # An output whose size only the data gives is charged too: 200 indices are 1600 bytes.
        x = s.tensor(np.ones(200, np.float32))  # 800 bytes
        used = s.info().memory_used_bytes
        with pytest.raises(tensord.TensordError) as err:
            s.op("nonzero", x)
        assert err.value.reason == "QUOTA_EXCEEDED"
        assert s.info().memory_used_bytes == used
        np.testing.assert_array_equal(s.op("nonzero", x[:10]).numpy(), np.arange(10)[:, None])
        assert held.shape == (512,)


@pytest.mark.parametrize("kind,config", [("SGD", dict(lr=0.1, momentum=0.9, nesterov=True)),
                                         ("AdamW", dict(lr=0.05, amsgrad=True))])
def test_tensord_optim_on_the_device_matches_the_cpu(client, dsess, kind, config):
    rng = np.random.default_rng(7)
    x, y = rng.standard_normal((16, 4)), rng.standard_normal((16, 1))
    w0 = rng.standard_normal((4, 1))
    result = {}
    with client.session(device="cpu") as csess:
        for s in (csess, dsess):
            with s.autodiff() as ctx:
                w = s.tensor(w0, requires_grad=True)
                assert w.device == s.device
                opt = getattr(tensord.optim, kind)([w], **config)
                xs, ys = s.tensor(x), s.tensor(y)
                for _ in range(5):
                    opt.step(ctx.backward(s.op("mse_loss", xs @ w, ys)))
                assert all(t.device == s.device for t in opt.state[w].values())
                result[s.device] = w.numpy()
    np.testing.assert_allclose(result[DEVICE], result["cpu"], rtol=1e-10)


def test_optimizer_state_in_host_memory_is_refused_on_the_device(dsess):
    # A 0-d host tensor would join the device call as a copy, which the step would write.
    p = dsess.tensor(np.array(1.0))
    state = [dsess.tensor(np.array(0.0)) for _ in range(2)]
    with pytest.raises(tensord.TensordError) as e:
        with dsess.no_grad():
            dsess.op("adam", p, np.array(1.0), *state, dsess.tensor(np.array(0.0), device="cpu"))
    assert e.value.reason == "DEVICE_MISMATCH", str(e.value)
    assert e.value.metadata["op"] == "adam" and e.value.metadata["input_index"] == "4"
    np.testing.assert_array_equal(p.numpy(), np.array(1.0))


def test_a_compiled_step_on_the_device_matches_the_cpu(client, dsess):
    # Inputs bound as numpy arrays are put on the session's device at every run; the forward,
    # backward and Adam update all run there, and a closed context fails the run, naming it.
    rng = np.random.default_rng(11)
    batches = [(rng.standard_normal((16, 4)), rng.standard_normal((16, 1))) for _ in range(3)]
    w0 = rng.standard_normal((4, 1))
    result = {}
    with client.session(device="cpu") as csess:
        for s in (csess, dsess):
            with s.autodiff() as ctx:
                w = s.tensor(w0, requires_grad=True)
                opt = tensord.optim.Adam([w], lr=0.05)

                def train_step(x, y):
                    loss = s.op("mse_loss", x @ w, y)
                    opt.step(ctx.backward(loss))
                    return loss

                step = s.compile(train_step, *batches[0])
                losses = [float(step(x, y)) for x, y in batches]
                assert w.device == s.device
                result[s.device] = (losses, w.numpy())
            with pytest.raises(tensord.TensordError) as err:
                step(*batches[0])
            assert err.value.reason == "AUTODIFF_CONTEXT_NOT_ENABLED"
    np.testing.assert_allclose(result[DEVICE][0], result["cpu"][0], rtol=1e-10)
    np.testing.assert_allclose(result[DEVICE][1], result["cpu"][1], rtol=1e-10)
    assert result["cpu"][0][-1] < result["cpu"][0][0]


def test_a_sessions_fetch_does_not_wait_for_another_sessions_kernels(client):
    """Each session runs on a queue of its own: while one session's long batch still runs on
    the device, another session's put and fetch come back (on one shared queue they would wait
    for the whole batch, and the first session's fetch would then find it done)."""
    require_device(client)
    with client.session(device=DEVICE) as first, client.session(device=DEVICE) as second:
        rng = np.random.default_rng(5)
        x = first.tensor(rng.standard_normal((768, 768)).astype(np.float32))
        small = rng.standard_normal(8).astype(np.float32)
        np.testing.assert_array_equal(second.tensor(small).numpy(), small)
        tries = []
        for _ in range(3):
            with first.batch():  # returns once its kernels are queued
                h = x
                for _ in range(16):
                    h = (h @ x) * 0.001
            t0 = time.perf_counter()
            np.testing.assert_array_equal(second.tensor(small).numpy(), small)
            t1 = time.perf_counter()
            h.numpy()  # waits for the batch
            t2 = time.perf_counter()
            tries.append((t1 - t0, t2 - t1))
            if t1 - t0 < t2 - t1:
                break
        assert any(other < rest for other, rest in tries), (
            f"the second session's put and fetch waited for the first session's batch "
            f"(seconds, its round trip / what was left of the batch then: {tries})")


def test_a_device_out_of_memory_fails_the_call_and_keeps_the_session(tmp_path, monkeypatch):
    """A device of 64 MiB (TENSORD_GPU_MEMORY_LIMIT lowers the device's memory): a put, and a
    batch whose call needs more than is left, are OUT_OF_MEMORY naming the device; the batch
    is rolled back, the session keeps its tensors and works on, and what it frees is usable."""
    from conftest import ServerProcess, server_binary
    monkeypatch.setenv("TENSORD_GPU_MEMORY_LIMIT", str(64 << 20))
    proc = ServerProcess(server_binary(), tmp_path / "tensord.log")
    proc.start()
    try:
        with tensord.connect(proc.address) as client:
            require_device(client)
            listed = {d["name"]: d for d in client.devices()}[DEVICE]
            assert listed["memory_bytes"] == 64 << 20
            with client.session(device=DEVICE) as s:
                mib = (1 << 20) // 4  # f32 elements
                a = s.tensor(np.full(16 * mib, 1.5, np.float32))
                b = s.tensor(np.full(16 * mib, 2.5, np.float32))
                with pytest.raises(tensord.TensordError) as put:
                    s.tensor(np.zeros(40 * mib, np.float32))
                assert put.value.reason == "OUT_OF_MEMORY", put.value
                assert put.value.code.name == "RESOURCE_EXHAUSTED"
                assert put.value.metadata.get("device") == DEVICE
                before = s.info()
                with pytest.raises(tensord.TensordError) as batch:
                    with s.batch():
                        c = a + b  # 16 MiB: fits
                        (c.reshape([16 * mib, 1]) * c[:3]).sum()  # [16 Mi, 3]: 192 MiB
                assert batch.value.reason == "OUT_OF_MEMORY", batch.value
                after = s.info()
                assert [t.handle for t in after.tensors] == [t.handle for t in before.tensors]
                assert after.memory_used_bytes == before.memory_used_bytes
                np.testing.assert_array_equal(a.numpy()[:4], np.full(4, 1.5, np.float32))
                np.testing.assert_array_equal((a + b).numpy()[-4:], np.full(4, 4.0, np.float32))
                del b
                s.info()  # sends the releases the client queued
                big = s.tensor(np.full(40 * mib, 3.0, np.float32))
                np.testing.assert_array_equal(big.numpy()[-2:], np.full(2, 3.0, np.float32))
    finally:
        proc.stop()
