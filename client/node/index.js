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

const fs = require('fs');
const os = require('os');
const path = require('path');
const grpc = require('@grpc/grpc-js');
const protoLoader = require('@grpc/proto-loader');
const protobuf = require('protobufjs');

const DETAILS_KEY = 'grpc-status-details-bin';
const PUT_CHUNK_BYTES = 1 << 20;

function findProtoDir() {
  const candidates = [process.env.TENSORD_PROTO_DIR, path.join(__dirname, '..', '..', 'proto'),
    path.join(__dirname, 'proto')].filter(Boolean);
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

if (os.endianness() !== 'LE') throw new Error('tensord: the Node client needs a little-endian host');

// ---- dtypes -------------------------------------------------------------------------------------
// bf16 and f16 have no JavaScript typed array: their data is a Uint16Array of raw 16-bit
// patterns (little-endian words on the wire), always with an explicit {dtype: 'bf16'|'f16'};
// toFloat32/fromFloat32 convert (rounding to nearest even, as the server does).
const DTYPES = {
  f32: {wire: 'DTYPE_F32', Array: Float32Array},
  f64: {wire: 'DTYPE_F64', Array: Float64Array},
  i32: {wire: 'DTYPE_I32', Array: Int32Array},
  i64: {wire: 'DTYPE_I64', Array: BigInt64Array},
  bool: {wire: 'DTYPE_BOOL', Array: Uint8Array},
  bf16: {wire: 'DTYPE_BF16', Array: Uint16Array, bits: true},
  f16: {wire: 'DTYPE_F16', Array: Uint16Array, bits: true},
};
const WIRE_TO_DTYPE = Object.fromEntries(Object.entries(DTYPES).map(([k, v]) => [v.wire, k]));

function dtypeOf(data) {
  for (const [name, d] of Object.entries(DTYPES)) {
    if (!d.bits && data instanceof d.Array) return name;
  }
  throw new TypeError('tensord: data must be a Float32Array, Float64Array, Int32Array, ' +
                      'BigInt64Array or Uint8Array (bool), or a Uint16Array of bf16/f16 bits ' +
                      'with {dtype: \'bf16\'} or {dtype: \'f16\'}');
}

const f32Scratch = new Float32Array(1);
const u32Scratch = new Uint32Array(f32Scratch.buffer);

function floatBits(x) {
  f32Scratch[0] = x;
  return u32Scratch[0];
}

function bitsFloat(u) {
  u32Scratch[0] = u;
  return f32Scratch[0];
}

function bf16Bits(x) {
  const u = floatBits(x);
  if ((u & 0x7fffffff) > 0x7f800000) return (u >>> 16) | 0x40;  // NaN stays NaN
  return ((u + 0x7fff + ((u >>> 16) & 1)) >>> 16) & 0xffff;
}

function halfBits(x) {
  const u = floatBits(x);
  const sign = (u >>> 16) & 0x8000;
  const a = u & 0x7fffffff;
  if (a > 0x7f800000) return sign | 0x7e00 | ((a >>> 13) & 0x3ff);
  if (a >= 0x477ff000) return sign | 0x7c00;  // rounds to infinity
  if (a >= 0x38800000) {
    const r = a - (112 << 23);
    return sign | (((r + 0xfff + ((r >>> 13) & 1)) >>> 13) & 0x7fff);
  }
  const shift = 126 - (a >>> 23);
  if (shift > 24) return sign;
  const mant = (a & 0x7fffff) | 0x800000;
  let q = mant >>> shift;
  const rem = mant & ((1 << shift) - 1);
  const half = 1 << (shift - 1);
  if (rem > half || (rem === half && (q & 1))) q += 1;
  return sign | q;
}

function halfValue(h) {
  const sign = h & 0x8000 ? -1 : 1;
  const exp = (h >>> 10) & 0x1f;
  const mant = h & 0x3ff;
  if (exp === 0x1f) return mant ? NaN : sign * Infinity;
  if (exp === 0) return sign * mant * 2 ** -24;
  return sign * (1024 + mant) * 2 ** (exp - 25);
}

// Float values → Uint16Array of bf16 or f16 patterns.
function fromFloat32(values, dtype) {
  if (dtype !== 'bf16' && dtype !== 'f16') throw new TypeError(`tensord: ${dtype} is not bf16/f16`);
  const out = new Uint16Array(values.length);
  for (let i = 0; i < values.length; ++i) {
    out[i] = dtype === 'bf16' ? bf16Bits(values[i]) : halfBits(values[i]);
  }
  return out;
}

// Uint16Array of bf16 or f16 patterns → Float32Array (exact).
function toFloat32(bits, dtype) {
  if (dtype !== 'bf16' && dtype !== 'f16') throw new TypeError(`tensord: ${dtype} is not bf16/f16`);
  const out = new Float32Array(bits.length);
  for (let i = 0; i < bits.length; ++i) {
    out[i] = dtype === 'bf16' ? bitsFloat(bits[i] << 16) : halfValue(bits[i]);
  }
  return out;
}

function numel(shape) {
  return shape.reduce((a, b) => a * b, 1);
}

function toBuffer(data) {
  return Buffer.from(data.buffer, data.byteOffset, data.byteLength);
}

function fromBytes(bytes, dtype, shape) {
  const T = DTYPES[dtype].Array;
  const n = numel(shape);
  if (bytes.length !== n * T.BYTES_PER_ELEMENT) {
    throw new Error(`tensord: received ${bytes.length} bytes for ${dtype}[${shape}]`);
  }
  const copy = new Uint8Array(bytes.length);  // aligned, owned copy
  copy.set(bytes);
  return new T(copy.buffer, 0, n);
}

function tensorData({data, shape, dtype}) {
  dtype = dtype || dtypeOf(data);
  shape = shape || [data.length];
  if (numel(shape) !== data.length) {
    throw new Error(`tensord: ${data.length} elements do not fill shape [${shape}]`);
  }
  return {dtype: DTYPES[dtype].wire, shape, data: toBuffer(data)};
}

// ---- errors -------------------------------------------------------------------------------------
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

// ---- tensors ------------------------------------------------------------------------------------
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

function contextIdOf(session, ctx) {
  if (ctx) return String(ctx instanceof AutodiffContext ? ctx.id : ctx);
  const open = session._contexts;
  return open.length ? open[open.length - 1].id : '0';
}

class AutodiffContext {
  constructor(session, id, checkpointing) {
    this.session = session;
    this.id = String(id);
    this.checkpointing = checkpointing;
    this.closed = false;
  }

  // Backward from `roots` (a Tensor or an array); resolves to a Map leaf Tensor -> gradient.
  // Leaves are matched to Tensor objects this session created; `byHandle` has every gradient.
  async backward(roots, {seed = null, retainGraph = false} = {}) {
    const s = this.session;
    roots = Array.isArray(roots) ? roots : [roots];
    const seeds = [];
    const temps = [];
    if (seed !== null) {
      for (const sd of (Array.isArray(seed) ? seed : [seed])) {
        if (sd instanceof Tensor) {
          seeds.push(sd.handle);
        } else {
          const t = await s.tensor(sd.data, sd.shape, {dtype: sd.dtype});
          temps.push(t);
          seeds.push(t.handle);
        }
      }
    }
    try {
      const resp = await s._unary('Backward', {session_id: s.id, context_id: this.id,
        roots: roots.map((r) => r.handle), seeds, retain_graph: retainGraph});
      const grads = new Map();
      grads.byHandle = new Map();
      for (const g of resp.gradients) {
        const grad = new Tensor(s, g.grad);
        grads.byHandle.set(String(g.leaf), grad);
        const leaf = s._tensors.get(String(g.leaf));
        const obj = leaf && leaf.deref();
        if (obj) grads.set(obj, grad);
      }
      return grads;
    } finally {
      if (temps.length) await s.release(temps);
    }
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    this.session._contexts = this.session._contexts.filter((c) => c !== this);
    await this.session._unary('CloseAutodiffContext', {session_id: this.session.id,
      context_id: this.id});
  }
}

class Session {
  constructor(client, resp) {
    this.client = client;
    this.id = resp.session_id;
    this.device = resp.device;
    this.ttlSeconds = Number(resp.ttl_seconds);
    this.memoryQuotaBytes = Number(resp.memory_quota_bytes);
    this.autodiffEnabled = resp.autodiff_enabled;
    this._contexts = [];
    this._tensors = new Map();  // handle -> WeakRef(Tensor), to key gradients by leaf
    this.closed = false;
  }

  _unary(method, req) {
    return this.client._unary(method, req);
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
  // options: requiresGrad, ctx (default: the most recent open context), device, dtype ('bool'
  // for a Uint8Array is implied).
  tensor(data, shape, options = {}) {
    const dtype = options.dtype || dtypeOf(data);
    if (!(data instanceof DTYPES[dtype].Array)) {
      throw new TypeError(`tensord: dtype ${dtype} needs a ${DTYPES[dtype].Array.name}`);
    }
    shape = shape || [data.length];
    if (numel(shape) !== data.length) {
      throw new Error(`tensord: ${data.length} elements do not fill shape [${shape}]`);
    }
    const header = {session_id: this.id, dtype: DTYPES[dtype].wire, shape,
      device: options.device || '', requires_grad: !!options.requiresGrad,
      context_id: options.requiresGrad ? contextIdOf(this, options.ctx) : '0'};
    const bytes = toBuffer(data);
    return new Promise((resolve, reject) => {
      const call = this.client.stub.PutTensor(this.client._metadata(), this.client._callOptions(),
          (err, resp) => {
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

  _download(handle) {
    return new Promise((resolve, reject) => {
      const call = this.client.stub.GetTensor({session_id: this.id, handle},
          this.client._metadata(), this.client._callOptions());
      let info = null;
      const parts = [];
      call.on('data', (msg) => {
        if (msg.info) info = msg.info;
        if (msg.chunk && msg.chunk.length) parts.push(msg.chunk);
      });
      call.on('error', (err) => reject(fromServiceError(err)));
      call.on('end', () => {
        if (!info) return reject(new Error(`tensord: GetTensor(${handle}) sent no TensorInfo`));
        const dtype = WIRE_TO_DTYPE[info.dtype];
        const shape = info.shape.map(Number);
        try {
          resolve({dtype, shape, data: fromBytes(Buffer.concat(parts), dtype, shape)});
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
    const call = opCall(name, inputs, attrs, options, null);
    const resp = await this._execute([call], options.noGrad,
        options.requiresGrad ? contextIdOf(this, options.ctx) : '0');
    const outs = resp.results[0].outputs.map((info) => this._track(new Tensor(this, info)));
    return outs.length === 1 && !options.tuple ? outs[0] : outs;
  }

  batch() {
    return new Batch(this);
  }

  async autodiff({checkpointing = 'none'} = {}) {
    const cp = {none: 'CHECKPOINTING_NONE', balanced: 'CHECKPOINTING_BALANCED'}[checkpointing];
    if (!cp) throw new Error(`tensord: checkpointing must be none or balanced, got ${checkpointing}`);
    const resp = await this._unary('OpenAutodiffContext', {session_id: this.id, checkpointing: cp});
    const ctx = new AutodiffContext(this, resp.context_id, checkpointing);
    this._contexts.push(ctx);
    return ctx;
  }

  async release(tensors) {
    const handles = tensors.map((t) => (t instanceof Tensor ? t.handle : String(t)));
    for (const t of tensors) if (t instanceof Tensor) t.released = true;
    if (!handles.length) return 0;
    const resp = await this._unary('Release', {session_id: this.id, handles});
    return resp.released;
  }

  info() {
    return this._unary('GetSessionInfo', {session_id: this.id});
  }

  keepAlive() {
    return this._unary('KeepAlive', {session_id: this.id});
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    await this._unary('CloseSession', {session_id: this.id});
  }
}

// PEM contents from a Buffer, or from a file path.
function readPem(value, what) {
  if (value === undefined || value === null || Buffer.isBuffer(value)) return value || null;
  try {
    return fs.readFileSync(value);
  } catch (e) {
    throw new Error(`tensord: cannot read the ${what} file ${value}: ${e.message}`);
  }
}

// Channel credentials from the connect options: plaintext unless tls, tlsCa or a client
// certificate is given.
function channelCredentials(options) {
  if (options.credentials) return options.credentials;
  const ca = readPem(options.tlsCa, 'CA certificate');
  const cert = readPem(options.tlsCert, 'client certificate');
  const key = readPem(options.tlsKey, 'client key');
  if (!cert !== !key) {
    throw new Error('tensord: mutual TLS needs both a client certificate (tlsCert) and its key ' +
                    '(tlsKey)');
  }
  if (!options.tls && !ca && !cert) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(ca, key, cert);
}

class Client {
  // options: tlsCa (CA certificate, a path or a Buffer of PEM; implies TLS), tls (TLS with the
  // system roots), tlsCert/tlsKey (client certificate and key for mutual TLS), token (sent as
  // "authorization: Bearer <token>"; use TLS too), timeoutMs, channelOptions, credentials
  // (ready-made grpc.ChannelCredentials, overriding the TLS options). See docs/security.md.
  constructor(address, options = {}) {
    this.address = address || process.env.TENSORD_ADDRESS || '127.0.0.1:50051';
    const creds = channelCredentials(options);
    const channelOptions = {'grpc.max_receive_message_length': -1,
      'grpc.max_send_message_length': -1, ...(options.channelOptions || {})};
    this.stub = new loaded.tensord.v1.Tensord(this.address, creds, channelOptions);
    this.health = new loaded.grpc.health.v1.Health(this.address, creds, channelOptions);
    this.token = options.token || null;
    this.timeoutMs = options.timeoutMs || 0;
  }

  _metadata() {
    const md = new grpc.Metadata();
    if (this.token) md.set('authorization', `Bearer ${this.token}`);
    return md;
  }

  _callOptions() {
    return this.timeoutMs ? {deadline: Date.now() + this.timeoutMs} : {};
  }

  _unary(method, req, stub = this.stub) {
    return new Promise((resolve, reject) => {
      stub[method](req, this._metadata(), this._callOptions(), (err, resp) => {
        if (err) reject(fromServiceError(err));
        else resolve(resp);
      });
    });
  }

  async session({device = '', ttlSeconds = 0, memoryQuotaBytes = 0, autodiff = true} = {}) {
    const resp = await this._unary('CreateSession', {device, ttl_seconds: ttlSeconds,
      memory_quota_bytes: memoryQuotaBytes, disable_autodiff: !autodiff});
    return new Session(this, resp);
  }

  async devices() {
    return (await this._unary('ListDevices', {})).devices.map((d) => ({...d,
      memory_bytes: Number(d.memory_bytes)}));
  }

  async ops() {
    const resp = await this._unary('ListOps', {});
    const marking = {MARKING_DIFFERENTIABLE: 'differentiable', MARKING_ZERO_GRAD: 'zero_grad',
      MARKING_NON_DIFFERENTIABLE: 'non_differentiable'};
    return resp.ops.map((o) => ({...o, marking: marking[o.marking] || 'unmarked',
      dtypes: o.dtypes.map((d) => WIRE_TO_DTYPE[d])}));
  }

  async check(service = '') {
    const resp = await this._unary('Check', {service}, this.health);
    return resp.status;
  }

  // Resolves once the health check answers SERVING.
  async ready(timeoutMs = 30000) {
    const deadline = Date.now() + timeoutMs;
    let last = null;
    while (Date.now() < deadline) {
      try {
        if (await this.check() === 'SERVING') return;
      } catch (e) {
        last = e;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`tensord: ${this.address} not ready after ${timeoutMs} ms (${last})`);
  }

  close() {
    this.stub.close();
    this.health.close();
  }
}

function connect(address, options) {
  return new Client(address, options);
}

module.exports = {connect, Client, Session, Tensor, Batch, Pending, AutodiffContext, TensordError,
  ERROR_REASONS, DTYPES, decodeStatusDetails, PROTO_DIR, fromFloat32, toFloat32};
