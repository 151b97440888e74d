"""What the Python client refuses itself is the typed error the server answers the same mistake
with: the reason class, the gRPC code and the metadata keys, plus metadata origin="client"
(docs/errors.md, "Errors the clients raise themselves")."""
import re
from pathlib import Path

import grpc
import numpy as np
import pytest

import tensord
from tensord._pb import errors_pb2, ops_pb2, service_pb2

DOCS = Path(__file__).resolve().parents[2] / "docs" / "errors.md"


def client_refusal(err, cls, keys):
    """err is the client's own `cls` error with exactly `keys` (and origin) as metadata."""
    e = err.value
    assert isinstance(e, cls) and isinstance(e, tensord.TensordClientError)
    assert isinstance(e, tensord.TensordError)
    assert e.reason == cls.reason_name
    assert e.code == tensord.REASON_CODES[e.reason]
    assert e.metadata.get("origin") == "client"
    assert set(e.metadata) - {"origin"} == set(keys), e.metadata
    return e


def same_as_server(client_err, server_err):
    """The server's answer to the same mistake: same reason, code and metadata keys, and the
    request_id every server error carries (the client's own had no call to name)."""
    s = server_err.value
    assert not isinstance(s, tensord.TensordClientError) and "origin" not in s.metadata
    assert (s.reason, s.code) == (client_err.reason, client_err.code)
    assert s.request_id and not client_err.request_id
    assert set(s.metadata) - {"request_id"} == set(client_err.metadata) - {"origin"}, (
        s.metadata, client_err.metadata)


def raw_execute(sess, operand, op="neg"):
    req = service_pb2.ExecuteRequest(session_id=sess.id, calls=[
        ops_pb2.OpCall(op=op, inputs=[operand])])
    return sess.client._call("Execute", req)


def handle(h):
    return ops_pb2.Operand(handle=h)


def test_reason_codes_are_those_of_the_wire():
    names = {n for n, v in errors_pb2.ErrorReason.items() if v}
    assert set(tensord.REASON_CODES) == names
    text = DOCS.read_text()
    documented = dict(re.findall(r"^\| ([A-Z_]+) \| ([A-Z_]+) \|", text, re.M))
    for name in ("OPERATION_NOT_MARKED_FOR_AUTODIFF", "AUTODIFF_CONTEXT_NOT_ENABLED"):
        section = text[text.index(f"### {name}"):]
        documented[name] = re.search(r"\*\*Code:\*\* ([A-Z_]+)", section).group(1)
    assert {n: c.name for n, c in tensord.REASON_CODES.items()} == \
        {n: documented[n] for n in names}


def test_released_tensor_is_tensor_not_found(sess):
    a = sess.tensor(np.ones(3, np.float32))
    t = sess.tensor(np.ones(3, np.float32))
    h = t.handle
    t.release()
    with pytest.raises(tensord.TensorNotFound) as err:
        t.numpy()
    e = client_refusal(err, tensord.TensorNotFound, {"tensor_id"})
    assert e.metadata["tensor_id"] == str(h)
    assert e.resource["resource_type"] == "tensor" and e.resource["resource_name"] == str(h)
    with pytest.raises(tensord.TensorNotFound) as server:
        sess.client._stream("GetTensor", service_pb2.GetTensorRequest(session_id=sess.id,
                                                                       handle=h)).__next__()
    same_as_server(e, server)

    with pytest.raises(tensord.TensorNotFound) as err:
        sess.op("neg", t)
    e = client_refusal(err, tensord.TensorNotFound,
                       {"tensor_id", "call_index", "input_index", "op"})
    assert e.field_violations == [] and e.code == grpc.StatusCode.NOT_FOUND
    with pytest.raises(tensord.TensorNotFound) as server:
        raw_execute(sess, handle(h))
    same_as_server(e, server)

    with pytest.raises(tensord.TensorNotFound) as err:
        with sess.batch():
            b = a + 1.0
            sess.op("add", b, t)
    e = client_refusal(err, tensord.TensorNotFound,
                       {"tensor_id", "call_index", "input_index", "op"})
    assert (e.metadata["call_index"], e.metadata["input_index"]) == ("1", "1")


def test_released_backward_root_and_seed(sess):
    with sess.autodiff() as ctx:
        w = sess.tensor(np.ones(3, np.float32), requires_grad=True)
        loss = w.sum()
        seed = sess.tensor(np.ones((), np.float32))
        h = loss.handle
        loss.release()
        with pytest.raises(tensord.TensorNotFound) as err:
            ctx.backward(loss)
        e = client_refusal(err, tensord.TensorNotFound, {"tensor_id", "root_index"})
        with pytest.raises(tensord.TensorNotFound) as server:
            sess.client._call("Backward", service_pb2.BackwardRequest(
                session_id=sess.id, context_id=ctx.id, roots=[h]))
        same_as_server(e, server)
        seed.release()
        with pytest.raises(tensord.TensorNotFound) as err:
            ctx.backward(w.sum(), seed=seed)
        client_refusal(err, tensord.TensorNotFound, {"tensor_id", "seed_index"})


