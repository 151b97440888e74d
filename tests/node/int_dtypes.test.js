'use strict';
// u8, i8 and i16 through the Node client: Uint8Array (with {dtype: 'u8'}; bool without),
// Int8Array and Int16Array, ops computed in i32 and wrapped back, PyTorch's promotion, sums in
// i64, and ListOps.
const assert = require('node:assert/strict');
const {describe, test} = require('node:test');
const {serverForFile, tensord} = require('./server_fixture');

const fixture = serverForFile();

async function withSession(fn) {
  const sess = await fixture.client.session();
  try {
    await fn(sess);
  } finally {
    await sess.close();
  }
}

describe('u8, i8 and i16', () => {
  test('the dtype table names them', () => {
    assert.equal(tensord.DTYPES.u8.wire, 'DTYPE_U8');
    assert.equal(tensord.DTYPES.i8.Array, Int8Array);
    assert.equal(tensord.DTYPES.i16.Array, Int16Array);
    assert.deepEqual(tensord.DTYPES.i16.aliases, ['int16', 'short']);
  });

  test('put/get round trip keeps dtype, array type and values', () => withSession(async (sess) => {
    const cases = [
      // [data, shape, options, dtype, array type of the download]
      [new Uint8Array([0, 1, 128, 255]), [2, 2], {dtype: 'u8'}, 'u8', Uint8Array],
      [new Uint8Array([7, 200]), [2], {dtype: 'uint8'}, 'u8', Uint8Array],
      [new Uint8ClampedArray([3, 250]), [2], {}, 'u8', Uint8Array],
      [new Int8Array([-128, -1, 0, 127]), [4], {}, 'i8', Int8Array],
      [new Int8Array([5]), [], {dtype: 'int8'}, 'i8', Int8Array],
      [new Int16Array([-32768, -1, 256, 32767, 0, 1]), [3, 2], {}, 'i16', Int16Array],
      [new Int16Array(0), [0, 4], {dtype: 'short'}, 'i16', Int16Array],
      [new Uint8Array([1, 0]), [2], {}, 'bool', Uint8Array],  // a bare Uint8Array stays bool
    ];
    for (const [data, shape, options, dtype, T] of cases) {
      const t = await sess.tensor(data, shape, options);
      assert.equal(t.dtype, dtype);
      assert.deepEqual(t.shape, shape);
      assert.equal(t.nbytes, data.byteLength);
      const got = await t.get();
      assert.equal(got.dtype, dtype);
      assert.deepEqual(got.shape, shape);
      assert.ok(got.data instanceof T, `${dtype}: ${got.data.constructor.name}`);
      assert.deepEqual(Array.from(got.data), Array.from(data));
    }
    const i = await sess.tensor(new Int8Array([-3, 4]), [2]);
    assert.deepEqual(await i.toArray(), [-3, 4]);
    // What the array cannot hold is refused before anything is sent.
    assert.throws(() => sess.tensor(new Int8Array(2), [2], {dtype: 'u8'}), TypeError);
    assert.throws(() => sess.tensor(new Uint8Array(2), [2], {dtype: 'i16'}), TypeError);
    assert.throws(() => sess.tensor(new Uint8Array(2), [2], {dtype: 'u16'}), TypeError);
  }));

  test('ops compute in i32 and wrap into the narrow dtype', () => withSession(async (sess) => {
    const a = await sess.tensor(new Uint8Array([250, 255, 3]), [3], {dtype: 'u8'});
    const b = await sess.tensor(new Uint8Array([10, 1, 4]), [3], {dtype: 'u8'});
    const sum = await sess.op('add', [a, b]);
    assert.equal(sum.dtype, 'u8');
    const got = await sum.get();
    assert.ok(got.data instanceof Uint8Array);
    assert.deepEqual(Array.from(got.data), [4, 0, 7]);  // 250 + 10 = 260 = 4 (mod 256)
    // An integer scalar does not widen the tensor (PyTorch): still u8, still wrapping.
    const plus = await sess.op('add', [a, 10n]);
    assert.equal(plus.dtype, 'u8');
    assert.deepEqual(await plus.toArray(), [4, 9, 13]);
    // A u8 literal operand.
    const lit = await sess.op('add', [a, {data: new Uint8Array([6, 1, 0]), shape: [3],
      dtype: 'u8'}]);
    assert.equal(lit.dtype, 'u8');
    assert.deepEqual(await lit.toArray(), [0, 0, 3]);
    const i8 = await sess.tensor(new Int8Array([127, -128]), [2]);
    const i8Sum = await sess.op('add', [i8, await sess.tensor(new Int8Array([1, -1]), [2])]);
    assert.equal(i8Sum.dtype, 'i8');
    assert.deepEqual(await i8Sum.toArray(), [-128, 127]);
    const i16 = await sess.tensor(new Int16Array([32767, 300]), [2]);
    const i16Prod = await sess.op('mul', [i16, await sess.tensor(new Int16Array([2, 300]), [2])]);
    assert.equal(i16Prod.dtype, 'i16');
    assert.deepEqual(await i16Prod.toArray(), [-2, 24464]);  // 65534 and 90000 wrapped
  }));

  test('promotion follows PyTorch: u8 with i8 is i16', () => withSession(async (sess) => {
    const u = await sess.tensor(new Uint8Array([200, 5, 0]), [3], {dtype: 'u8'});
    const i = await sess.tensor(new Int8Array([100, -10, -128]), [3]);
    const sum = await sess.op('add', [u, i]);
    assert.equal(sum.dtype, 'i16');
    const got = await sum.get();
    assert.ok(got.data instanceof Int16Array);
    assert.deepEqual(Array.from(got.data), [300, -5, -128]);
    const wide = await sess.op('add', [u, await sess.tensor(new Int32Array([1, 2, 3]), [3])]);
    assert.equal(wide.dtype, 'i32');
    assert.deepEqual(await wide.toArray(), [201, 7, 3]);
    const float = await sess.op('mul', [u, 0.5]);  // a float scalar promotes to f32
    assert.equal(float.dtype, 'f32');
    assert.deepEqual(await float.toArray(), [100, 2.5, 0]);
  }));

  test('sum of u8 is i64', () => withSession(async (sess) => {
    const u = await sess.tensor(new Uint8Array([200, 200, 200, 255]), [2, 2], {dtype: 'u8'});
    const total = await sess.op('sum', [u]);
    assert.equal(total.dtype, 'i64');
    assert.deepEqual(total.shape, []);
    const got = await total.get();
    assert.ok(got.data instanceof BigInt64Array);
    assert.deepEqual(Array.from(got.data), [855n]);
    const rows = await sess.op('sum', [u], {dim: [1]});
    assert.equal(rows.dtype, 'i64');
    assert.deepEqual(await rows.toArray(), [400n, 455n]);
  }));

  test('to_dtype converts to and from them', () => withSession(async (sess) => {
    const x = await sess.tensor(new Int32Array([300, -1, 7]), [3]);
    const u = await sess.op('to_dtype', [x], {dtype: 'uint8'});
    assert.equal(u.dtype, 'u8');
    assert.deepEqual(await u.toArray(), [44, 255, 7]);  // wraps, as torch's int32 -> uint8
    const f = await sess.op('to_dtype', [u], {dtype: 'f32'});
    assert.equal(f.dtype, 'f32');
    assert.deepEqual(await f.toArray(), [44, 255, 7]);
    const s = await sess.op('to_dtype', [u], {dtype: 'i16'});
    assert.equal(s.dtype, 'i16');
    assert.deepEqual(await s.toArray(), [44, 255, 7]);
  }));

  test('ListOps names them for add and sum', async () => {
    const ops = await fixture.client.ops();
    for (const name of ['add', 'sum']) {
      const op = ops.find((o) => o.name === name);
      for (const dtype of ['u8', 'i8', 'i16']) {
        assert.ok(op.dtypes.includes(dtype), `${name}: ${op.dtypes}`);
      }
    }
  });
});
