"""Same-host shared memory from Python: puts and gets through a region return exactly what the
streams return for every dtype; misuse is typed and stores nothing; a server without
--shared-memory refuses regions; nothing is left in /dev/shm."""
import os

import numpy as np
import pytest
import tensord
from conftest import ServerProcess, server_binary


@pytest.fixture(scope="module")
def shm_client(tmp_path_factory):
    proc = ServerProcess(server_binary(), tmp_path_factory.mktemp("shm") / "tensord.log",
                         ["--shared-memory", "--shared-memory-key-prefix=/tensord-"])
    proc.start()
    c = tensord.connect(proc.address)
    yield c
    c.close()
    alive = proc.proc is not None and proc.proc.poll() is None
    proc.stop()
    assert alive, f"the server died; log:\n{proc.log_tail()}"


@pytest.fixture
def ssess(shm_client):
    s = shm_client.session()
    yield s
    if not s.closed:
        s.close()


def leftovers():
    mine = f"tensord-{os.getpid()}-"
    return [n for n in os.listdir("/dev/shm") if n.startswith(mine)]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32", "int64", "bool", "float16"])
def test_put_and_get_equal_the_streams(ssess, dtype):
    rng = np.random.default_rng(7)
    value = (rng.standard_normal((37, 11)) * 100).astype(dtype)
    with ssess.shared_memory(1 << 16) as shm:
        t = shm.put(value, offset=3)
        assert t.shape == value.shape
        np.testing.assert_array_equal(t.numpy(), value)
        back = shm.get(t, offset=5001)
        assert back.dtype == value.dtype
        np.testing.assert_array_equal(back, value)
        view = shm.get(t, copy=False)
        np.testing.assert_array_equal(view, value)
        del view
    assert leftovers() == []


def test_bf16_travels_as_its_patterns(ssess):
    value = np.array([1.0, -2.5, 3.140625], np.float32)
    with ssess.shared_memory(4096) as shm:
        t = shm.put(value, dtype="bf16")
        assert t.dtype == "bf16"
        np.testing.assert_array_equal(shm.get(t), t.numpy())


def test_put_at_takes_bytes_written_in_place_and_feeds_ops(ssess):
    with ssess.shared_memory(1 << 20) as shm:
        x = shm.array(np.float32, (256, 256))
        x[...] = np.arange(256 * 256, dtype=np.float32).reshape(256, 256) / 1000
        t = shm.put_at(np.float32, (256, 256))
        del x
        y = (t * 2.0).sum(dim=1)
        np.testing.assert_allclose(shm.get(y, offset=1 << 18),
                                   (np.arange(256 * 256, dtype=np.float32).reshape(256, 256)
                                    / 1000 * 2).sum(axis=1), rtol=1e-5)


def test_requires_grad_leaf_from_shared_memory(ssess):
    with ssess.autodiff() as ctx, ssess.shared_memory(4096) as shm:
        w = shm.put(np.array([1.0, -2.0, 3.0]), requires_grad=True, ctx=ctx)
        grads = ctx.backward((w * w).sum())
        np.testing.assert_array_equal(grads[w].numpy(), [2.0, -4.0, 6.0])


def test_spans_outside_the_region_store_nothing(ssess):
    with ssess.shared_memory(64) as shm:
        before = len(ssess.info().tensors)
        with pytest.raises(tensord.InvalidRequest) as e:
            shm.put(np.zeros(17, np.float32))
        assert e.value.metadata["field"] == "shared_memory.offset"
        assert e.value.metadata["region_bytes"] == "64"
        small = shm.put(np.ones(4, np.float32))
        with pytest.raises(tensord.InvalidRequest):
            shm.get(small, offset=60)
        assert len(ssess.info().tensors) == before + 1


def test_regions_are_listed_and_unregistered(ssess):
    shm = ssess.shared_memory(4096, name="weights")
    info = ssess.info()
    assert [(r.name, r.byte_size) for r in info.shared_memory] == [("weights", 4096)]
    t = shm.put(np.ones(3))
    shm.close()
    assert list(ssess.info().shared_memory) == []
    with pytest.raises(tensord.SharedMemoryNotFound) as e:
        shm.get_at(t)  # the server no longer knows the region
    assert e.value.metadata["region"] == "weights"
    np.testing.assert_array_equal(t.numpy(), np.ones(3))


def test_regions_close_with_their_session(shm_client):
    s = shm_client.session()
    shm = s.shared_memory(4096)
    s.close()
    shm.close()  # no call: the server dropped the region with the session
    assert leftovers() == []


def test_the_default_server_refuses_regions(sess):
    with pytest.raises(tensord.SharedMemoryUnavailable) as e:
        sess.shared_memory(4096)
    assert e.value.metadata["cause"] == "disabled"
    assert e.value.code.name == "FAILED_PRECONDITION"
    assert leftovers() == []
