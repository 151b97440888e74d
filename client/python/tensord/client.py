"""Connection to a tensord server."""
from __future__ import annotations

import os
import secrets
import threading
import time

import grpc

from . import dtypes, process_malloc, stream_chunks
from ._pb import health_modules, ops_pb2, service_pb2
from .errors import from_rpc_error
from .session import Session

DEFAULT_ADDRESS = "127.0.0.1:50051"
# Every call that concerns a session, CreateSession included, carries the session's affinity
# key under this metadata key, so that a balancer in front of several servers can hash on it
# and send all of a session's calls to the server that created it (docs/scaling.md).
SESSION_METADATA_KEY = "x-tensord-session"
# The server streams large tensors, but fetched values and literals travel inline.
_CHANNEL_OPTIONS = [("grpc.max_receive_message_length", -1),
                    ("grpc.max_send_message_length", -1)]
MARKINGS = {
    ops_pb2.MARKING_UNSPECIFIED: "unmarked",
    ops_pb2.MARKING_DIFFERENTIABLE: "differentiable",
    ops_pb2.MARKING_ZERO_GRAD: "zero_grad",
    ops_pb2.MARKING_NON_DIFFERENTIABLE: "non_differentiable",
    ops_pb2.MARKING_UNMARKED: "unmarked",
}


def attr_value_to_python(v):
    kind = v.WhichOneof("value")
    if kind is None:
        return None
    if kind == "ints":
        return list(v.ints.values)
    if kind == "floats":
        return list(v.floats.values)
    return getattr(v, kind)


def op_info_to_dict(info) -> dict:
    return {
        "name": info.name,
        "category": info.category,
        "marking": MARKINGS.get(info.marking, "unmarked"),
        "dtypes": [dtypes.name(dtypes.from_wire(d)) for d in info.dtypes],
        "backends": list(info.backends),
        "min_inputs": info.min_inputs,
        "max_inputs": info.max_inputs,
        "input_names": list(info.input_names),
        "attrs": [{"name": a.name, "type": a.type, "required": a.required,
                   "default": attr_value_to_python(a.default_value)
                   if a.HasField("default_value") else None,
                   "choices": list(a.choices), "aliases": list(a.aliases)}
                  for a in info.attrs],
        "origin": info.origin,
        "doc": info.doc,
    }


def _pem(value, what: str) -> bytes | None:
    """PEM bytes from bytes, or from a path (str or os.PathLike) to read."""
    if value is None or isinstance(value, bytes):
        return value
    try:
        with open(value, "rb") as f:
            return f.read()
    except OSError as exc:
        raise ValueError(f"tensord: cannot read the {what} file {value}: {exc}") from None


