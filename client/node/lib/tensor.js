'use strict';
// Tensor, a handle to a tensor stored in a session, and Pending, a batch output that becomes
// one when the batch runs.

const {DTYPES, WIRE_TO_DTYPE, toFloat32} = require('./dtypes');

class Tensor {
  constructor(session, info) {
    this.session = session;
    this.handle = String(info.handle);
    this.dtype = WIRE_TO_DTYPE[info.dtype];
    this.shape = info.shape.map(Number);
    this.device = info.device;
    this.requiresGrad = info.requires_grad;
    this.contextId = String(info.context_id);
    this.isLeaf = info.is_leaf;
    this.nbytes = Number(info.nbytes);
    this.released = false;
  }

  // Downloads the value: {dtype, shape, data: TypedArray}.
  async get() {
    return this.session._download(this.handle);
  }

  // Plain JS values; bf16/f16 decoded to numbers.
  async toArray() {
    const {data} = await this.get();
    if (DTYPES[this.dtype].bits) return Array.from(toFloat32(data, this.dtype));
    return Array.from(data, (v) => (typeof v === 'bigint' ? v : this.dtype === 'bool' ? !!v : v));
  }

  async release() {
    if (this.released) return;
    this.released = true;
    await this.session.release([this]);
  }

  toString() {
    return `Tensor(handle=${this.handle}, ${this.dtype}[${this.shape}], ${this.device})`;
  }
}

// An output of a call inside a Batch; resolves to a Tensor when the batch runs.
class Pending {
  constructor(batch, call, output) {
    this.batch = batch;
    this.call = call;
    this.output = output;
    this.tensor = null;
  }
}

module.exports = {Tensor, Pending};
