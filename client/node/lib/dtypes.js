'use strict';
// Dtype names, their wire enums and typed arrays, and the byte conversions between them.
//
// bf16 and f16 have no JavaScript typed array: their data is a Uint16Array of raw 16-bit
// patterns (little-endian words on the wire), always with an explicit {dtype: 'bf16'|'f16'};
// toFloat32/fromFloat32 convert (rounding to nearest even, as the server does).

const os = require('os');
const {clientError} = require('./errors');

// Typed arrays are in host byte order and go on the wire as they are.
if (os.endianness() !== 'LE') throw new Error('tensord: the Node client needs a little-endian host');

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

// `data` fills `shape` exactly, or BAD_TENSOR_DATA with the metadata the server gives a literal
// whose bytes do not match; `where` (call_index, input_index, op) says which operand.
function checkFilled(data, shape, dtype, where = {}) {
  if (numel(shape) === data.length) return;
  const expected = numel(shape) * data.BYTES_PER_ELEMENT;
  throw clientError('BAD_TENSOR_DATA',
      `tensord: ${data.length} elements (${data.byteLength} bytes) do not fill shape ` +
      `[${shape.join(', ')}] of ${dtype} (${expected} bytes)`,
      {...where, shape: `[${shape.join(', ')}]`, dtype, bytes: data.byteLength});
}

// `tensorId` names the tensor in the error when the server sent the wrong number of bytes.
function fromBytes(bytes, dtype, shape, tensorId = '0') {
  const T = DTYPES[dtype].Array;
  const n = numel(shape);
  if (bytes.length !== n * T.BYTES_PER_ELEMENT) {
    throw clientError('TRANSFER_INCOMPLETE',
        `tensord: received ${bytes.length} bytes for ${dtype}[${shape}]`,
        {tensor_id: tensorId, received_bytes: bytes.length,
          expected_bytes: n * T.BYTES_PER_ELEMENT});
  }
  const copy = new Uint8Array(bytes.length);  // aligned, owned copy
  copy.set(bytes);
  return new T(copy.buffer, 0, n);
}

function tensorData({data, shape, dtype}, where = {}) {
  dtype = dtype || dtypeOf(data);
  shape = shape || [data.length];
  checkFilled(data, shape, dtype, where);
  return {dtype: DTYPES[dtype].wire, shape, data: toBuffer(data)};
}

module.exports = {DTYPES, WIRE_TO_DTYPE, dtypeOf, fromFloat32, toFloat32, numel, toBuffer,
  fromBytes, tensorData, checkFilled};
