'use strict';
// Programs from Node against a real server: a compiled training step gives what the same
// step run eagerly gives (bitwise in f64), and its failures are the server's typed errors.
const assert = require('node:assert/strict');
const {describe, test} = require('node:test');
const {serverForFile} = require('./server_fixture');

const fixture = serverForFile();

async function withSession(fn) {
  const sess = await fixture.client.session({});
  try {
    return await fn(sess);
  } finally {
    await sess.close();
  }
}

// A batch of linear-regression data: x (4x2), y = x @ [2, -3] + noise-free offset.
function batch(k) {
  const x = new Float64Array([1, 2, 3, 4, -1, 0.5, 2, -2].map((v) => v + 0.25 * k));
  const y = new Float64Array(4);
  for (let i = 0; i < 4; i++) y[i] = 2 * x[2 * i] - 3 * x[2 * i + 1] + 0.5;
  return {x: {data: x, shape: [4, 2]}, y: {data: y, shape: [4, 1]}};
}

// loss = sum((x @ w - y)^2), its gradient to w, and an SGD step on w, as one program.
async function sgdProgram(sess, ctx, w, lr) {
  const p = sess.program({ctx});
  const b0 = batch(0);
  const x = p.parameter(b0.x, 'x');
  const y = p.parameter(b0.y, 'y');
  const diff = p.op('sub', [p.op('matmul', [x, w]), y]);
  const loss = p.op('sum', [p.op('square', [diff])], {}, {fetch: true});
  p.backward([loss], [w], {fetchGradients: true});
  p.update('sgd', [w, p.gradient(w)], {lr});
  return {program: await p.compile(), lossCall: loss.call};
}

// The same step, eagerly: forward, backward, sgd in a no_grad call.
async function eagerStep(sess, ctx, w, b, lr) {
  const x = await sess.tensor(b.x.data, b.x.shape);
  const y = await sess.tensor(b.y.data, b.y.shape);
  const diff = await sess.op('sub', [await sess.op('matmul', [x, w]), y]);
  const loss = await sess.op('sum', [await sess.op('square', [diff])]);
  const grads = await ctx.backward(loss);
  const g = await grads.get(w).get();
  await sess.op('sgd', [w, grads.get(w)], {lr}, {noGrad: true});
  return {loss: (await loss.get()).data[0], grad: Array.from(g.data)};
}

describe('programs', () => {
  test('a compiled SGD step matches the eager step bitwise', () => withSession(async (sess) => {
    const ctx = await sess.autodiff();
    const w0 = new Float64Array([0.5, -1]);
    const wp = await sess.tensor(w0, [2, 1], {requiresGrad: true, ctx});
    const we = await sess.tensor(w0, [2, 1], {requiresGrad: true, ctx});
    const {program, lossCall} = await sgdProgram(sess, ctx, wp, 0.01);
    assert.deepEqual(program.compiled[lossCall], [{dtype: 'f64', shape: []}]);
    // Compiling ran the step once on the examples and undid it.
    assert.deepEqual(Array.from((await wp.get()).data), Array.from(w0));
    for (let k = 0; k < 3; k++) {
      const b = batch(k);
      const ran = await program.run([b.x, b.y]);
      const eager = await eagerStep(sess, ctx, we, b, 0.01);
      assert.equal(ran.values[lossCall][0].data[0], eager.loss, `step ${k} loss`);
      assert.deepEqual(Array.from(ran.gradients[0].data), eager.grad, `step ${k} gradient`);
      assert.deepEqual(Array.from((await wp.get()).data), Array.from((await we.get()).data),
          `step ${k} weights`);
    }
    const info = await sess.info();
    assert.equal(info.programs.length, 1);
    assert.equal(Number(info.programs[0].runs), 3);
    await program.release();
    assert.equal((await sess.info()).programs.length, 0);
    await assert.rejects(program.run([batch(0).x, batch(0).y]),
        (err) => err.reason === 'PROGRAM_NOT_FOUND');
    await ctx.close();
  }));

  test('kept outputs are new tensors of the session', () => withSession(async (sess) => {
    const p = sess.program({noGrad: true});
    const x = p.parameter({data: new Float32Array([1, 4, 9]), shape: [3]}, 'x');
    const root = p.op('sqrt', [x], {}, {keep: true});
    p.op('add', [root, 1], {}, {fetch: true});
    const program = await p.compile();
    const ran = await program.run([{data: new Float32Array([16, 25, 36]), shape: [3]}]);
    assert.equal(ran.outputs[0].length, 1);
    assert.deepEqual(Array.from((await ran.outputs[0][0].get()).data), [4, 5, 6]);
    assert.deepEqual(Array.from(ran.values[1][0].data), [5, 6, 7]);
    assert.equal(ran.outputs[1].length, 0, 'a fetched call without keep stores nothing');
  }));

  test('an unmarked op is refused at compile, a closed context at run',
      () => withSession(async (sess) => {
        const ctx = await sess.autodiff();
        const w = await sess.tensor(new Float32Array([1, 2]), [2], {requiresGrad: true, ctx});
        const bad = sess.program({ctx});
        bad.op('assign', [w, {data: new Float32Array([0, 0]), shape: [2]}]);
        await assert.rejects(bad.compile(), (err) => {
          assert.equal(err.reason, 'OPERATION_NOT_MARKED_FOR_AUTODIFF');
          assert.equal(err.metadata.op, 'assign');
          assert.equal(err.metadata.call_index, '0');
          return true;
        });
        assert.deepEqual(Array.from((await w.get()).data), [1, 2]);

        const {program} = await sgdProgram(sess, ctx,
            await sess.tensor(new Float64Array([1, 1]), [2, 1], {requiresGrad: true, ctx}), 0.1);
        await ctx.close();
        const b = batch(0);
        await assert.rejects(program.run([b.x, b.y]), (err) => {
          assert.equal(err.reason, 'AUTODIFF_CONTEXT_NOT_ENABLED');
          assert.equal(err.codeName, 'FAILED_PRECONDITION');
          assert.equal(err.metadata.context_id, ctx.id);
          assert.equal(err.metadata.program_id, program.id);
          return true;
        });
        // The session is unharmed.
        const t = await sess.op('add', [await sess.tensor(new Float32Array([1]), [1]), 1]);
        assert.deepEqual(Array.from((await t.get()).data), [2]);
      }));

  test('inputs of the wrong shape or number are typed errors', () => withSession(async (sess) => {
    const ctx = await sess.autodiff();
    const w = await sess.tensor(new Float64Array([0.5, -1]), [2, 1], {requiresGrad: true, ctx});
    const {program} = await sgdProgram(sess, ctx, w, 0.01);
    await assert.rejects(program.run([{data: new Float64Array(6), shape: [3, 2]},
      batch(0).y]), (err) => {
      assert.equal(err.reason, 'SHAPE_MISMATCH');
      assert.equal(err.metadata.parameter_index, '0');
      assert.equal(err.metadata.parameter, 'x');
      return true;
    });
    await assert.rejects(program.run([batch(0).x]), (err) => {
      assert.equal(err.reason, 'INVALID_REQUEST');
      assert.equal(err.metadata.field, 'inputs');
      return true;
    });
    assert.deepEqual(Array.from((await w.get()).data), [0.5, -1], 'failed runs change nothing');
    assert.throws(() => {
      const p = sess.program({ctx});
      p.update('sgd', [w, p.gradient(w)], {lr: 0.1});
      p.op('neg', [w]);
    }, (err) => err.reason === 'INVALID_REQUEST');
    await ctx.close();
  }));
});
