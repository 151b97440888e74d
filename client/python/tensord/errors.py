"""Typed exceptions decoded from the google.rpc.Status in grpc-status-details-bin.

Every ErrorReason of tensord/v1/errors.proto has a subclass of TensordError named in
CamelCase (OPERATION_NOT_MARKED_FOR_AUTODIFF -> OperationNotMarkedForAutodiff), generated from
the enum so that new reasons appear without editing this file.
"""
from __future__ import annotations

import grpc

from ._pb import error_details_pb2, errors_pb2, status_pb2

DETAILS_KEY = "grpc-status-details-bin"
DOMAIN = "tensord"


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

    def __str__(self) -> str:
        head = f"[{self.code.name if self.code else '?'}"
        head += f" {self.reason}]" if self.reason else "]"
        text = f"{head} {self.message}"
        if self.metadata:
            text += " {" + ", ".join(f"{k}={v}" for k, v in sorted(self.metadata.items())) + "}"
        return text


class TensordClientError(RuntimeError):
    """A misuse caught by the client before anything was sent (e.g. reading a lazy Tensor of a
    batch that has not been executed)."""


class BatchPendingError(TensordClientError):
    """The Tensor is an output of a `with sess.batch():` block that has not been sent yet."""


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

__all__ = ["TensordError", "TensordClientError", "BatchPendingError", "REASON_CLASSES",
           "from_rpc_error", "decode_status", *(c.__name__ for c in REASON_CLASSES.values())]


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
