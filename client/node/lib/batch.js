'use strict';
// Execute calls: operands and attribute values in their wire form, and Batch, which sends
// many calls as one atomic Execute.

const {tensorData} = require('./dtypes');
const {Tensor, Pending} = require('./tensor');
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

// Operands: Tensor, Pending (same batch), a number (float scalar), a BigInt (integer scalar),
// a boolean, {int: n} / {float: x}, or {data: TypedArray, shape} (an inline literal).
function operand(v, batch) {
  if (v instanceof Tensor) return {handle: v.handle};
  if (v instanceof Pending) {
    if (v.tensor) return {handle: v.tensor.handle};
    if (v.batch !== batch) throw new Error('tensord: a pending output of another batch');
    return {call_output: {call: v.call, output: v.output}};
  }
  if (typeof v === 'number') return {scalar: {f: v}};
  if (typeof v === 'bigint') return {scalar: {i: String(v)}};
  if (typeof v === 'boolean') return {scalar: {b: v}};
  if (v && typeof v === 'object' && 'int' in v) return {scalar: {i: String(v.int)}};
  if (v && typeof v === 'object' && 'float' in v) return {scalar: {f: Number(v.float)}};
  if (v && typeof v === 'object' && 'data' in v) return {literal: tensorData(v)};
  if (ArrayBuffer.isView(v)) return {literal: tensorData({data: v})};
  throw new TypeError(`tensord: unsupported operand ${v}`);
}

function opCall(name, inputs, attrs, options, batch) {
  const call = {op: name, inputs: inputs.map((v) => operand(v, batch)), attrs: {},
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
  op(name, inputs = [], attrs = {}, options = {}) {
    const index = this.calls.length;
    this.calls.push(opCall(name, inputs, attrs, options, this));
    const n = options.numOutputs || 1;
    const outs = Array.from({length: n}, (_, k) => new Pending(this, index, k));
    this.pending.push(outs);
    if (options.requiresGrad) this.contextId = contextIdOf(this.session, options.ctx);
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

module.exports = {Batch, opCall};
