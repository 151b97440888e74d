'use strict';
// The .proto files of the repository, loaded at run time ($TENSORD_PROTO_DIR or ../../proto)
// so there is nothing generated to keep in sync: the gRPC services, and the protobufjs types
// that decode the binary grpc-status-details-bin trailer.

const fs = require('fs');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const PACKAGE_DIR = path.join(__dirname, '..');

function findProtoDir() {
  const candidates = [process.env.TENSORD_PROTO_DIR, path.join(PACKAGE_DIR, '..', '..', 'proto'),
    path.join(PACKAGE_DIR, 'proto')].filter(Boolean);
  for (const dir of candidates) {
    if (fs.existsSync(path.join(dir, 'tensord', 'v1', 'service.proto'))) return dir;
  }
  throw new Error('tensord: proto directory not found; set TENSORD_PROTO_DIR to the ' +
                  "repository's proto/");
}

const PROTO_DIR = findProtoDir();
const packageDefinition = protoLoader.loadSync(
    ['tensord/v1/service.proto', 'tensord/v1/errors.proto', 'grpc/health/v1/health.proto'], {
      includeDirs: [PROTO_DIR],
      keepCase: true,
      longs: String,  // uint64 handles and ids stay exact
      enums: String,
      defaults: true,
      oneofs: true,
    });
const loaded = grpc.loadPackageDefinition(packageDefinition);

// google.rpc.Status / ErrorInfo for grpc-status-details-bin, and the ErrorReason enum.
const root = new protobuf.Root();
root.resolvePath = (origin, target) => {
  const local = path.join(PROTO_DIR, target);
  return fs.existsSync(local) ? local : protobuf.util.path.resolve(origin, target);
};
root.loadSync(['google/rpc/status.proto', 'google/rpc/error_details.proto',
  'tensord/v1/errors.proto'], {keepCase: true});
const StatusType = root.lookupType('google.rpc.Status');
const ErrorInfoType = root.lookupType('google.rpc.ErrorInfo');
const BadRequestType = root.lookupType('google.rpc.BadRequest');
const ResourceInfoType = root.lookupType('google.rpc.ResourceInfo');
const ERROR_REASONS = Object.keys(root.lookupEnum('tensord.v1.ErrorReason').values)
    .filter((name) => name !== 'ERROR_REASON_UNSPECIFIED');

module.exports = {PROTO_DIR, TensordService: loaded.tensord.v1.Tensord,
  HealthService: loaded.grpc.health.v1.Health, StatusType, ErrorInfoType, BadRequestType,
  ResourceInfoType, ERROR_REASONS};
