'use strict';
// Execute calls: operands and attribute values in their wire form, and Batch, which sends
// many calls as one atomic Execute.

const {tensorData} = require('./dtypes');
const {clientError} = require('./errors');
const {Tensor, Pending, handleIn} = require('./tensor');
const {contextIdOf} = require('./autodiff');

function attrValue(name, v) {
  if (typeof v === 'boolean') return {b: v};
  if (typeof v === 'bigint') return {i: String(v)};
  if (typeof v === 'number') return Number.isInteger(v) ? {i: v} : {f: v};
  if (typeof v === 'string') return {s: v};
  if (Array.isArray(v)) {
    if (v.every((x) => Number.isInteger(x) || typeof x === 'bigint')) {
      return {ints: {values: v.map(String)}};
    }
    return {floats: {values: v.map(Number)}};
  }
  if (v && typeof v === 'object' && 'f' in v) return {f: Number(v.f)};  // {f: 2} forces a float
  throw new TypeError(`tensord: attribute ${name} has an unsupported value ${v}`);
}

// Programs only (lib/program.js): parameter `index`, bound at every run, and the gradient
// the program's backward computed for a leaf (updates only).
class ProgramParameter {
  constructor(index) {
    this.index = index;
  }
}
class ProgramGradient {
  constructor(leafHandle) {
    this.leaf = leafHandle;
  }
}

// Operands: Tensor, Pending (same batch), a number (float scalar), a BigInt (integer scalar),
// a boolean, {int: n} / {float: x}, or {data: TypedArray, shape} (an inline literal); in
// programs also ProgramParameter and ProgramGradient.
// Operands the server would refuse are refused here with its error; `where` names the call.
function operand(v, batch, session, where) {
  if (v instanceof Tensor) return {handle: handleIn(session, v, where)};
  if (v instanceof ProgramParameter) return {parameter: v.index};
  if (v instanceof ProgramGradient) return {gradient: v.leaf};
  if (v instanceof Pending) {
    if (v.tensor || v.batch !== batch) return {handle: handleIn(session, v, where)};
    return {call_output: {call: v.call, output: v.output}};
  }
  if (typeof v === 'number') return {scalar: {f: v}};
  if (typeof v === 'bigint') return {scalar: {i: String(v)}};
  if (typeof v === 'boolean') return {scalar: {b: v}};
  if (v && typeof v === 'object' && 'int' in v) return {scalar: {i: String(v.int)}};
  if (v && typeof v === 'object' && 'float' in v) return {scalar: {f: Number(v.float)}};
  if (v && typeof v === 'object' && 'data' in v) return {literal: tensorData(v, where)};
  if (ArrayBuffer.isView(v)) return {literal: tensorData({data: v}, where)};
  throw new TypeError(`tensord: unsupported operand ${v}`);
}

// The wire OpCall of call `callIndex` of a batch (0 for a single op) in `session`.
function opCall(name, inputs, attrs, options, batch, session, callIndex = 0) {
  const call = {op: name, inputs: inputs.map((v, i) => operand(v, batch, session,
      {call_index: callIndex, input_index: i, op: name})), attrs: {},
  requires_grad: !!options.requiresGrad};
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v !== undefined && v !== null) call.attrs[k] = attrValue(k, v);
  }
  return call;
}

// Collects op calls and sends them as one atomic Execute.
class Batch {
  constructor(session) {
    this.session = session;
    this.calls = [];
    this.pending = [];
  }

  // Returns Pending outputs: one for single-output ops, `numOutputs` (an array) otherwise.
  // options.discard: the outputs get no handles (later calls of the batch still read them;
  // run() gives an empty array for the call, and its Pending outputs no tensor).
  op(name, inputs = [], attrs = {}, options = {}) {
    const index = this.calls.length;
    const call = opCall(name, inputs, attrs, options, this, this.session, index);
    if (options.discard) call.discard = true;
    if (options.requiresGrad) {
      // One Execute names one context for all its requires-grad calls.
      const ctx = contextIdOf(this.session, options.ctx);
      if (this.contextId && this.contextId !== ctx) {
        throw clientError('INVALID_REQUEST', 'tensord: one batch can create requires-grad ' +
            `tensors for one autodiff context only (context ${this.contextId}, then ${ctx})`,
        {call_index: index, op: name, field: 'context_id', context_id: ctx});
      }
      this.contextId = ctx;
    }
    this.calls.push(call);
    const n = options.numOutputs || 1;
    const outs = Array.from({length: n}, (_, k) => new Pending(this, index, k));
    this.pending.push(outs);
    return options.numOutputs ? outs : outs[0];
  }

  // Sends the batch; resolves to one array of Tensors per call.
  async run({noGrad = false} = {}) {
    const resp = await this.session._execute(this.calls, noGrad, this.contextId || '0');
    return resp.results.map((result, i) => {
      const tensors = result.outputs.map((info) => new Tensor(this.session, info));
      (this.pending[i] || []).forEach((p, k) => {
        p.tensor = tensors[k] || null;
      });
      return tensors;
    });
  }
}

module.exports = {Batch, opCall, operand, ProgramParameter, ProgramGradient};
