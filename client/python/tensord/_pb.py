"""The generated protobuf and gRPC modules (built on first import, see _build_protos)."""
import importlib
import importlib.util

from . import _build_protos

_build_protos.ensure()

from ._proto.tensord.v1 import errors_pb2  # noqa: E402
from ._proto.tensord.v1 import ops_pb2  # noqa: E402
from ._proto.tensord.v1 import service_pb2  # noqa: E402
from ._proto.tensord.v1 import service_pb2_grpc  # noqa: E402
from ._proto.tensord.v1 import tensor_pb2  # noqa: E402


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        return False


# Both google/rpc/status.proto and grpc/health/v1/health.proto may already be registered in
# protobuf's default descriptor pool by other packages (googleapis-common-protos,
# grpcio-health-checking); registering our copies too would fail, so theirs are preferred.
if _installed("google.rpc.status_pb2") and _installed("google.rpc.error_details_pb2"):
    status_pb2 = importlib.import_module("google.rpc.status_pb2")
    error_details_pb2 = importlib.import_module("google.rpc.error_details_pb2")
else:
    from ._proto.google.rpc import error_details_pb2, status_pb2  # noqa: F401


def health_modules():
    """(health_pb2, health_pb2_grpc), imported on first use."""
    if _installed("grpc_health.v1.health_pb2"):
        return (importlib.import_module("grpc_health.v1.health_pb2"),
                importlib.import_module("grpc_health.v1.health_pb2_grpc"))
    from ._proto.grpc.health.v1 import health_pb2, health_pb2_grpc
    return health_pb2, health_pb2_grpc


__all__ = ["errors_pb2", "ops_pb2", "service_pb2", "service_pb2_grpc", "tensor_pb2", "status_pb2",
           "error_details_pb2", "health_modules"]