class Client:
    """A channel to one tensord server. Use `tensord.connect(...)`."""

    def __init__(self, address: str | None = None, *, tls: bool = False,
                 tls_ca=None, tls_cert=None, tls_key=None,
                 root_certificates: bytes | None = None, private_key: bytes | None = None,
                 certificate_chain: bytes | None = None, token: str | None = None,
                 timeout: float | None = None, options=None):
        self.address = address or os.environ.get("TENSORD_ADDRESS") or DEFAULT_ADDRESS
        process_malloc.configure()
        opts = list(_CHANNEL_OPTIONS) + list(options or [])
        root_certificates = root_certificates or _pem(tls_ca, "CA certificate")
        certificate_chain = certificate_chain or _pem(tls_cert, "client certificate")
        private_key = private_key or _pem(tls_key, "client key")
        if bool(certificate_chain) != bool(private_key):
            raise ValueError("tensord: mutual TLS needs both a client certificate (tls_cert) and "
                             "its key (tls_key)")
        if tls or root_certificates or private_key or certificate_chain:
            creds = grpc.ssl_channel_credentials(root_certificates, private_key,
                                                 certificate_chain)
            self._channel = grpc.secure_channel(self.address, creds, options=opts)
        else:
            self._channel = grpc.insecure_channel(self.address, options=opts)
        self._metadata = (("authorization", f"Bearer {token}"),) if token else None
        self.timeout = timeout
        self.stub = stream_chunks.Stub(self._channel)
        self._last = threading.local()  # each thread's last call's trailers (last_server_time)
        self._ops_cache = None
        self._attr_types = None
        self._closed = False

    # -- plumbing ------------------------------------------------------------------------------
    def _call_metadata(self, affinity_key: str | None = None):
        """The metadata of one call, built here only: the bearer token, and for a call that
        concerns a session its affinity key."""
        if not affinity_key:
            return self._metadata
        return (self._metadata or ()) + ((SESSION_METADATA_KEY, affinity_key),)

    def _call(self, method: str, request, timeout=None, affinity_key: str | None = None):
        """Calls a unary (or client-streaming) RPC, raising TensordError on failure."""
        rpc = getattr(self.stub, method)
        with_call = getattr(rpc, "with_call", None)  # absent on a stub a caller wrapped
        try:
            if with_call is None:
                self._last.trailers = None
                return rpc(request, timeout=timeout or self.timeout,
                           metadata=self._call_metadata(affinity_key))
            resp, call = with_call(request, timeout=timeout or self.timeout,
                                   metadata=self._call_metadata(affinity_key))
        except grpc.RpcError as err:
            self._last.trailers = getattr(err, "trailing_metadata", lambda: None)()
            raise from_rpc_error(err) from None
        # The metadata only: the call object would keep its response alive.
        self._last.trailers = call.trailing_metadata()
        return resp

    @property
    def last_server_time(self) -> float | None:
        """The server's own time, in seconds, for the last unary call this thread made through
        this client (an Execute, a RunProgram, ...; failed ones too): its `server-timing`
        trailing metadata. The rest of the call's round trip is the transport's and the
        client's. None before any call, or from a server that does not send it."""
        for key, value in getattr(self._last, "trailers", None) or ():
            if key == "server-timing" and ";dur=" in value:
                try:
                    return float(value.split(";dur=", 1)[1].split(";", 1)[0]) / 1e3
                except ValueError:
                    return None
        return None

    def _stream(self, method: str, request, timeout=None, affinity_key: str | None = None):
        """Iterates a server-streaming RPC, raising TensordError on failure."""
        try:
            for msg in getattr(self.stub, method)(request, timeout=timeout or self.timeout,
                                                  metadata=self._call_metadata(affinity_key)):
                yield msg
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None

    # -- API -----------------------------------------------------------------------------------
    def session(self, device: str | None = None, ttl_s: int | None = None,
                memory_quota_bytes: int | None = None, autodiff: bool = True,
                float32_matmul_precision: str | None = None):
        """Opens a session; use it as a context manager to close it.

        float32_matmul_precision, as torch.set_float32_matmul_precision: "highest" (the
        default: f32 products), "high" (TensorFloat-32 products on cuda devices) or "medium"
        (bfloat16 products too); cpu and opencl devices compute in f32 whatever is allowed."""
        # The session's affinity key is drawn here, before the server is asked, so that a
        # balancer hashing on it routes CreateSession to the server every later call of the
        # session reaches.
        affinity_key = secrets.token_hex(16)
        resp = self._call("CreateSession", service_pb2.CreateSessionRequest(
            device=device or "", ttl_seconds=int(ttl_s or 0),
            memory_quota_bytes=int(memory_quota_bytes or 0), disable_autodiff=not autodiff,
            float32_matmul_precision=float32_matmul_precision or ""),
            affinity_key=affinity_key)
        return Session(self, resp, affinity_key)

    def devices(self) -> list[dict]:
        resp = self._call("ListDevices", service_pb2.ListDevicesRequest())
        return [{"name": d.name, "kind": d.kind, "description": d.description,
                 "memory_bytes": d.memory_bytes, "vendor": d.vendor} for d in resp.devices]

    def list_ops_raw(self):
        """The ListOps response (OpInfo messages), cached."""
        if self._ops_cache is None:
            self._ops_cache = self._call("ListOps", service_pb2.ListOpsRequest()).ops
        return self._ops_cache

    def ops(self) -> list[dict]:
        """Every op the server serves: name, marking, dtypes, backends, attrs, arity, doc."""
        return [op_info_to_dict(o) for o in self.list_ops_raw()]

    def attr_types(self, op: str) -> dict:
        """{attribute name: type} of an op as ListOps declares it ({} for unknown ops)."""
        if self._attr_types is None:
            self._attr_types = {o.name: {a.name: a.type for a in o.attrs}
                                for o in self.list_ops_raw()}
        return self._attr_types.get(op, {})

    def op_names(self) -> frozenset:
        return frozenset(o.name for o in self.list_ops_raw())

    def health(self, service: str = "", timeout: float = 5.0) -> str:
        """The gRPC health status name ("SERVING", ...)."""
        health_pb2, health_pb2_grpc = health_modules()
        stub = health_pb2_grpc.HealthStub(self._channel)
        try:
            resp = stub.Check(health_pb2.HealthCheckRequest(service=service), timeout=timeout,
                              metadata=self._call_metadata())
        except grpc.RpcError as err:
            raise from_rpc_error(err) from None
        return health_pb2.HealthCheckResponse.ServingStatus.Name(resp.status)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Blocks until the server answers its health check with SERVING."""
        deadline = time.monotonic() + timeout
        last = None
        while time.monotonic() < deadline:
            try:
                if self.health(timeout=1.0) == "SERVING":
                    return
            except Exception as exc:  # not up yet
                last = exc
            time.sleep(0.05)
        raise TimeoutError(f"tensord: server at {self.address} not ready after {timeout}s "
                           f"({last})")

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        return f"tensord.Client({self.address!r})"


def connect(address: str | None = None, **kwargs) -> Client:
    """Connects to a tensord server (default $TENSORD_ADDRESS or 127.0.0.1:50051).

    Options:
      tls_ca: the CA certificate (PEM bytes or a file path) the server's certificate must chain
        to; implies TLS. tls=True alone uses TLS with the system's roots.
      tls_cert, tls_key: this client's certificate and key (PEM bytes or paths), for a server
        that requires client certificates (mutual TLS).
      token: sent as "authorization: Bearer <token>" on every call (servers started with
        --auth-tokens; use TLS too, or the token travels in the clear).
      timeout (seconds, per call), options (extra gRPC channel options).
      root_certificates, certificate_chain, private_key: the same PEMs as bytes (older names).
    See docs/security.md.
    """
    return Client(address, **kwargs)
