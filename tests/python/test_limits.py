"""Server limits seen from the Python client: a tensord started with small limits refuses
over-limit requests with LimitExceeded naming the limit, its value and the maximum, and the
session is unchanged afterwards."""
import grpc
import numpy as np
import pytest

import tensord
from conftest import client_of_own_server
from tensord._pb import ops_pb2, service_pb2, tensor_pb2

LIMITS = ["--max-rank=3", "--max-dim=1000", "--max-tensor-bytes=65536",
          "--max-calls-per-batch=5", "--max-contexts-per-session=2"]


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    with client_of_own_server(tmp_path_factory, "limited", LIMITS) as client:
        yield client


@pytest.fixture
def lsess(limited):
    with limited.session() as s:
        yield s


def state(sess):
    info = sess.info()
    return ([(t.handle, tuple(t.shape)) for t in info.tensors], info.memory_used_bytes)


def expect_limit(call, limit, value, maximum):
    with pytest.raises(tensord.LimitExceeded) as err:
        call()
    e = err.value
    assert e.code == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert (e.metadata.get("limit"), e.metadata.get("value"), e.metadata.get("max")) == (
        limit, str(value), str(maximum)), e
    assert limit in e.message


def test_tensor_limits_on_put_and_ops(lsess):
    kept = lsess.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
    before = state(lsess)
    expect_limit(lambda: lsess.tensor(np.zeros((1, 1, 1, 1), np.float32)), "max_rank", 4, 3)
    expect_limit(lambda: lsess.tensor(np.zeros(1001, np.bool_)),
                 "max_dim", 1001, 1000)
    expect_limit(lambda: lsess.tensor(np.zeros((200, 100), np.float32)), "max_tensor_bytes", 80000,
                 65536)
    expect_limit(lambda: lsess.op("zeros", shape=[100, 200]).numpy(), "max_tensor_bytes", 80000,
                 65536)
    expect_limit(lambda: lsess.op("reshape", kept, shape=[1, 1, 2, 3]).numpy(), "max_rank", 4, 3)
    assert state(lsess) == before
    np.testing.assert_array_equal(kept.numpy(), np.arange(6).reshape(2, 3))


def test_calls_per_batch_and_contexts(lsess):
    req = service_pb2.ExecuteRequest(session_id=lsess.id, calls=[
        ops_pb2.OpCall(op="neg", inputs=[ops_pb2.Operand(literal=tensor_pb2.TensorData(
            dtype=tensor_pb2.DTYPE_F32, shape=[1], data=b"\0\0\0\0"))]) for _ in range(6)])
    before = state(lsess)
    expect_limit(lambda: lsess.client._call("Execute", req), "max_calls_per_batch", 6, 5)
    assert state(lsess) == before
    a = lsess.autodiff()
    b = lsess.autodiff()
    expect_limit(lambda: lsess.autodiff(), "max_contexts_per_session", 3, 2)
    a.close()
    lsess.autodiff()  # a closed context frees its place
    b.close()
