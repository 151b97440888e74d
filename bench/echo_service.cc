#include "echo_service.h"

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace tensord::bench {

grpc::Status EchoService::Unary(grpc::ServerContext*, const Blob* in, Blob* out) {
  *out = *in;
  return grpc::Status::OK;
}

// Keeps the bytes, as a put does, so both sides pay for one copy into server memory.
grpc::Status EchoService::Upload(grpc::ServerContext*, grpc::ServerReader<Blob>* reader,
                                 Count* out) {
  // One copy per chunk and no more: a growing vector would copy everything again at each
  // doubling and fault in fresh pages for it, a cost the baseline must not have.
  std::vector<std::string> kept;
  uint64_t bytes = 0;
  Blob blob;
  while (reader->Read(&blob)) {
    kept.emplace_back(blob.data());
    bytes += blob.data().size();
  }
  out->set_bytes(bytes);
  return grpc::Status::OK;
}

grpc::Status EchoService::Download(grpc::ServerContext*, const Count* in,
                                   grpc::ServerWriter<Blob>* writer) {
  const uint64_t chunk = in->chunk_bytes() ? in->chunk_bytes() : (1u << 20);
  std::string data(std::min<uint64_t>(chunk, in->bytes()), 'x');
  Blob blob;
  for (uint64_t sent = 0; sent < in->bytes(); sent += chunk) {
    blob.mutable_data()->assign(data.data(), std::min<uint64_t>(chunk, in->bytes() - sent));
    if (!writer->Write(blob)) break;
  }
  return grpc::Status::OK;
}

}  // namespace tensord::bench
