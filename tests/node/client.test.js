'use strict';
// The Node client against a real server process: op round trips, batches, backward, and the
// two seed failures decoded from grpc-status-details-bin.
const assert = require('node:assert/strict');
const {describe, test} = require('node:test');
const {serverForFile, tensord} = require('./server_fixture');

const fixture = serverForFile();

async function withSession(options, fn) {
  const sess = await fixture.client.session(options);
  try {
    return await fn(sess);
  } finally {
    await sess.close();
  }
}

function near(actual, expected, tol = 1e-6) {
  assert.equal(actual.length, expected.length);
  for (let i = 0; i < expected.length; i++) {
    assert.ok(Math.abs(actual[i] - expected[i]) <= tol * (1 + Math.abs(expected[i])),
        `element ${i}: ${actual[i]} != ${expected[i]}`);
  }
}

describe('tensors and ops', () => {
  test('put/get round trip of every dtype', () => withSession({}, async (sess) => {
    const cases = [
      [new Float32Array([1.5, -2, 3.25, 0]), [2, 2]],
      [new Float64Array([Math.PI, -1e300]), [2]],
      [new Int32Array([7, -8, 2147483647]), [3, 1]],
      [new BigInt64Array([9007199254740993n, -5n]), [2]],
      [new Uint8Array([1, 0, 1]), [3], 'bool'],
      [new Float32Array([42]), []],
      [new Float64Array(0), [0, 3]],
    ];
    for (const [data, shape, dtype] of cases) {
      const t = await sess.tensor(data, shape, dtype ? {dtype} : {});
      assert.deepEqual(t.shape, shape);
      const got = await t.get();
      assert.equal(got.dtype, dtype || t.dtype);
      assert.deepEqual(got.shape, shape);
      assert.deepEqual(Array.from(got.data), Array.from(data));
    }
  }));

  test('op round trip: matmul, scalars, literals', () => withSession({}, async (sess) => {
    const a = await sess.tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
    const b = await sess.tensor(new Float32Array([1, 0, 0, 1, 1, 1]), [3, 2]);
    const y = await sess.op('matmul', [a, b]);
    assert.deepEqual(y.shape, [2, 2]);
    assert.equal(y.dtype, 'f32');
    assert.deepEqual(Array.from((await y.get()).data), [4, 5, 10, 11]);
    const z = await sess.op('add', [y, 0.5]);
    assert.deepEqual(Array.from((await z.get()).data), [4.5, 5.5, 10.5, 11.5]);
    const lit = await sess.op('mul', [a, {data: new Float32Array([2, 0, 1]), shape: [3]}]);
    assert.deepEqual(Array.from((await lit.get()).data), [2, 0, 3, 8, 0, 6]);
    const i = await sess.tensor(new Int32Array([1, 2]), [2]);
    const half = await sess.op('mul', [i, 0.5]);  // a float scalar promotes ints to f32
    assert.equal(half.dtype, 'f32');
    const twice = await sess.op('mul', [i, 2n]);  // a BigInt is an integer scalar
    assert.equal(twice.dtype, 'i32');
    const s = await sess.op('sum', [a], {dim: [1], keepdim: true});
    assert.deepEqual(s.shape, [2, 1]);
    const parts = await sess.op('split', [a], {split_size: 1, dim: 0}, {tuple: true});
    assert.equal(parts.length, 2);
    assert.deepEqual(Array.from((await parts[1].get()).data), [4, 5, 6]);
  }));

  test('a batch runs atomically in one Execute', () => withSession({}, async (sess) => {
    const a = await sess.tensor(new Float64Array([1, 2, 3]), [3]);
    const batch = sess.batch();
    const b = batch.op('mul', [a, 2]);
    const c = batch.op('sum', [b]);
    const results = await batch.run();
    assert.equal(results.length, 2);
    assert.deepEqual(Array.from((await c.tensor.get()).data), [12]);

    const before = await sess.info();
    const bad = sess.batch();
    const d = bad.op('neg', [a]);
    bad.op('matmul', [d, {data: new Float64Array([1, 2]), shape: [2]}]);
    await assert.rejects(bad.run(), (err) => {
      assert.ok(err instanceof tensord.TensordError);
      assert.equal(err.reason, 'SHAPE_MISMATCH');
      assert.equal(err.codeName, 'INVALID_ARGUMENT');
      assert.equal(err.metadata.call_index, '1');
      return true;
    });
    const afterInfo = await sess.info();
    assert.deepEqual(afterInfo.tensors.map((t) => t.handle), before.tensors.map((t) => t.handle));
    assert.equal(afterInfo.memory_used_bytes, before.memory_used_bytes);
  }));

  test('a discarded call is read by the batch and gets no handle', () => withSession({},
      async (sess) => {
        const a = await sess.tensor(new Float64Array([1, 2, 3]), [3]);
        const before = await sess.info();
        const batch = sess.batch();
        const b = batch.op('mul', [a, 2], {}, {discard: true});
        const c = batch.op('sum', [b]);
        const results = await batch.run();
        assert.equal(results[0].length, 0);
        assert.equal(b.tensor, null);
        assert.deepEqual(Array.from((await c.tensor.get()).data), [12]);
        const after = await sess.info();
        assert.equal(after.tensors.length, before.tensors.length + 1);
      }));

  test('errors decode reason, code and metadata', () => withSession({}, async (sess) => {
    await assert.rejects(sess.op('no_such_op', []), (err) => {
      assert.equal(err.reason, 'UNKNOWN_OP');
      assert.equal(err.code, 3);
      assert.equal(err.metadata.op, 'no_such_op');
      return true;
    });
    const t = await sess.tensor(new Float32Array([1]), [1]);
    await t.release();
    await assert.rejects(t.get(), (err) => err.reason === 'TENSOR_NOT_FOUND' &&
        err.codeName === 'NOT_FOUND');
    assert.ok(tensord.ERROR_REASONS.includes('OPERATION_NOT_MARKED_FOR_AUTODIFF'));
  }));

  test('discovery', async () => {
    const devices = await fixture.client.devices();
    assert.ok(devices.some((d) => d.name === 'cpu'));
    const ops = await fixture.client.ops();
    const matmul = ops.find((o) => o.name === 'matmul');
    assert.equal(matmul.marking, 'differentiable');
    assert.ok(matmul.dtypes.includes('f32'));
  });
});

