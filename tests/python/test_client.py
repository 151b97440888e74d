"""The Python client against a real server: transfers, operands, operator sugar, batches,
typed errors, session isolation and handle release."""
import gc
import os
import subprocess
import sys
from pathlib import Path

import grpc
import numpy as np
import pytest

import tensord
from tensord._pb import ops_pb2, service_pb2

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]


def sample(rng, shape, dtype):
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    if np.issubdtype(dtype, np.integer):
        return rng.integers(-1000, 1000, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


def session_state(sess):
    info = sess.info()
    return ([(t.handle, tuple(t.shape), t.dtype) for t in info.tensors], info.memory_used_bytes,
            [(c.context_id, c.state, c.tape_nodes) for c in info.contexts])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (3, 4), (2, 0, 5), (2, 3, 1, 2)])
def test_put_get_roundtrip(sess, dtype, shape):
    x = sample(np.random.default_rng(1), shape, dtype)
    t = sess.tensor(x)
    assert t.shape == shape and t.dtype == np.dtype(dtype) and t.device == "cpu"
    assert t.nbytes == x.nbytes and not t.requires_grad
    y = t.numpy()
    assert y.dtype == np.dtype(dtype) and y.shape == shape
    np.testing.assert_array_equal(y, x)
    y[...] = 0  # downloads are writable copies


def test_large_tensor_streams_both_ways(sess):
    x = np.random.default_rng(2).standard_normal((3, 1024, 1024)).astype(np.float32)  # 12 MiB
    t = sess.tensor(x)
    np.testing.assert_array_equal(t.numpy(), x)
    # A large array operand is uploaded rather than sent as a literal.
    np.testing.assert_allclose((t + x).numpy(), 2 * x)


