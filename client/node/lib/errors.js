'use strict';
// TensordError, with the reason, metadata, field violations and resource of the
// google.rpc.Status that the server puts in the grpc-status-details-bin trailer.

const grpc = require('@grpc/grpc-js');
const {StatusType, ErrorInfoType, BadRequestType, ResourceInfoType} = require('./proto');

const DETAILS_KEY = 'grpc-status-details-bin';

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

module.exports = {TensordError, decodeStatusDetails, fromServiceError};
