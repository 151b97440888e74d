'use strict';
// Session: uploads and downloads (streamed), single ops, batches, autodiff contexts and
// releases, all scoped to one server session.

const {DTYPES, WIRE_TO_DTYPE, dataDtype, toBuffer, fromBytes, checkFilled} = require('./dtypes');
const {fromServiceError, clientError} = require('./errors');
const {Tensor, handleIn} = require('./tensor');
const {Batch, opCall} = require('./batch');
const {ProgramBuilder} = require('./program');
const {AutodiffContext, contextIdOf} = require('./autodiff');

const PUT_CHUNK_BYTES = 1 << 20;

class Session {
  constructor(client, resp, affinityKey = '') {
    this.client = client;
    this.id = resp.session_id;
    // Sent with every call of the session (x-tensord-session) for a balancer to hash on.
    this.affinityKey = affinityKey || this.id;
    this.device = resp.device;
    this.ttlSeconds = Number(resp.ttl_seconds);
    this.memoryQuotaBytes = Number(resp.memory_quota_bytes);
    this.autodiffEnabled = resp.autodiff_enabled;
    this.float32MatmulPrecision = resp.float32_matmul_precision;
    this._contexts = [];
    this._tensors = new Map();  // handle -> WeakRef(Tensor), to key gradients by leaf
    this.closed = false;
  }

  _unary(method, req) {
    this._checkOpen();
    return this.client._unary(method, req, {affinityKey: this.affinityKey});
  }

  // The server has forgotten a closed session; say so without asking it.
  _checkOpen() {
    if (this.closed) {
      throw clientError('SESSION_NOT_FOUND', `tensord: session ${this.id} was closed`,
          {session_id: this.id});
    }
  }

  _track(t) {
    this._tensors.set(t.handle, new WeakRef(t));
    if (this._tensors.size > 4096) {
      for (const [h, ref] of this._tensors) if (!ref.deref()) this._tensors.delete(h);
    }
    return t;
  }

  _execute(calls, noGrad, contextId) {
    return this._unary('Execute', {session_id: this.id, calls, no_grad: !!noGrad,
      context_id: contextId || '0'});
  }

  // Uploads a typed array with a shape (default 1-d), streamed in chunks.
  // options: requiresGrad, ctx (default: the most recent open context), device, dtype (a name
  // or alias; implied by the array when absent: 'bool' for a Uint8Array, so u8 data needs
  // {dtype: 'u8'}).
  // A wrong argument type throws a TypeError at once; what the server would refuse rejects
  // with its TensordError, as the server's own refusal would.
  tensor(data, shape, options = {}) {
    const dtype = dataDtype(data, options.dtype);
    shape = shape || [data.length];
    try {
      checkFilled(data, shape, dtype);
      this._checkOpen();
    } catch (e) {
      return Promise.reject(e);
    }
    const header = {session_id: this.id, dtype: DTYPES[dtype].wire, shape,
      device: options.device || '', requires_grad: !!options.requiresGrad,
      context_id: options.requiresGrad ? contextIdOf(this, options.ctx) : '0'};
    const bytes = toBuffer(data);
    return new Promise((resolve, reject) => {
      const call = this.client.stub.PutTensor(this.client._metadata(this.affinityKey),
          this.client._callOptions(), (err, resp) => {
            if (err) reject(fromServiceError(err));
            else resolve(this._track(new Tensor(this, resp.tensor)));
          });
      call.write({header});
      for (let off = 0; off < bytes.length; off += PUT_CHUNK_BYTES) {
        call.write({chunk: bytes.subarray(off, off + PUT_CHUNK_BYTES)});
      }
      call.end();
    });
  }

