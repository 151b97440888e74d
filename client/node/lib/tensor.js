'use strict';
// Tensor, a handle to a tensor stored in a session, and Pending, a batch output that becomes
// one when the batch runs.

const {DTYPES, WIRE_TO_DTYPE, toFloat32} = require('./dtypes');
const {clientError} = require('./errors');

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
    return this.session._download(handleIn(this.session, this));
  }

  // Plain JS values; bf16/f16 decoded to numbers.
  async toArray() {
    const {data} = await this.get();
    if (DTYPES[this.dtype].bits) return Array.from(toFloat32(data, this.dtype));
    return Array.from(data, (v) => (typeof v === 'bigint' ? v : this.dtype === 'bool' ? !!v : v));
  }

  async release() {
    if (this.released) return;
    await this.session.release([this]);  // marks it released before the call goes out
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

// The handle to send for `t` (a Tensor, or a Pending of a batch that ran) in `session`, or the
// error the server answers that mistake with. A released handle names nothing; a handle of
// another session names nothing in this one -- or, as handles count from 1 in every session,
// another tensor, which is why the client must refuse it. `where` (call_index, input_index,
// op, root_index, ...) says where it was used.
function handleIn(session, t, where = {}) {
  if (t instanceof Pending) {
    if (!t.tensor) {
      throw clientError('BAD_OPERAND', `tensord: output ${t.output} of call ${t.call} of a ` +
          'batch that has not run (or failed, or has no such output)',
      {operand_call: t.call, operand_output: t.output, ...where});
    }
    t = t.tensor;
  }
  if (t.session !== session) {
    throw clientError('TENSOR_NOT_FOUND', `tensord: tensor ${t.handle} belongs to session ` +
        `${t.session.id}, not to session ${session.id}`, {tensor_id: t.handle, ...where});
  }
  if (t.released) {
    throw clientError('TENSOR_NOT_FOUND', `tensord: tensor ${t.handle} was released`,
        {tensor_id: t.handle, ...where});
  }
  return t.handle;
}

module.exports = {Tensor, Pending, handleIn};