def test_download_chunks_are_read_in_place(sess, monkeypatch):
    """A message holding one chunk alone is read as a view of the bytes gRPC handed over; any
    other message is parsed by protobuf. The download is the same either way."""
    from tensord import stream_chunks
    from tensord._pb import tensor_pb2
    read = stream_chunks.read_get_tensor_response
    for size in (0, 1, 127, 128, 16383, 16384, 1 << 20):
        data = bytes(range(256)) * (size // 256) + bytes(size % 256)
        msg = read(service_pb2.GetTensorResponse(chunk=data).SerializeToString())
        assert isinstance(msg, stream_chunks.ChunkOnly) == (size > 0) and not msg.HasField("info")
        assert bytes(msg.chunk) == data
    first = read(service_pb2.GetTensorResponse(
        info=tensor_pb2.TensorInfo(handle=7, shape=[2]), chunk=b"ab").SerializeToString())
    assert isinstance(first, service_pb2.GetTensorResponse) and first.info.handle == 7
    # A chunk followed by a field this client does not know: parsed, the field kept aside.
    extra = service_pb2.GetTensorResponse(chunk=b"abc").SerializeToString() + b"\x78\x01"
    assert bytes(read(extra).chunk) == b"abc"
    with pytest.raises(Exception):
        read(b"\x12\x05abc")  # cut short: protobuf's own error

    seen, chunk_only = [], stream_chunks.ChunkOnly
    monkeypatch.setattr(stream_chunks, "ChunkOnly",
                        lambda chunk: seen.append(len(chunk)) or chunk_only(chunk))
    x = np.random.default_rng(5).standard_normal(3 << 18).astype(np.float32)  # 3 MiB
    np.testing.assert_array_equal(sess.tensor(x).numpy(), x)
    assert sum(seen) > 0 and len(seen) >= 2  # every chunk after the first, read in place


# Both scripts keep their process on 4 KiB pages (PR_SET_THP_DISABLE), whatever the machine's
# transparent huge page setting, so that faults count pages.
NO_HUGE_PAGES = """
import ctypes
ctypes.CDLL(None).prctl(41, 1, 0, 0, 0)
"""

REUSED_BLOCK_FAULTS = NO_HUGE_PAGES + """
import ctypes, resource, sys
import tensord
libc = ctypes.CDLL(None)
libc.malloc.restype, libc.malloc.argtypes = ctypes.c_void_p, [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]

def faults(size=16 << 20):
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    block = libc.malloc(size)
    libc.memset(block, 1, size)
    libc.free(block)
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

with tensord.connect(sys.argv[1]):
    faults()
    print(faults(), tensord.process_malloc.state())
"""

DOWNLOAD_FAULTS_PER_MIB = NO_HUGE_PAGES + """
import resource, sys
import numpy as np
import tensord
with tensord.connect(sys.argv[1]) as c, c.session() as s:
    # 64 MiB: above glibc's adaptive ceiling, so that freeing it never raises the thresholds
    t = s.tensor(np.ones(16 << 20, np.float32))
    t.numpy()

    def faults(fill):
        before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        for _ in range(3):
            fill()
        return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before

    # The array each download lands in is new memory, as is one filled here: only the rest counts.
    own = faults(t.numpy) - faults(lambda: np.empty(16 << 20, np.float32).fill(1))
    print(own / (3 * 64), tensord.process_malloc.state())
"""


def run_client_script(client, script, mode):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith("MALLOC_") and k != "GLIBC_TUNABLES"}
    env["TENSORD_CLIENT_MALLOC"] = mode
    env["PYTHONPATH"] = str(Path(tensord.__file__).resolve().parents[1])
    out = subprocess.run([sys.executable, "-c", script, client.address], env=env,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    figure, state = out.stdout.split()
    return float(figure), state


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_the_first_connect_sets_the_process_malloc_thresholds(client):
    """At its first connect the client raises glibc's mmap and trim thresholds, so that a
    16 MiB block freed and allocated again is reused from the heap instead of mapped fresh (and
    faulted in page by page); TENSORD_CLIENT_MALLOC=default leaves glibc's defaults, under
    which the second 16 MiB block is still new memory."""
    tuned, tuned_state = run_client_script(client, REUSED_BLOCK_FAULTS, "")
    default, default_state = run_client_script(client, REUSED_BLOCK_FAULTS, "default")
    assert (tuned_state, default_state) == ("set", "asked")
    pages = (16 << 20) // 4096
    assert tuned < pages / 16 and default > pages / 2, (tuned, default)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc")
def test_downloads_reuse_the_client_process_memory(client):
    """The buffers gRPC receives a download into are reused: besides the array it lands in, a
    download faults far fewer pages than one per 4 KiB downloaded (256 per MiB). How often glibc's defaults map them fresh depends on
    its adaptive thresholds and on which threads free them, so only the tuned figure is held."""
    faults, state = run_client_script(client, DOWNLOAD_FAULTS_PER_MIB, "")
    assert state == "set"
    assert faults < 64, faults


def test_non_contiguous_and_big_endian_inputs(sess):
    x = np.arange(12, dtype=np.float64).reshape(3, 4)
    np.testing.assert_array_equal(sess.tensor(x.T).numpy(), x.T)
    np.testing.assert_array_equal(sess.tensor(x.astype(">f8")).numpy(), x)


def test_unsupported_dtype_is_refused_client_side(sess):
    for dt in (np.complex64, np.uint16, np.uint32):
        with pytest.raises(TypeError):
            sess.tensor(np.zeros(3, dt))


def test_scalar_operands_promote_like_torch(sess):
    a = sess.tensor(np.array([1.0, 2.0], np.float32))
    assert (a * 2.0).dtype == np.float32
    i = sess.tensor(np.array([1, 2], np.int32))
    half = i * 0.5
    assert half.dtype == np.float32
    np.testing.assert_allclose(half.numpy(), [0.5, 1.0])
    assert (i + 1).dtype == np.int32
    np.testing.assert_allclose((2.0 - a).numpy(), [1.0, 0.0])
    np.testing.assert_allclose((1.0 / a).numpy(), [1.0, 0.5])
    d = sess.tensor(np.array([1.0], np.float64))
    assert (d * 0.1).dtype == np.float64
    np.testing.assert_array_equal((a > 1.5).numpy(), [False, True])


def test_numpy_array_operands_are_literals(sess):
    a = sess.tensor(np.ones((2, 2), np.float64))
    y = sess.op("add", a, np.full((2,), 3.0))
    np.testing.assert_array_equal(y.numpy(), np.full((2, 2), 4.0))
    # numpy on the left defers to the Tensor
    y = np.full((2, 2), 2.0) * a
    assert isinstance(y, tensord.Tensor)
    np.testing.assert_array_equal(y.numpy(), np.full((2, 2), 2.0))


def test_operator_sugar(sess):
    rng = np.random.default_rng(3)
    an, bn = rng.standard_normal((3, 4)), rng.standard_normal((4, 2))
    a, b = sess.tensor(an), sess.tensor(bn)
    np.testing.assert_allclose((a @ b).numpy(), an @ bn, rtol=1e-12)
    np.testing.assert_allclose((-a).numpy(), -an)
    np.testing.assert_allclose((a + a * 2.0 - 1.0).numpy(), an * 3 - 1, rtol=1e-12)
    np.testing.assert_allclose((a / 4).numpy(), an / 4)
    np.testing.assert_allclose(abs(a).numpy(), np.abs(an))
    np.testing.assert_allclose((a ** 2).numpy(), an ** 2, rtol=1e-12)
    np.testing.assert_allclose(a.T.numpy(), an.T)
    np.testing.assert_allclose(a.relu().numpy(), np.maximum(an, 0))
    np.testing.assert_allclose(a.sum(dim=1).numpy(), an.sum(1), rtol=1e-12)
    assert a.reshape(2, 6).shape == (2, 6)
    assert a.to("f32").dtype == np.float32
    np.testing.assert_allclose(np.asarray(a), an)
    assert float(a.sum()) == pytest.approx(an.sum())


@pytest.mark.parametrize("key", [
    np.s_[1:3], np.s_[0], np.s_[-1], np.s_[:, 1], np.s_[:, -2:], np.s_[::2], np.s_[1, 2],
    np.s_[..., 0], np.s_[None, 1:], np.s_[:, None, ::3], np.s_[5:], np.s_[2:1],
])
def test_indexing(sess, key):
    x = np.arange(20, dtype=np.float64).reshape(4, 5)
    got = sess.tensor(x)[key]
    want = x[key]
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)