  async _download(handle) {
    this._checkOpen();
    return new Promise((resolve, reject) => {
      const call = this.client.stub.GetTensor({session_id: this.id, handle},
          this.client._metadata(this.affinityKey), this.client._callOptions());
      let info = null;
      const parts = [];
      call.on('data', (msg) => {
        if (msg.info) info = msg.info;
        if (msg.chunk && msg.chunk.length) parts.push(msg.chunk);
      });
      call.on('error', (err) => reject(fromServiceError(err)));
      call.on('end', () => {
        if (!info) {
          return reject(clientError('INTERNAL', `tensord: GetTensor(${handle}) sent no TensorInfo`,
              {tensor_id: handle}));
        }
        const dtype = WIRE_TO_DTYPE[info.dtype];
        const shape = info.shape.map(Number);
        try {
          resolve({dtype, shape, data: fromBytes(Buffer.concat(parts), dtype, shape, handle)});
        } catch (e) {
          reject(e);
        }
      });
    });
  }

  // Runs one op. inputs: see operand(); attrs: {name: value} (integers are sent as ints, other
  // numbers as floats, arrays of integers as int lists). options: requiresGrad, ctx, noGrad.
  // Resolves to a Tensor, or an array of Tensors for multi-output ops.
  async op(name, inputs = [], attrs = {}, options = {}) {
    const call = opCall(name, inputs, attrs, options, null, this);
    const resp = await this._execute([call], options.noGrad,
        options.requiresGrad ? contextIdOf(this, options.ctx) : '0');
    const outs = resp.results[0].outputs.map((info) => this._track(new Tensor(this, info)));
    return outs.length === 1 && !options.tuple ? outs[0] : outs;
  }

  batch() {
    return new Batch(this);
  }

  // A program builder (lib/program.js); ctx: the context its forward records on (default:
  // the most recent open one, none without one); noGrad: an inference program.
  program(options = {}) {
    return new ProgramBuilder(this, options);
  }

  async autodiff({checkpointing = 'none'} = {}) {
    const cp = {none: 'CHECKPOINTING_NONE', balanced: 'CHECKPOINTING_BALANCED'}[checkpointing];
    if (!cp) {
      // What the server answers an unknown checkpointing value.
      throw clientError('INVALID_REQUEST',
          `tensord: checkpointing must be none or balanced, got ${checkpointing}`,
          {field: 'checkpointing', value: checkpointing});
    }
    const resp = await this._unary('OpenAutodiffContext', {session_id: this.id, checkpointing: cp});
    const ctx = new AutodiffContext(this, resp.context_id, checkpointing);
    this._contexts.push(ctx);
    return ctx;
  }

  // Frees tensors (or raw handles) now. Release is atomic, so every tensor is checked before
  // any is marked released: one refusal frees nothing.
  async release(tensors) {
    const handles = tensors.map((t) => (t instanceof Tensor ? handleIn(this, t) : String(t)));
    if (!handles.length) return 0;
    this._checkOpen();
    for (const t of tensors) if (t instanceof Tensor) t.released = true;
    const resp = await this._unary('Release', {session_id: this.id, handles});
    return resp.released;
  }

  info() {
    return this._unary('GetSessionInfo', {session_id: this.id});
  }

  keepAlive() {
    return this._unary('KeepAlive', {session_id: this.id});
  }

  // Joins a process group of sessions on worldSize servers as `rank` (docs/scaling.md);
  // resolves once every rank has joined, with the group's info (name, rank, world_size,
  // backend). `group` is the same on every rank and new for each launch; `rendezvous` is
  // "file:///shared/dir" or "redis://host:port". Then the collective ops (all_reduce,
  // all_gather, reduce_scatter, broadcast, reduce, barrier) run across the group.
  async joinGroup(group, rank, worldSize, rendezvous) {
    this._checkOpen();
    const resp = await this._unary('JoinGroup', {session_id: this.id, group, rank,
      world_size: worldSize, rendezvous});
    return resp.group;
  }

  // Leaves the session's process group (GROUP_NOT_JOINED when it has none).
  async leaveGroup() {
    this._checkOpen();
    await this._unary('LeaveGroup', {session_id: this.id});
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    // Closing the session closed its contexts on the server too.
    for (const ctx of this._contexts) ctx.closed = true;
    this._contexts = [];
    await this.client._unary('CloseSession', {session_id: this.id},
        {affinityKey: this.affinityKey});
  }
}

module.exports = {Session};