def test_tensor_of_another_session_is_tensor_not_found(client):
    with client.session() as s1, client.session() as s2:
        mine = s2.tensor(np.zeros(3, np.float32))
        theirs = s1.tensor(np.arange(3, dtype=np.float32))
        # The same handle number names a different tensor in s2: refused, never used.
        assert mine.handle == theirs.handle
        with pytest.raises(tensord.TensorNotFound) as err:
            s2.op("neg", theirs)
        e = client_refusal(err, tensord.TensorNotFound,
                           {"tensor_id", "call_index", "input_index", "op"})
        assert e.metadata["tensor_id"] == str(theirs.handle)
        far = s1.tensor(np.ones(1, np.float32))  # a handle s2 does not have
        with pytest.raises(tensord.TensorNotFound) as server:
            raw_execute(s2, handle(far.handle))
        same_as_server(e, server)

        with pytest.raises(tensord.TensorNotFound) as err:
            s2.release(theirs)
        e = client_refusal(err, tensord.TensorNotFound, {"tensor_id"})
        with pytest.raises(tensord.TensorNotFound) as server:
            s2.release(far.handle)
        same_as_server(e, server)
        assert [t.handle for t in s2.info().tensors] == [mine.handle]  # nothing released

        with s2.autodiff() as ctx:
            with pytest.raises(tensord.TensorNotFound) as err:
                ctx.backward(theirs.sum())
            client_refusal(err, tensord.TensorNotFound, {"tensor_id", "root_index"})
        np.testing.assert_array_equal(theirs.numpy(), [0, 1, 2])


def test_an_execute_request_that_does_not_parse_is_invalid_request(client, sess):
    """Bytes that are no ExecuteRequest get INVALID_ARGUMENT with reason INVALID_REQUEST, like
    every other malformed request, and leave the server and the session unharmed."""
    execute = client._channel.unary_unary("/tensord.v1.Tensord/Execute")
    for body in (b"\xff\xff\xff", b"\x12\x05ab"):
        with pytest.raises(grpc.RpcError) as err:
            execute(body, timeout=10)
        assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        e = tensord.errors.from_rpc_error(err.value)
        assert e.reason == "INVALID_REQUEST" and "ExecuteRequest" in str(e)
    np.testing.assert_array_equal((sess.tensor(np.ones(2, np.float32)) + 1).numpy(), [2, 2])


def test_closed_session_is_session_not_found(client):
    s = client.session()
    t = s.tensor(np.ones(2, np.float32))
    sid = s.id
    s.close()
    for call in (t.numpy, lambda: s.op("neg", t), s.keep_alive, s.info,
                 lambda: s.tensor(np.ones(1, np.float32)), lambda: s.release(t),
                 s.autodiff):
        with pytest.raises(tensord.SessionNotFound) as err:
            call()
        e = client_refusal(err, tensord.SessionNotFound, {"session_id"})
        assert e.metadata["session_id"] == sid and e.resource["resource_name"] == sid
    with pytest.raises(tensord.SessionNotFound) as server:
        client._call("GetSessionInfo", service_pb2.GetSessionInfoRequest(session_id=sid))
    same_as_server(e, server)
    # A tensor of the closed session, used in another session, names nothing there.
    with client.session() as other:
        with pytest.raises(tensord.TensorNotFound):
            other.op("neg", t)


def test_pending_and_failed_batch_outputs_are_bad_operand(sess):
    a = sess.tensor(np.ones(3, np.float32))
    with sess.batch():
        b = a + 1.0
        with pytest.raises(tensord.BatchPendingError) as err:
            b.numpy()
        client_refusal(err, tensord.BadOperand, {"operand_call", "operand_output"})
        with pytest.raises(tensord.BatchPendingError) as err:
            sess.release(b)
        with pytest.raises(tensord.BatchPendingError) as err:
            b[..., 0]
        client_refusal(err, tensord.BadOperand, {"operand_call", "operand_output"})
    with pytest.raises(tensord.ShapeMismatch):
        with sess.batch():
            c = a + 1.0
            a @ np.ones((2, 2), np.float32)
    with pytest.raises(tensord.BadOperand) as err:
        sess.op("neg", c)
    e = client_refusal(err, tensord.BadOperand,
                       {"operand_call", "operand_output", "call_index", "input_index", "op"})
    assert e.field_violations == [("calls[0].inputs[0]", e.message)]
    assert not isinstance(e, tensord.BatchPendingError)
    # The server's answer to an operand naming an output that does not exist.
    req = service_pb2.ExecuteRequest(session_id=sess.id, calls=[
        ops_pb2.OpCall(op="neg", inputs=[handle(a.handle)]),
        ops_pb2.OpCall(op="neg", inputs=[ops_pb2.Operand(
            call_output=ops_pb2.CallOutput(call=0, output=3))])])
    with pytest.raises(tensord.BadOperand) as server:
        sess.client._call("Execute", req)
    same_as_server(e, server)