def test_index_arrays_and_iteration(sess):
    x = np.arange(12, dtype=np.int64).reshape(4, 3)
    t = sess.tensor(x)
    np.testing.assert_array_equal(t[np.array([3, 0, 3])].numpy(), x[[3, 0, 3]])
    np.testing.assert_array_equal(t[:, [2, 0]].numpy(), x[:, [2, 0]])
    assert [r.numpy().tolist() for r in t] == x.tolist()
    assert len(t) == 4
    with pytest.raises(IndexError):
        t[4]
    with pytest.raises(TypeError):
        t[0] = 1


def test_multi_output_ops_return_tuples(sess):
    x = sess.tensor(np.arange(10, dtype=np.float32).reshape(5, 2))
    parts = sess.op("split", x, split_size=2)
    assert isinstance(parts, tuple) and [p.shape for p in parts] == [(2, 2), (2, 2), (1, 2)]
    values, indices = sess.op("max", x, dim=1)
    np.testing.assert_array_equal(values.numpy(), np.arange(1, 10, 2))
    np.testing.assert_array_equal(indices.numpy(), np.ones(5))
    assert isinstance(sess.op("max", x), tensord.Tensor)
    with sess.batch():
        chunks = sess.op("chunk", x, chunks=2)
        v, i = sess.op("min", x, dim=0)
    assert [c.shape for c in chunks] == [(3, 2), (2, 2)]
    np.testing.assert_array_equal(i.numpy(), [0, 0])


