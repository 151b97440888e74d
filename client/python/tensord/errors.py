"""Typed exceptions: decoded from the google.rpc.Status in grpc-status-details-bin, or raised by
the client itself for a mistake it refuses before sending anything.

Every ErrorReason of tensord/v1/errors.proto has a subclass of TensordError named in
CamelCase (OPERATION_NOT_MARKED_FOR_AUTODIFF -> OperationNotMarkedForAutodiff), generated from
the enum so that new reasons appear without editing this file.

A refusal of the client is the same reason class, code and metadata keys the server answers
the same mistake with, plus metadata origin="client"; it is also a TensordClientError (and,
where older versions raised ValueError, a ValueError), so existing handlers keep working.
"""
from __future__ import annotations

import grpc

from ._pb import error_details_pb2, errors_pb2, status_pb2

DETAILS_KEY = "grpc-status-details-bin"
DOMAIN = "tensord"
# Metadata key and value that mark an error the client raised without asking the server.
ORIGIN_KEY = "origin"
CLIENT_ORIGIN = "client"

_C = grpc.StatusCode
# The gRPC code of each reason on the wire (docs/errors.md; the server's table is in
# server/core/status.cc). A client refusal takes its code from here, so it cannot drift from
# what the server answers; tests check this table against docs/errors.md.
REASON_CODES: dict[str, grpc.StatusCode] = {
    "OPERATION_NOT_MARKED_FOR_AUTODIFF": _C.FAILED_PRECONDITION,
    "AUTODIFF_CONTEXT_NOT_ENABLED": _C.FAILED_PRECONDITION,
    "UNKNOWN_OP": _C.INVALID_ARGUMENT,
    "WRONG_ARITY": _C.INVALID_ARGUMENT,
    "BAD_ATTRIBUTE": _C.INVALID_ARGUMENT,
    "SHAPE_MISMATCH": _C.INVALID_ARGUMENT,
    "DTYPE_MISMATCH": _C.INVALID_ARGUMENT,
    "TENSOR_NOT_FOUND": _C.NOT_FOUND,
    "SESSION_NOT_FOUND": _C.NOT_FOUND,
    "CONTEXT_NOT_FOUND": _C.NOT_FOUND,
    "QUOTA_EXCEEDED": _C.RESOURCE_EXHAUSTED,
    "BACKWARD_ROOT_NOT_SCALAR": _C.INVALID_ARGUMENT,
    "BACKWARD_ROOT_NOT_TRACKED": _C.FAILED_PRECONDITION,
    "GRAPH_FREED": _C.FAILED_PRECONDITION,
    "SAVED_TENSOR_MODIFIED": _C.FAILED_PRECONDITION,
    "BAD_OPERAND": _C.INVALID_ARGUMENT,
    "BAD_TENSOR_DATA": _C.INVALID_ARGUMENT,
    "DEVICE_NOT_FOUND": _C.NOT_FOUND,
    "UNSUPPORTED_ON_BACKEND": _C.UNIMPLEMENTED,
    "INDEX_OUT_OF_RANGE": _C.OUT_OF_RANGE,
    "OUT_OF_MEMORY": _C.RESOURCE_EXHAUSTED,
    "TRANSFER_INCOMPLETE": _C.INVALID_ARGUMENT,
    "INVALID_REQUEST": _C.INVALID_ARGUMENT,
    "INTERNAL": _C.INTERNAL,
    "CANCELLED": _C.CANCELLED,
    "LIMIT_EXCEEDED": _C.RESOURCE_EXHAUSTED,
    "UNAUTHENTICATED": _C.UNAUTHENTICATED,
    "PERMISSION_DENIED": _C.PERMISSION_DENIED,
    "DEVICE_MISMATCH": _C.INVALID_ARGUMENT,
    "PROGRAM_NOT_FOUND": _C.NOT_FOUND,
    "SHARED_MEMORY_NOT_FOUND": _C.NOT_FOUND,
    "SHARED_MEMORY_UNAVAILABLE": _C.FAILED_PRECONDITION,
    "PEER_UNAVAILABLE": _C.UNAVAILABLE,
    "COLLECTIVE_MISMATCH": _C.INVALID_ARGUMENT,
    "GROUP_NOT_JOINED": _C.FAILED_PRECONDITION,
}
# NOT_FOUND reasons name their resource (google.rpc.ResourceInfo) as the server does.
_RESOURCES = {"SESSION_NOT_FOUND": ("session", "session_id"),
              "TENSOR_NOT_FOUND": ("tensor", "tensor_id"),
              "CONTEXT_NOT_FOUND": ("context", "context_id"),
              "DEVICE_NOT_FOUND": ("device", "device"),
              "PROGRAM_NOT_FOUND": ("program", "program_id"),
              "SHARED_MEMORY_NOT_FOUND": ("shared_memory", "region")}