def test_batch_requests_that_cannot_be_sent_are_invalid_request(sess):
    a = sess.tensor(np.ones((4, 2), np.float32))
    with pytest.raises(tensord.InvalidRequest) as err:
        with sess.batch():
            a + 1.0
            with sess.no_grad():
                a + 2.0
    e = client_refusal(err, tensord.InvalidRequest, {"call_index", "op", "field"})
    assert e.metadata["call_index"] == "1" and e.field_violations == [("calls[1]", e.message)]
    with sess.autodiff() as c1, sess.autodiff() as c2:
        with pytest.raises(tensord.InvalidRequest) as err:
            with sess.batch():
                sess.op("randn", shape=[2], requires_grad=True, ctx=c1)
                sess.op("randn", shape=[2], requires_grad=True, ctx=c2)
        client_refusal(err, tensord.InvalidRequest, {"call_index", "op", "field", "context_id"})
        w = sess.tensor(np.ones(2, np.float32), requires_grad=True, ctx=c1)
        with pytest.raises(tensord.InvalidRequest) as err:
            with sess.batch():
                c1.backward(w.sum())
        client_refusal(err, tensord.InvalidRequest, {"context_id"})
    with pytest.raises(tensord.InvalidRequest) as err:
        with sess.batch():
            sess.op("split", a + 1.0, split_size=1)
    client_refusal(err, tensord.InvalidRequest, {"call_index", "op", "field"})


def test_unknown_checkpointing_is_invalid_request_and_value_error(sess):
    with pytest.raises(tensord.InvalidRequest) as err:
        sess.autodiff("fast")
    e = client_refusal(err, tensord.InvalidRequest, {"field", "value"})
    assert isinstance(e, ValueError)
    with pytest.raises(tensord.InvalidRequest) as server:
        sess.client._call("OpenAutodiffContext", service_pb2.OpenAutodiffContextRequest(
            session_id=sess.id, checkpointing=99))
    same_as_server(e, server)


def _stream_replaced(sess, messages):
    """Has sess's client answer GetTensor with `messages` (a server gone wrong)."""
    real = sess.client._stream

    def fake(method, request, timeout=None, **kwargs):
        if method == "GetTensor":
            return iter(messages)
        return real(method, request, timeout, **kwargs)
    sess.client._stream = fake
    return real


@pytest.mark.parametrize("chunks,expected", [([b"\0" * 12], 16), ([b"\0" * 16, b"\0" * 4], 16)])
def test_get_of_the_wrong_byte_count_is_transfer_incomplete(sess, chunks, expected):
    t = sess.tensor(np.arange(4, dtype=np.float32))
    messages = [service_pb2.GetTensorResponse(info=t._info, chunk=chunks[0])]
    messages += [service_pb2.GetTensorResponse(chunk=c) for c in chunks[1:]]
    real = _stream_replaced(sess, messages)
    try:
        with pytest.raises(tensord.TransferIncomplete) as err:
            t.numpy()
    finally:
        sess.client._stream = real
    e = client_refusal(err, tensord.TransferIncomplete,
                       {"tensor_id", "received_bytes", "expected_bytes"})
    assert e.metadata["expected_bytes"] == str(expected)
    assert e.metadata["received_bytes"] == str(sum(len(c) for c in chunks))


def test_get_assembles_chunks_of_any_size(sess):
    """Chunks split anywhere, even inside an element, before or with the info, make the
    tensor's values: one copy per chunk into the array returned."""
    values = np.arange(7, dtype=np.float64) * 1.5 - 2
    t = sess.tensor(values)
    raw = values.astype("<f8").tobytes()
    cuts = [0, 3, 3, 17, 40, len(raw)]
    parts = [raw[a:b] for a, b in zip(cuts, cuts[1:])]
    messages = [service_pb2.GetTensorResponse(chunk=parts[0]),
                service_pb2.GetTensorResponse(info=t._info, chunk=parts[1])]
    messages += [service_pb2.GetTensorResponse(chunk=c) for c in parts[2:]]
    real = _stream_replaced(sess, messages)
    try:
        got = t.numpy()
    finally:
        sess.client._stream = real
    np.testing.assert_array_equal(got, values)
    got[0] = 99.0  # the caller's own, writable array
    np.testing.assert_array_equal(t.numpy(), values)