def test_batch_is_lazy_then_resolves(sess):
    a = sess.tensor(np.ones((2, 3), np.float32))
    before = len(sess.info().tensors)
    with sess.batch():
        b = a * 3.0
        c = sess.op("sum", b, dim=1)
        d = c + np.array([1.0, 2.0], np.float32)
        assert b.is_lazy and d.is_lazy
        with pytest.raises(tensord.BatchPendingError):
            d.numpy()
        with pytest.raises(tensord.BatchPendingError):
            d.shape
        assert len(sess.info().tensors) == before  # nothing sent yet
    np.testing.assert_array_equal(d.numpy(), [10.0, 11.0])
    assert c.shape == (2,) and c.dtype == np.float32


def test_split_by_sections_in_a_batch_needs_no_output_count(sess):
    """A lazy input's size is unknown in a batch, but a list of sections gives the count."""
    with sess.batch():
        flat = sess.op("reshape", sess.tensor(np.arange(6.0)) * 2.0, shape=[6])
        parts = sess.op("split", flat, split_size=[1, 2, 3])
    assert len(parts) == 3
    np.testing.assert_array_equal(parts[2].numpy(), [6.0, 8.0, 10.0])


def test_failed_batch_leaves_nothing_behind(sess):
    a = sess.tensor(np.ones((2, 3), np.float32))
    state = session_state(sess)
    with pytest.raises(tensord.ShapeMismatch) as err:
        with sess.batch():
            b = a * 2.0
            c = b + 1.0
            sess.op("matmul", c, np.ones((4, 4), np.float32))  # call 2 fails
            sess.op("neg", b)
    assert err.value.metadata.get("call_index") == "2"
    assert err.value.code == grpc.StatusCode.INVALID_ARGUMENT
    assert session_state(sess) == state
    with pytest.raises(tensord.TensordClientError):
        c.numpy()


def test_exception_inside_batch_sends_nothing(sess):
    a = sess.tensor(np.ones(3, np.float32))
    state = session_state(sess)
    with pytest.raises(RuntimeError):
        with sess.batch():
            a + 1.0
            raise RuntimeError("user error")
    assert session_state(sess) == state


def test_typed_errors_carry_reason_code_metadata(sess):
    a = sess.tensor(np.ones((2, 3), np.float32))
    with pytest.raises(tensord.UnknownOp) as err:
        sess.op("no_such_op", a)
    e = err.value
    assert isinstance(e, tensord.TensordError)
    assert e.reason == "UNKNOWN_OP" and e.code == grpc.StatusCode.INVALID_ARGUMENT
    assert e.metadata.get("op") == "no_such_op" and "no_such_op" in e.message
    with pytest.raises(tensord.ShapeMismatch):
        a @ a
    with pytest.raises(tensord.BadAttribute) as err:
        sess.op("sum", a, no_such_attribute=1)
    assert err.value.metadata.get("attribute") == "no_such_attribute"
    with pytest.raises(tensord.WrongArity):
        sess.op("add", a)


def test_every_reason_has_a_class():
    from tensord._pb import errors_pb2
    for name, value in errors_pb2.ErrorReason.items():
        if value == 0:
            continue
        cls = tensord.REASON_CLASSES[name]
        assert issubclass(cls, tensord.TensordError) and cls.reason_name == name
        assert getattr(tensord, cls.__name__) is cls
    assert tensord.OperationNotMarkedForAutodiff.reason_name == "OPERATION_NOT_MARKED_FOR_AUTODIFF"
    assert tensord.AutodiffContextNotEnabled.reason_name == "AUTODIFF_CONTEXT_NOT_ENABLED"


def _raw_execute(sess, handle):
    req = service_pb2.ExecuteRequest(session_id=sess.id, calls=[
        ops_pb2.OpCall(op="neg", inputs=[ops_pb2.Operand(handle=handle)])])
    return sess.client._call("Execute", req)


def test_released_and_unknown_handles_are_not_found(sess):
    t = sess.tensor(np.ones(3, np.float32))
    handle = t.handle
    t.release()
    with pytest.raises(tensord.TensorNotFound) as err:
        _raw_execute(sess, handle)
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(tensord.TensordClientError):
        t.numpy()
    with pytest.raises(tensord.TensorNotFound):
        sess.release(987654321)