class TensordError(Exception):
    """A failed tensord call.

    Attributes: code (grpc.StatusCode), reason (the ErrorReason name, "" when the status carried
    no ErrorInfo, e.g. a transport failure), metadata (dict of str), message (str),
    field_violations (list of (field, description) from google.rpc.BadRequest), resource
    (dict from google.rpc.ResourceInfo, or None), status (the decoded google.rpc.Status or None).
    """

    reason_name = ""  # the ErrorReason a subclass stands for

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN,
                 reason: str = "", metadata: dict | None = None, field_violations=None,
                 resource: dict | None = None, status=None):
        super().__init__(message)
        self.message = message
        self.code = code
        self.reason = reason
        self.metadata = dict(metadata or {})
        self.field_violations = list(field_violations or [])
        self.resource = resource
        self.status = status

    @property
    def request_id(self) -> str:
        """The server's id of the failed call ("" for errors the client raised itself): give it
        to the server's operator, who finds the call's log line by it."""
        return self.metadata.get("request_id", "")

    def __str__(self) -> str:
        head = f"[{self.code.name if self.code else '?'}"
        head += f" {self.reason}]" if self.reason else "]"
        text = f"{head} {self.message}"
        if self.metadata:
            text += " {" + ", ".join(f"{k}={v}" for k, v in sorted(self.metadata.items())) + "}"
        return text


def _camel(reason: str) -> str:
    return "".join(part.capitalize() for part in reason.split("_"))


REASON_CLASSES: dict[str, type] = {}
for _name, _value in errors_pb2.ErrorReason.items():
    if _value == 0:
        continue
    _cls = type(_camel(_name), (TensordError,), {
        "reason_name": _name,
        "__doc__": f"tensord error reason {_name} (ErrorReason = {_value}).",
        "__module__": "tensord",
    })
    REASON_CLASSES[_name] = _cls
    globals()[_cls.__name__] = _cls
del _name, _value, _cls


class TensordClientError(RuntimeError):
    """Base of every error the client raises itself, before anything is sent (metadata
    origin="client"). Each such error is also the TensordError subclass of its reason, e.g. a
    released tensor raises a TensordClientError that is a TensorNotFound; catch the reason
    class to handle a mistake whether the client or the server caught it."""


class BatchPendingError(REASON_CLASSES["BAD_OPERAND"], TensordClientError):
    """The Tensor is an output of a `with sess.batch():` block that has not been sent yet:
    reason BAD_OPERAND, as the server answers an operand naming an output that does not exist
    (yet)."""


_CLIENT_CLASSES: dict[tuple, type] = {}


def _client_class(reason: str, compat: tuple) -> type:
    """The reason's class, also a TensordClientError (and each of `compat`)."""
    key = (reason, *compat)
    cls = _CLIENT_CLASSES.get(key)
    if cls is None:
        base = REASON_CLASSES[reason]
        cls = type(base.__name__, (base, TensordClientError, *compat), {
            "__doc__": f"{base.__doc__} Raised by the client itself.", "__module__": "tensord"})
        _CLIENT_CLASSES[key] = cls
    return cls


