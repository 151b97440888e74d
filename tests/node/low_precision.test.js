'use strict';
// bf16 and f16 through the Node client: Uint16Array bit patterns with an explicit dtype, the
// fromFloat32/toFloat32 conversions, ops computed in f32 and rounded back, and ListOps.
const assert = require('node:assert/strict');
const {describe, test} = require('node:test');
const {serverForFile, tensord} = require('./server_fixture');

const fixture = serverForFile();

describe('bf16 and f16', () => {
  test('conversions round to nearest even and decode exactly', () => {
    const b = tensord.fromFloat32([1, 0.1, -3, 1e5, NaN, 3.4e38], 'bf16');
    assert.deepEqual(Array.from(b.subarray(0, 4)), [0x3f80, 0x3dcd, 0xc040, 0x47c3]);
    assert.ok(Number.isNaN(tensord.toFloat32(b, 'bf16')[4]));
    assert.equal(tensord.toFloat32(b, 'bf16')[5], Infinity);
    assert.equal(tensord.toFloat32(b, 'bf16')[3], 99840);
    const h = tensord.fromFloat32([1, 65504, 65520, 2 ** -24, 2 ** -25, 1.5 * 2 ** -25, -0], 'f16');
    assert.deepEqual(Array.from(h), [0x3c00, 0x7bff, 0x7c00, 0x0001, 0x0000, 0x0001, 0x8000]);
    // Every f16 pattern that is not NaN survives a round trip.
    const all = new Uint16Array(65536).map((_, i) => i);
    const back = tensord.fromFloat32(tensord.toFloat32(all, 'f16'), 'f16');
    for (let i = 0; i < 65536; ++i) {
      if ((i & 0x7c00) === 0x7c00 && (i & 0x3ff)) continue;
      assert.equal(back[i], i, `pattern ${i}`);
    }
  });

  test('put, ops and get keep the 2-byte dtype', async () => {
    const sess = await fixture.client.session();
    try {
      for (const dtype of ['bf16', 'f16']) {
        const a = await sess.tensor(tensord.fromFloat32([1, 2, 3, 4, 5, 6], dtype), [2, 3],
            {dtype});
        assert.equal(a.dtype, dtype);
        const b = await sess.tensor(tensord.fromFloat32([1, 0, -1, 2, 0.5, 0.25], dtype), [3, 2],
            {dtype});
        const c = await sess.op('matmul', [a, b]);
        assert.equal(c.dtype, dtype);
        const got = await c.get();
        assert.ok(got.data instanceof Uint16Array);
        assert.deepEqual(await c.toArray(), [0.5, 4.75, 2, 11.5]);
        const wide = await sess.op('to_dtype', [c], {dtype: 'f32'});
        assert.deepEqual(Array.from((await wide.get()).data), [0.5, 4.75, 2, 11.5]);
      }
      assert.throws(() => sess.tensor(new Uint16Array(2), [2]), TypeError);
    } finally {
      await sess.close();
    }
  });

  test('ListOps names bf16 and f16 wherever it names f32', async () => {
    const ops = await fixture.client.ops();
    const matmul = ops.find((o) => o.name === 'matmul');
    assert.ok(matmul.dtypes.includes('bf16') && matmul.dtypes.includes('f16'));
    // The optimizer steps write their inputs in place, which a 2-byte call's f32 copies cannot.
    const f32Only = new Set(['sgd', 'adam', 'adamw']);
    for (const op of ops) {
      if (f32Only.has(op.name)) {
        assert.ok(op.dtypes.includes('f32') && !op.dtypes.includes('bf16'), op.name);
        continue;
      }
      assert.equal(op.dtypes.includes('bf16'), op.dtypes.includes('f32'), op.name);
    }
  });
});
