// The bare baseline service: echoes unary payloads, swallows uploads, streams downloads.
#pragma once

#include "echo.grpc.pb.h"

namespace tensord::bench {

class EchoService final : public Echo::Service {
 public:
  grpc::Status Unary(grpc::ServerContext*, const Blob* in, Blob* out) override;
  grpc::Status Upload(grpc::ServerContext*, grpc::ServerReader<Blob>* reader, Count* out) override;
  grpc::Status Download(grpc::ServerContext*, const Count* in,
                        grpc::ServerWriter<Blob>* writer) override;
};

}  // namespace tensord::bench