def _field_path(md: dict) -> str:
    """'calls[2].inputs[1]', 'roots[0]': where in the request the problem is (as the server's
    google.rpc.BadRequest field)."""
    parts = [f"calls[{md['call_index']}]"] if "call_index" in md else []
    for key, name in (("attribute", "attrs"), ("input_index", "inputs"), ("root_index", "roots")):
        if key in md:
            parts.append(f"{name}[{md[key]}]")
            break
    return ".".join(parts)


def client_error(reason: str, message: str, metadata: dict | None = None,
                 compat: tuple = (), cls: type | None = None) -> TensordError:
    """The error for a mistake the client refuses itself: the class, code, metadata keys,
    BadRequest field and ResourceInfo the server would answer, plus origin="client"."""
    md = {k: str(v) for k, v in (metadata or {}).items()}
    md[ORIGIN_KEY] = CLIENT_ORIGIN
    code = REASON_CODES[reason]
    violations = [(_field_path(md), message)] if code == _C.INVALID_ARGUMENT else []
    resource = None
    if reason in _RESOURCES:
        kind, key = _RESOURCES[reason]
        resource = {"resource_type": kind, "resource_name": md.get(key, ""), "owner": "",
                    "description": message}
    cls = cls or _client_class(reason, tuple(compat))
    return cls(message, code=code, reason=reason, metadata=md, field_violations=violations,
               resource=resource)


__all__ = ["TensordError", "TensordClientError", "BatchPendingError", "REASON_CLASSES",
           "REASON_CODES", "ORIGIN_KEY", "CLIENT_ORIGIN", "from_rpc_error",
           "decode_status", *(c.__name__ for c in REASON_CLASSES.values())]


def decode_status(raw: bytes) -> dict:
    """Decodes serialized google.rpc.Status bytes into its parts."""
    status = status_pb2.Status()
    status.ParseFromString(raw)
    out = {"status": status, "message": status.message, "reason": "", "metadata": {},
           "field_violations": [], "resource": None, "domain": ""}
    for any_msg in status.details:
        if any_msg.Is(error_details_pb2.ErrorInfo.DESCRIPTOR):
            info = error_details_pb2.ErrorInfo()
            any_msg.Unpack(info)
            out["reason"] = info.reason
            out["domain"] = info.domain
            out["metadata"] = dict(info.metadata)
        elif any_msg.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            any_msg.Unpack(bad)
            out["field_violations"] = [(v.field, v.description) for v in bad.field_violations]
        elif any_msg.Is(error_details_pb2.ResourceInfo.DESCRIPTOR):
            res = error_details_pb2.ResourceInfo()
            any_msg.Unpack(res)
            out["resource"] = {"resource_type": res.resource_type,
                               "resource_name": res.resource_name, "owner": res.owner,
                               "description": res.description}
    return out


def from_rpc_error(err: grpc.RpcError) -> TensordError:
    """The TensordError (subclass per reason) for a failed gRPC call."""
    code = err.code() if hasattr(err, "code") else grpc.StatusCode.UNKNOWN
    message = (err.details() if hasattr(err, "details") else None) or str(err)
    raw = None
    try:
        for key, value in err.trailing_metadata() or ():
            if key == DETAILS_KEY:
                raw = value
                break
    except Exception:  # a channel-level failure may carry no trailers at all
        raw = None
    if raw is None:
        return TensordError(message, code=code)
    try:
        parts = decode_status(raw)
    except Exception as exc:  # malformed details: keep the gRPC status
        return TensordError(f"{message} (undecodable status details: {exc})", code=code)
    cls = REASON_CLASSES.get(parts["reason"], TensordError)
    return cls(parts["message"] or message, code=code, reason=parts["reason"],
               metadata=parts["metadata"], field_violations=parts["field_violations"],
               resource=parts["resource"], status=parts["status"])
