'use strict';
// TensordError, with the reason, metadata, field violations and resource of the
// google.rpc.Status that the server puts in the grpc-status-details-bin trailer; and the same
// error for a mistake the client refuses itself (clientError), marked metadata.origin =
// 'client'.

const grpc = require('@grpc/grpc-js');
const {StatusType, ErrorInfoType, BadRequestType, ResourceInfoType} = require('./proto');

const DETAILS_KEY = 'grpc-status-details-bin';
const ORIGIN_KEY = 'origin';
const CLIENT_ORIGIN = 'client';

// The gRPC code of each reason on the wire (docs/errors.md; the server's table is in
// server/core/status.cc). A client refusal takes its code from here, so it cannot drift from
// what the server answers; the tests check this table against docs/errors.md.
const S = grpc.status;
const REASON_CODES = Object.freeze({
  OPERATION_NOT_MARKED_FOR_AUTODIFF: S.FAILED_PRECONDITION,
  AUTODIFF_CONTEXT_NOT_ENABLED: S.FAILED_PRECONDITION,
  UNKNOWN_OP: S.INVALID_ARGUMENT,
  WRONG_ARITY: S.INVALID_ARGUMENT,
  BAD_ATTRIBUTE: S.INVALID_ARGUMENT,
  SHAPE_MISMATCH: S.INVALID_ARGUMENT,
  DTYPE_MISMATCH: S.INVALID_ARGUMENT,
  TENSOR_NOT_FOUND: S.NOT_FOUND,
  SESSION_NOT_FOUND: S.NOT_FOUND,
  CONTEXT_NOT_FOUND: S.NOT_FOUND,
  QUOTA_EXCEEDED: S.RESOURCE_EXHAUSTED,
  BACKWARD_ROOT_NOT_SCALAR: S.INVALID_ARGUMENT,
  BACKWARD_ROOT_NOT_TRACKED: S.FAILED_PRECONDITION,
  GRAPH_FREED: S.FAILED_PRECONDITION,
  SAVED_TENSOR_MODIFIED: S.FAILED_PRECONDITION,
  BAD_OPERAND: S.INVALID_ARGUMENT,
  BAD_TENSOR_DATA: S.INVALID_ARGUMENT,
  DEVICE_NOT_FOUND: S.NOT_FOUND,
  UNSUPPORTED_ON_BACKEND: S.UNIMPLEMENTED,
  INDEX_OUT_OF_RANGE: S.OUT_OF_RANGE,
  OUT_OF_MEMORY: S.RESOURCE_EXHAUSTED,
  TRANSFER_INCOMPLETE: S.INVALID_ARGUMENT,
  INVALID_REQUEST: S.INVALID_ARGUMENT,
  INTERNAL: S.INTERNAL,
  CANCELLED: S.CANCELLED,
  LIMIT_EXCEEDED: S.RESOURCE_EXHAUSTED,
  UNAUTHENTICATED: S.UNAUTHENTICATED,
  PERMISSION_DENIED: S.PERMISSION_DENIED,
  DEVICE_MISMATCH: S.INVALID_ARGUMENT,
  PROGRAM_NOT_FOUND: S.NOT_FOUND,
  SHARED_MEMORY_NOT_FOUND: S.NOT_FOUND,
  SHARED_MEMORY_UNAVAILABLE: S.FAILED_PRECONDITION,
  PEER_UNAVAILABLE: S.UNAVAILABLE,
  COLLECTIVE_MISMATCH: S.INVALID_ARGUMENT,
  GROUP_NOT_JOINED: S.FAILED_PRECONDITION,
});
// NOT_FOUND reasons name their resource (google.rpc.ResourceInfo) as the server does.
const RESOURCES = {SESSION_NOT_FOUND: ['session', 'session_id'],
  TENSOR_NOT_FOUND: ['tensor', 'tensor_id'], CONTEXT_NOT_FOUND: ['context', 'context_id'],
  DEVICE_NOT_FOUND: ['device', 'device'], PROGRAM_NOT_FOUND: ['program', 'program_id'],
  SHARED_MEMORY_NOT_FOUND: ['shared_memory', 'region']};