def test_sessions_are_isolated(client):
    with client.session() as s1, client.session() as s2:
        assert s1.id != s2.id and len(s1.id) == 32
        t = s1.tensor(np.arange(4, dtype=np.float32))
        with pytest.raises(tensord.TensorNotFound):
            _raw_execute(s2, t.handle)
        with pytest.raises(tensord.TensorNotFound):
            s2.client._call("Release", service_pb2.ReleaseRequest(session_id=s2.id,
                                                                  handles=[t.handle]))
        assert [x.handle for x in s2.info().tensors] == []
        np.testing.assert_array_equal(t.numpy(), np.arange(4))  # untouched


def test_closed_session_is_not_found(client):
    s = client.session()
    t = s.tensor(np.ones(2, np.float32))
    s.close()
    with pytest.raises(tensord.SessionNotFound) as err:
        t.numpy()
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    del t  # the finalizer of a tensor of a closed session must stay quiet
    gc.collect()


def test_garbage_collected_tensors_are_released(sess):
    before = {x.handle for x in sess.info().tensors}
    ts = [sess.tensor(np.ones(10, np.float32)) for _ in range(5)]
    assert {x.handle for x in sess.info().tensors} == before | {t.handle for t in ts}
    y = ts[0] + ts[1]
    del ts
    gc.collect()
    assert {x.handle for x in sess.info().tensors} == before | {y.handle}


def test_session_options_and_discovery(client):
    with client.session(device="cpu", ttl_s=30) as s:
        assert s.device == "cpu" and s.ttl_s == 30 and s.autodiff_enabled
        assert s.keep_alive() == 30
    devices = client.devices()
    assert any(d["name"] == "cpu" for d in devices)
    ops = client.ops()
    assert ops == sorted(ops, key=lambda o: o["name"])
    for o in ops:
        assert o["marking"] in ("differentiable", "zero_grad", "non_differentiable", "unmarked")
        assert set(o["dtypes"]) <= {"f32", "f64", "i32", "i64", "bool", "bf16", "f16", "u8", "i8",
                                      "i16"}
        assert o["min_inputs"] >= 0 and (o["max_inputs"] == -1 or
                                         o["max_inputs"] >= o["min_inputs"])
    with pytest.raises(tensord.DeviceNotFound):
        client.session(device="tpu:7")


def test_float32_matmul_precision_is_a_session_option(client):
    """As torch.set_float32_matmul_precision: reported back, refused when unknown, and the CPU
    computes f32 products in f32 whatever is allowed (the same bits as "highest")."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((48, 80)).astype(np.float32)
    w = rng.standard_normal((80, 24)).astype(np.float32)
    values = {}
    for precision in ("highest", "high", "medium"):
        with client.session(float32_matmul_precision=precision) as s:
            assert s.float32_matmul_precision == precision
            assert s.info().float32_matmul_precision == precision
            values[precision] = (s.tensor(x) @ s.tensor(w)).numpy()
    assert values["high"].tobytes() == values["highest"].tobytes()
    assert values["medium"].tobytes() == values["highest"].tobytes()
    with client.session() as s:
        assert s.float32_matmul_precision == "highest"
    with pytest.raises(tensord.TensordError) as err:
        client.session(float32_matmul_precision="tf32")
    assert err.value.reason == "INVALID_REQUEST"
    assert err.value.metadata["field"] == "float32_matmul_precision"


def test_every_op_lists_a_backend(client):
    """ListOps must say where each op runs (a client decides before sending a batch)."""
    missing = [o["name"] for o in client.ops() if "cpu" not in o["backends"]]
    assert not missing, f"ops listing no cpu backend: {missing}"


def test_context_manager_client(address):
    with tensord.connect(address) as c, c.session() as s:
        assert s.op("add", 1.0, s.tensor(np.float64(2.0))).item() == 3.0
