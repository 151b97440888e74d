'use strict';
// Dtype names, their wire enums and typed arrays, and the byte conversions between them.
//
// bf16 and f16 have no JavaScript typed array: their data is a Uint16Array of raw 16-bit
// patterns (little-endian words on the wire), always with an explicit {dtype: 'bf16'|'f16'};
// toFloat32/fromFloat32 convert (rounding to nearest even, as the server does).
//
// u8, i8 and i16 are Uint8Array, Int8Array and Int16Array. Int8Array and Int16Array imply their
// dtype; a Uint8Array is bool unless {dtype: 'u8'} says otherwise (a Uint8ClampedArray, such as
// canvas ImageData, is u8). Downloads of u8 are Uint8Array.

const os = require('os');
const {clientError} = require('./errors');

// Typed arrays are in host byte order and go on the wire as they are.
if (os.endianness() !== 'LE') throw new Error('tensord: the Node client needs a little-endian host');

// In tensord.v1.DType order. `aliases` are the other spellings the server accepts for a dtype
// attribute (common/dtype_table.h); a `dtype` option takes them too.
const DTYPES = {
  f32: {wire: 'DTYPE_F32', Array: Float32Array, aliases: ['float32', 'float']},
  f64: {wire: 'DTYPE_F64', Array: Float64Array, aliases: ['float64', 'double']},
  i32: {wire: 'DTYPE_I32', Array: Int32Array, aliases: ['int32', 'int']},
  i64: {wire: 'DTYPE_I64', Array: BigInt64Array, aliases: ['int64', 'long']},
  bool: {wire: 'DTYPE_BOOL', Array: Uint8Array, aliases: ['b8']},
  bf16: {wire: 'DTYPE_BF16', Array: Uint16Array, bits: true, aliases: ['bfloat16']},
  f16: {wire: 'DTYPE_F16', Array: Uint16Array, bits: true, aliases: ['float16', 'half']},
  u8: {wire: 'DTYPE_U8', Array: Uint8Array, also: [Uint8ClampedArray], aliases: ['uint8']},
  i8: {wire: 'DTYPE_I8', Array: Int8Array, aliases: ['int8']},
  i16: {wire: 'DTYPE_I16', Array: Int16Array, aliases: ['int16', 'short']},
};
const WIRE_TO_DTYPE = Object.fromEntries(Object.entries(DTYPES).map(([k, v]) => [v.wire, k]));
const NAMES = new Map(Object.entries(DTYPES).flatMap(
    ([name, d]) => [[name, name], ...d.aliases.map((a) => [a, name])]));

// The dtype a typed array implies when no dtype is given; Uint16Array implies none (bf16 or
// f16 must be named), Uint8Array is bool.
const IMPLIED = [
  [Float32Array, 'f32'], [Float64Array, 'f64'], [Int32Array, 'i32'], [BigInt64Array, 'i64'],
  [Uint8Array, 'bool'], [Uint8ClampedArray, 'u8'], [Int8Array, 'i8'], [Int16Array, 'i16'],
];

function dtypeOf(data) {
  for (const [T, name] of IMPLIED) {
    if (data instanceof T) return name;
  }
  throw new TypeError('tensord: data must be a Float32Array, Float64Array, Int32Array, ' +
                      'BigInt64Array, Int8Array (i8), Int16Array (i16), Uint8Array (bool, or u8 ' +
                      'with {dtype: \'u8\'}), Uint8ClampedArray (u8), or a Uint16Array of ' +
                      'bf16/f16 bits with {dtype: \'bf16\'} or {dtype: \'f16\'}');
}

// The short name ('u8') of a dtype name or alias ('uint8'); a TypeError for anything else.
function dtypeName(dtype) {
  const name = typeof dtype === 'string' ? NAMES.get(dtype) : undefined;
  if (!name) {
    throw new TypeError(`tensord: unknown dtype ${dtype} (known: ` +
                        `${Object.keys(DTYPES).join(', ')}, and their numpy/torch names)`);
  }
  return name;
}

// The dtype (short name) of `data` given as `dtype` (a name or alias; none: implied by the
// array); a TypeError when the array cannot hold that dtype.
function dataDtype(data, dtype) {
  if (dtype === undefined || dtype === null || dtype === '') return dtypeOf(data);
  const name = dtypeName(dtype);
  const d = DTYPES[name];
  if (!(data instanceof d.Array) && !(d.also || []).some((T) => data instanceof T)) {
    throw new TypeError(`tensord: dtype ${name} needs a ${d.Array.name}`);
  }
  return name;
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
  dtype = dataDtype(data, dtype);
  shape = shape || [data.length];
  checkFilled(data, shape, dtype, where);
  return {dtype: DTYPES[dtype].wire, shape, data: toBuffer(data)};
}

module.exports = {DTYPES, WIRE_TO_DTYPE, dtypeOf, dtypeName, dataDtype, fromFloat32, toFloat32,
  numel, toBuffer, fromBytes, tensorData, checkFilled};
