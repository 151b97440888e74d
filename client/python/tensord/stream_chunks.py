"""GetTensor's chunks read where they arrived. Every message of a download after the first
carries one `chunk` field and nothing else; parsing it into a GetTensorResponse copies its
bytes into the message and again into a Python bytes object on `.chunk`, before the client
copies them into the result array. The client's stub reads such a message in place instead:
`.chunk` is a view of the bytes gRPC handed over, so a chunk is copied once, into the array.
Any other message (the first, with its TensorInfo; one with fields this client does not know)
is parsed by protobuf as before."""
from __future__ import annotations

from ._pb import service_pb2, service_pb2_grpc

# GetTensorResponse.chunk: field 2, length-delimited.
_CHUNK_TAG = 0x12


class ChunkOnly:
    """A GetTensorResponse that holds a chunk alone, as a memoryview."""

    __slots__ = ("chunk",)

    def __init__(self, chunk: memoryview):
        self.chunk = chunk

    @staticmethod
    def HasField(name: str) -> bool:  # noqa: N802 (protobuf's spelling)
        return False


def read_get_tensor_response(raw: bytes):
    """GetTensorResponse's deserializer: a ChunkOnly where `raw` is exactly one chunk field,
    else the parsed message."""
    if len(raw) > 1 and raw[0] == _CHUNK_TAG:
        size, shift, i = 0, 0, 1
        while i < len(raw) and shift < 64:
            byte = raw[i]
            i += 1
            size |= (byte & 0x7F) << shift
            shift += 7
            if not byte & 0x80:
                if i + size == len(raw):
                    return ChunkOnly(memoryview(raw)[i:])
                break
    return service_pb2.GetTensorResponse.FromString(raw)


class Stub(service_pb2_grpc.TensordStub):
    """The generated stub, with GetTensor's responses read by read_get_tensor_response."""

    def __init__(self, channel):
        super().__init__(channel)
        self.GetTensor = channel.unary_stream(
            "/tensord.v1.Tensord/GetTensor",
            request_serializer=service_pb2.GetTensorRequest.SerializeToString,
            response_deserializer=read_get_tensor_response)