class TensordError extends Error {
  constructor(message, {code, reason = '', metadata = {}, fieldViolations = [], resource = null} =
  {}) {
    super(message);
    this.name = 'TensordError';
    this.code = code;  // numeric grpc status
    this.codeName = Object.keys(grpc.status).find((k) => grpc.status[k] === code) || 'UNKNOWN';
    this.reason = reason;  // ErrorReason name, '' when the status carried none
    this.metadata = metadata;
    this.fieldViolations = fieldViolations;
    this.resource = resource;
  }

  // The server's id of the failed call ('' for errors the client raised itself): an operator
  // finds the call's log line by it.
  get requestId() {
    return this.metadata.request_id || '';
  }
}

function decodeStatusDetails(buf) {
  const status = StatusType.decode(buf);
  const out = {message: status.message, code: status.code, reason: '', domain: '', metadata: {},
    fieldViolations: [], resource: null};
  for (const any of status.details || []) {
    const type = any.type_url.slice(any.type_url.lastIndexOf('/') + 1);
    if (type === 'google.rpc.ErrorInfo') {
      const info = ErrorInfoType.toObject(ErrorInfoType.decode(any.value), {defaults: true});
      out.reason = info.reason;
      out.domain = info.domain;
      out.metadata = {...info.metadata};
    } else if (type === 'google.rpc.BadRequest') {
      const bad = BadRequestType.decode(any.value);
      out.fieldViolations = bad.field_violations.map((v) => ({field: v.field,
        description: v.description}));
    } else if (type === 'google.rpc.ResourceInfo') {
      out.resource = ResourceInfoType.toObject(ResourceInfoType.decode(any.value),
          {defaults: true});
    }
  }
  return out;
}

// 'calls[2].inputs[1]', 'roots[0]': the google.rpc.BadRequest field the server would name.
function fieldPath(md) {
  const parts = 'call_index' in md ? [`calls[${md.call_index}]`] : [];
  for (const [key, name] of [['attribute', 'attrs'], ['input_index', 'inputs'],
    ['root_index', 'roots']]) {
    if (key in md) {
      parts.push(`${name}[${md[key]}]`);
      break;
    }
  }
  return parts.join('.');
}

// The error for a mistake the client refuses without asking the server: the reason, code,
// metadata keys, field violation and resource the server answers it with, plus origin.
function clientError(reason, message, metadata = {}) {
  const code = REASON_CODES[reason];
  if (code === undefined) throw new Error(`tensord: no wire code for reason ${reason}`);
  const md = {};
  for (const [k, v] of Object.entries(metadata)) md[k] = String(v);
  md[ORIGIN_KEY] = CLIENT_ORIGIN;
  const fieldViolations = code === S.INVALID_ARGUMENT ?
    [{field: fieldPath(md), description: message}] : [];
  let resource = null;
  if (RESOURCES[reason]) {
    const [type, key] = RESOURCES[reason];
    resource = {resource_type: type, resource_name: md[key] || '', owner: '',
      description: message};
  }
  return new TensordError(message, {code, reason, metadata: md, fieldViolations, resource});
}

function fromServiceError(err) {
  let details = null;
  const raw = err.metadata && err.metadata.get ? err.metadata.get(DETAILS_KEY) : [];
  if (raw && raw.length) {
    try {
      details = decodeStatusDetails(raw[0]);
    } catch (e) {
      details = null;
    }
  }
  const message = (details && details.message) || err.details || err.message;
  return new TensordError(message, {code: err.code, ...(details || {})});
}

module.exports = {TensordError, decodeStatusDetails, fromServiceError, clientError, REASON_CODES,
  ORIGIN_KEY, CLIENT_ORIGIN};
