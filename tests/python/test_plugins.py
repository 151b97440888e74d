"""Custom-op plugins through the Python client: a real tensord process started with
--plugin <the example plugin> (examples/plugins), checked against PyTorch; and plugins the
server must refuse, which make the binary exit non-zero with one line naming the plugin.

The plugin is $TENSORD_EXAMPLE_PLUGIN, else examples/plugins/libtensord_example_ops.so in the
build directory of the server binary (see conftest.py)."""
import os
import subprocess
from pathlib import Path

import grpc
import numpy as np
import pytest
import torch

import tensord
from conftest import ServerProcess, server_binary

ORIGIN = "libtensord_example_ops.so"


def example_plugin() -> Path:
    env = os.environ.get("TENSORD_EXAMPLE_PLUGIN")
    return Path(env) if env else server_binary().parent / "examples" / "plugins" / ORIGIN


@pytest.fixture(scope="module")
def plugin_client(tmp_path_factory):
    binary, plugin = server_binary(), example_plugin()
    if not binary.is_file():
        pytest.fail(f"tensord server binary not found at {binary}: build it or set TENSORD_BIN")
    if not plugin.is_file():
        pytest.fail(f"example plugin not found at {plugin}: build the tensord_example_ops "
                    "target or set TENSORD_EXAMPLE_PLUGIN")
    proc = ServerProcess(binary, tmp_path_factory.mktemp("plugin_server") / "tensord.log",
                         extra_args=[f"--plugin={plugin}"])
    proc.start()
    client = tensord.connect(proc.address)
    yield client
    client.close()
    alive = proc.proc is not None and proc.proc.poll() is None
    proc.stop()
    assert alive, f"the tensord server died during the tests; log:\n{proc.log_tail()}"


@pytest.fixture
def psess(plugin_client):
    s = plugin_client.session()
    yield s
    s.close()


def session_state(sess):
    info = sess.info()
    return ([(t.handle, tuple(t.shape), t.requires_grad) for t in info.tensors],
            info.memory_used_bytes, [(c.context_id, c.state, c.tape_nodes) for c in info.contexts])


def test_list_ops_shows_plugin_ops_with_marking_and_origin(plugin_client):
    ops = {o["name"]: o for o in plugin_client.ops()}
    square, clip = ops["example_scaled_square"], ops["example_clip_norm"]
    assert square["marking"] == "differentiable"
    assert clip["marking"] == "unmarked"
    assert square["origin"] == clip["origin"] == ORIGIN
    assert square["category"] == clip["category"] == "plugin"
    assert {"f32", "f64"} <= set(square["dtypes"]) and "i32" not in square["dtypes"]
    assert [(a["name"], a["type"], a["default"]) for a in clip["attrs"]] == [
        ("max_norm", "float", 1.0), ("norm_type", "float", 2.0)]
    assert "example_scaled_square_backward" not in ops
    assert ops["matmul"]["origin"] == "builtin"


def torch_clip(x: np.ndarray, max_norm: float, norm_type: float) -> np.ndarray:
    p = torch.nn.Parameter(torch.zeros(x.shape, dtype=torch.float64))
    p.grad = torch.tensor(x)
    torch.nn.utils.clip_grad_norm_([p], max_norm, norm_type=norm_type)
    return p.grad.numpy()


@pytest.mark.parametrize("max_norm,norm_type", [(1.0, 2.0), (50.0, 2.0), (0.5, 1.0),
                                                (2.0, float("inf")), (0.0, 2.0)])
def test_clip_norm_matches_torch(psess, max_norm, norm_type):
    x = np.random.default_rng(3).standard_normal((4, 5))
    y = psess.op("example_clip_norm", psess.tensor(x), max_norm=max_norm, norm_type=norm_type)
    np.testing.assert_allclose(y.numpy(), torch_clip(x, max_norm, norm_type), rtol=1e-12,
                               atol=1e-15)


def test_scaled_square_forward_and_backward_match_torch(psess):
    rng = np.random.default_rng(4)
    xn, wn = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    with psess.autodiff() as ctx:
        x = psess.tensor(xn, requires_grad=True)
        y = psess.op("example_scaled_square", psess.op("sin", x), scale=0.75)
        assert y.requires_grad
        loss = psess.op("sum", y * psess.tensor(wn))
        grad = ctx.backward(loss)[x].numpy()  # gradients go with their context
    tx = torch.tensor(xn, requires_grad=True)
    tl = (0.75 * torch.sin(tx) ** 2 * torch.tensor(wn)).sum()
    tl.backward()
    assert loss.item() == pytest.approx(tl.item(), rel=1e-12)
    np.testing.assert_allclose(grad, tx.grad.numpy(), rtol=1e-10, atol=1e-14)
    f32 = psess.op("example_scaled_square", psess.tensor(np.array([1.5, -2], np.float32)))
    assert f32.dtype == np.float32
    np.testing.assert_array_equal(f32.numpy(), np.array([2.25, 4], np.float32))