describe('autodiff', () => {
  test('backward matches the analytic gradient', () => withSession({}, async (sess) => {
    const ctx = await sess.autodiff();
    const x = await sess.tensor(new Float64Array([1, 2, 3, 4]), [2, 2]);
    const w = await sess.tensor(new Float64Array([0.5, -1]), [2, 1], {requiresGrad: true});
    assert.ok(w.requiresGrad && w.isLeaf);
    assert.equal(w.contextId, ctx.id);
    // loss = sum((x @ w)^2); dloss/dw = 2 x^T (x w)
    const y = await sess.op('matmul', [x, w]);
    const loss = await sess.op('sum', [await sess.op('square', [y])]);
    const grads = await ctx.backward(loss);
    const g = await grads.get(w).get();
    const xw = [1 * 0.5 + 2 * -1, 3 * 0.5 + 4 * -1];
    near(g.data, [2 * (1 * xw[0] + 3 * xw[1]), 2 * (2 * xw[0] + 4 * xw[1])], 1e-12);
    assert.equal(grads.byHandle.size, 1);
    // an SGD step in a no_grad call
    const step = await sess.op('sub', [w, await sess.op('mul', [grads.get(w), 0.01])],
        {}, {noGrad: true});
    await sess.op('assign', [w, step], {}, {noGrad: true});
    near((await w.get()).data, [0.5 - 0.01 * g.data[0], -1 - 0.01 * g.data[1]], 1e-12);
    await ctx.close();
  }));

  test('optimizer steps keep their state on the server', () => withSession({}, async (sess) => {
    const ctx = await sess.autodiff();
    const w0 = [0.5, -1.5, 2];
    const w = await sess.tensor(new Float64Array(w0), [3], {requiresGrad: true});
    const c = [3, -0.25, 1e-3];
    const scaled = await sess.op('mul', [w, {data: new Float64Array(c), shape: [3]}]);
    const loss = await sess.op('sum', [scaled]);
    const grads = await ctx.backward(loss);
    const expAvg = await sess.op('zeros_like', [w], {}, {noGrad: true});
    const expAvgSq = await sess.op('zeros_like', [w], {}, {noGrad: true});
    const step = await sess.op('zeros', [], {shape: [], dtype: 'f32'});
    await sess.op('adam', [w, grads.get(w), expAvg, expAvgSq, step], {lr: 0.1}, {noGrad: true});
    // First Adam step from zero moments: w -= lr * g / (|g| + eps).
    near((await w.get()).data, w0.map((v, i) => v - 0.1 * c[i] / (Math.abs(c[i]) + 1e-8)), 1e-12);
    near((await step.get()).data, [1]);
    // A gradient of the wrong shape is a typed error, and nothing changes.
    const before = (await w.get()).data;
    await assert.rejects(
        sess.op('adam', [w, {data: new Float64Array(2), shape: [2]}, expAvg, expAvgSq, step],
            {lr: 0.1}, {noGrad: true}),
        (err) => {
          assert.equal(err.reason, 'SHAPE_MISMATCH');
          assert.equal(err.metadata.op, 'adam');
          return true;
        });
    near((await w.get()).data, Array.from(before), 0);
    near((await step.get()).data, [1]);
    await ctx.close();
  }));

  test('seed failure: OPERATION_NOT_MARKED_FOR_AUTODIFF', () => withSession({}, async (sess) => {
    const ctx = await sess.autodiff();
    const w = await sess.tensor(new Float32Array([1, 2]), [2], {requiresGrad: true, ctx});
    const before = await sess.info();
    await assert.rejects(sess.op('assign', [w, {data: new Float32Array([0, 0]), shape: [2]}]),
        (err) => {
          assert.ok(err instanceof tensord.TensordError);
          assert.equal(err.reason, 'OPERATION_NOT_MARKED_FOR_AUTODIFF');
          assert.equal(err.codeName, 'FAILED_PRECONDITION');
          assert.equal(err.metadata.op, 'assign');
          assert.equal(err.metadata.call_index, '0');
          assert.equal(err.metadata.input_index, '0');
          assert.equal(err.metadata.tensor_id, w.handle);
          assert.equal(err.metadata.context_id, ctx.id);
          return true;
        });
    const afterInfo = await sess.info();
    assert.deepEqual(afterInfo.tensors, before.tensors);
    assert.deepEqual(Array.from((await w.get()).data), [1, 2]);
  }));

  test('seed failure: AUTODIFF_CONTEXT_NOT_ENABLED', () => withSession({}, async (sess) => {
    const ctx = await sess.autodiff({checkpointing: 'balanced'});
    const w = await sess.tensor(new Float32Array([1, 2]), [2], {requiresGrad: true});
    await ctx.close();
    await assert.rejects(sess.op('mul', [w, 2]), (err) => {
      assert.equal(err.reason, 'AUTODIFF_CONTEXT_NOT_ENABLED');
      assert.equal(err.codeName, 'FAILED_PRECONDITION');
      assert.equal(err.metadata.tensor_id, w.handle);
      assert.equal(err.metadata.context_id, ctx.id);
      assert.equal(err.metadata.context_state, 'closed');
      return true;
    });
    // The tensor stays readable.
    assert.deepEqual(Array.from((await w.get()).data), [1, 2]);
  }));

  test('a session\'s float32 matmul precision', async () => {
    await withSession({}, async (sess) => assert.equal(sess.float32MatmulPrecision, 'highest'));
    await withSession({float32MatmulPrecision: 'high'},
        async (sess) => assert.equal(sess.float32MatmulPrecision, 'high'));
    await assert.rejects(fixture.client.session({float32MatmulPrecision: 'tf32'}),
        (err) => err.reason === 'INVALID_REQUEST' &&
          err.metadata.field === 'float32_matmul_precision');
  });

  test('requires_grad in an inference-only session', () =>
    withSession({autodiff: false}, async (sess) => {
      assert.equal(sess.autodiffEnabled, false);
      await assert.rejects(sess.tensor(new Float32Array([1]), [1], {requiresGrad: true}),
          (err) => err.reason === 'AUTODIFF_CONTEXT_NOT_ENABLED' &&
            err.metadata.context_state === 'disabled');
    }));
});
