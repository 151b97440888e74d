'use strict';
// Node client for tensord. Loads the .proto files of the repository at run time
// ($TENSORD_PROTO_DIR or ../../proto), so there is nothing generated to keep in sync.
//
//   const tensord = require('tensord');
//   const client = tensord.connect('127.0.0.1:50051');
//   const sess = await client.session();
//   const a = await sess.tensor(new Float32Array([1, 2, 3, 4]), [2, 2]);
//   const y = await sess.op('matmul', [a, a]);
//   console.log(await y.get());   // { dtype: 'f32', shape: [2, 2], data: Float32Array [...] }
//
// lib/ holds the parts, each requiring only those before it: proto, errors, dtypes, tensor,
// autodiff, batch, program, session, client.

const {PROTO_DIR, ERROR_REASONS} = require('./lib/proto');
const {DTYPES, fromFloat32, toFloat32} = require('./lib/dtypes');
const {TensordError, decodeStatusDetails, REASON_CODES} = require('./lib/errors');
const {Tensor, Pending} = require('./lib/tensor');
const {AutodiffContext} = require('./lib/autodiff');
const {Batch} = require('./lib/batch');
const {Program, ProgramBuilder} = require('./lib/program');
const {Session} = require('./lib/session');
const {Client, connect, SESSION_METADATA_KEY} = require('./lib/client');

module.exports = {connect, Client, Session, Tensor, Batch, Pending, Program, ProgramBuilder,
  AutodiffContext, TensordError, ERROR_REASONS, REASON_CODES, DTYPES, decodeStatusDetails, PROTO_DIR, fromFloat32, toFloat32,
  SESSION_METADATA_KEY};