def test_unmarked_op_on_autodiff_tensor_raises_for_remote_client(psess):
    with psess.autodiff() as ctx:
        w = psess.tensor(np.array([3.0, 4.0]), requires_grad=True)
        loss = psess.op("sum", w * 2.0)
        state = session_state(psess)
        with pytest.raises(tensord.OperationNotMarkedForAutodiff) as err:
            psess.op("example_clip_norm", w)
        e = err.value
        assert e.code == grpc.StatusCode.FAILED_PRECONDITION
        assert e.reason == "OPERATION_NOT_MARKED_FOR_AUTODIFF"
        assert e.metadata["op"] == "example_clip_norm"
        assert e.metadata["plugin"] == ORIGIN
        assert e.metadata["tensor_id"] == str(w.handle)
        assert e.metadata["context_id"] == str(ctx.id)
        assert ORIGIN in e.message and "detach" in e.message
        assert session_state(psess) == state
        # The session still works, and detach is the way out.
        np.testing.assert_array_equal(ctx.backward(loss)[w].numpy(), [2.0, 2.0])
        clipped = psess.op("example_clip_norm", w.detach())
        assert not clipped.requires_grad
        np.testing.assert_allclose(clipped.numpy(), torch_clip(np.array([3.0, 4.0]), 1.0, 2.0))


GPU_DEVICE = os.environ.get("TENSORD_TEST_GPU_DEVICE", "opencl:0")


def test_plugin_op_on_a_gpu_device_is_refused_typed(plugin_client):
    """A plugin's kernels take host memory: on another device the op is UNSUPPORTED_ON_BACKEND
    naming op and device, before anything is allocated; moved to the CPU it runs, gradient
    included, and the gradient moves back."""
    names = [d["name"] for d in plugin_client.devices()]
    if GPU_DEVICE not in names:
        if os.environ.get("TENSORD_REQUIRE_GPU"):
            pytest.fail(f"the server has no device {GPU_DEVICE} (devices: {names})")
        pytest.skip(f"the server has no device {GPU_DEVICE}")
    xn = np.array([0.5, -1.0, 2.0])
    with plugin_client.session(device=GPU_DEVICE) as s:
        with s.autodiff() as ctx:
            x = s.tensor(xn, requires_grad=True)
            assert x.device == GPU_DEVICE
            state = session_state(s)
            with pytest.raises(tensord.TensordError) as err:
                s.op("example_scaled_square", x, scale=2.0)
            e = err.value
            assert e.code == grpc.StatusCode.UNIMPLEMENTED
            assert e.reason == "UNSUPPORTED_ON_BACKEND"
            assert e.metadata["op"] == "example_scaled_square"
            assert e.metadata["device"] == GPU_DEVICE
            assert session_state(s) == state
            on_cpu = s.op("to_device", x, device="cpu")
            y = s.op("example_scaled_square", on_cpu, scale=2.0)
            loss = s.op("sum", s.op("to_device", y, device=GPU_DEVICE))
            grad = ctx.backward(loss)[x]
            assert grad.device == GPU_DEVICE
            np.testing.assert_allclose(grad.numpy(), 4 * xn, rtol=1e-12)


def test_plugin_error_carries_reason_and_plugin(psess):
    with pytest.raises(tensord.BadAttribute) as err:
        psess.op("example_clip_norm", psess.tensor(np.ones(3)), max_norm=-2.0)
    assert err.value.metadata["plugin"] == ORIGIN
    assert "max_norm must be >= 0, got -2" in err.value.message


def run_refused(args, env=None):
    """Runs tensord with `args`, which must make it exit at start; returns its stderr lines."""
    proc = subprocess.run([str(server_binary()), "--address=127.0.0.1:0", *args],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, **(env or {})})
    assert proc.returncode != 0, f"tensord started: {proc.stderr}"
    return proc.stderr.strip().splitlines()


def test_bad_plugin_makes_the_server_exit_with_one_line(tmp_path):
    missing = tmp_path / "libmissing_ops.so"
    assert run_refused([f"--plugin={missing}"]) == [
        f"tensord: plugin {missing}: cannot open: No such file or directory"]

    not_a_library = tmp_path / "libtext.so"
    not_a_library.write_text("not an ELF file\n")
    lines = run_refused(["--plugin", str(example_plugin()), "--plugin", str(not_a_library)])
    assert len(lines) == 1 and lines[0].startswith(f"tensord: plugin {not_a_library}: cannot load")

    lines = run_refused([], env={"TENSORD_PLUGINS": f"{example_plugin()},{example_plugin()}"})
    assert len(lines) == 1 and lines[0].endswith("given twice"), lines
