'use strict';
// What the Node client refuses itself is the TensordError the server answers the same mistake
// with: reason, code and metadata keys, plus metadata.origin = 'client' (docs/errors.md,
// "Errors the clients raise themselves").
const assert = require('node:assert/strict');
const fs = require('fs');
const path = require('path');
const {describe, test} = require('node:test');
const {serverForFile, tensord, REPO} = require('./server_fixture');

const fixture = serverForFile();

async function withSession(fn) {
  const sess = await fixture.client.session();
  try {
    return await fn(sess);
  } finally {
    await sess.close();
  }
}

// Rejects (or throws) with the client's own `reason` error carrying exactly `keys` + origin.
async function refused(fn, reason, keys) {
  let caught = null;
  try {
    await fn();
  } catch (e) {
    caught = e;
  }
  assert.ok(caught instanceof tensord.TensordError, `expected ${reason}, got ${caught}`);
  assert.equal(caught.reason, reason, caught.message);
  assert.equal(caught.code, tensord.REASON_CODES[reason]);
  assert.equal(caught.metadata.origin, 'client');
  assert.deepEqual(Object.keys(caught.metadata).filter((k) => k !== 'origin').sort(),
      [...keys].sort());
  return caught;
}

// The server's answer to the same mistake: same reason, code and metadata keys, and the
// request_id every server error carries (the client's own had no call to name).
async function sameAsServer(clientErr, promise) {
  await assert.rejects(promise, (err) => {
    assert.ok(err instanceof tensord.TensordError);
    assert.equal(err.metadata.origin, undefined);
    assert.equal(err.reason, clientErr.reason);
    assert.equal(err.code, clientErr.code);
    assert.match(err.requestId, /^[0-9a-f]{32}$/);
    assert.equal(clientErr.requestId, '');
    assert.deepEqual(Object.keys(err.metadata).filter((k) => k !== 'request_id').sort(),
        Object.keys(clientErr.metadata).filter((k) => k !== 'origin').sort());
    return true;
  });
}

function rawNeg(sess, operand) {
  return fixture.client._unary('Execute', {session_id: sess.id, calls: [{op: 'neg', inputs: [operand]}]});
}

const OPERAND_KEYS = ['tensor_id', 'call_index', 'input_index', 'op'];

describe('errors the client raises itself', () => {
  test('reason codes are those of docs/errors.md', () => {
    const text = fs.readFileSync(path.join(REPO, 'docs', 'errors.md'), 'utf8');
    const documented = {};
    for (const m of text.matchAll(/^\| ([A-Z_]+) \| ([A-Z_]+) \|/gm)) documented[m[1]] = m[2];
    for (const name of ['OPERATION_NOT_MARKED_FOR_AUTODIFF', 'AUTODIFF_CONTEXT_NOT_ENABLED']) {
      const section = text.slice(text.indexOf(`### ${name}`));
      documented[name] = section.match(/\*\*Code:\*\* ([A-Z_]+)/)[1];
    }
    assert.deepEqual(Object.keys(tensord.REASON_CODES).sort(), [...tensord.ERROR_REASONS].sort());
    for (const name of tensord.ERROR_REASONS) {
      const err = new tensord.TensordError('', {code: tensord.REASON_CODES[name]});
      assert.equal(err.codeName, documented[name], name);
    }
  });

  test('a released tensor is TENSOR_NOT_FOUND', () => withSession(async (sess) => {
    const t = await sess.tensor(new Float32Array([1, 2]), [2]);
    const h = t.handle;
    await t.release();
    let e = await refused(() => t.get(), 'TENSOR_NOT_FOUND', ['tensor_id']);
    assert.equal(e.metadata.tensor_id, h);
    assert.equal(e.codeName, 'NOT_FOUND');
    assert.deepEqual([e.resource.resource_type, e.resource.resource_name], ['tensor', h]);
    await sameAsServer(e, sess._download(h));
    e = await refused(() => sess.op('neg', [t]), 'TENSOR_NOT_FOUND', OPERAND_KEYS);
    await sameAsServer(e, rawNeg(sess, {handle: h}));
    e = await refused(() => sess.release([t]), 'TENSOR_NOT_FOUND', ['tensor_id']);
    await sameAsServer(e, sess.release([h]));
    const b = sess.batch();
    b.op('neg', [{data: new Float32Array([1]), shape: [1]}]);
    e = await refused(() => b.op('add', [t, 1]), 'TENSOR_NOT_FOUND', OPERAND_KEYS);
    assert.equal(e.metadata.call_index, '1');
  }));

  test('a released backward root or seed is TENSOR_NOT_FOUND', () => withSession(async (sess) => {
    const ctx = await sess.autodiff();
    const w = await sess.tensor(new Float32Array([1, 2]), [2], {requiresGrad: true});
    const loss = await sess.op('sum', [w]);
    const seed = await sess.tensor(new Float32Array([1]), []);
    const h = loss.handle;
    await loss.release();
    const e = await refused(() => ctx.backward(loss), 'TENSOR_NOT_FOUND',
        ['tensor_id', 'root_index']);
    await sameAsServer(e, sess._unary('Backward', {session_id: sess.id, context_id: ctx.id,
      roots: [h]}));
    await seed.release();
    await refused(async () => ctx.backward(await sess.op('sum', [w]), {seed}),
        'TENSOR_NOT_FOUND', ['tensor_id', 'seed_index']);
  }));

  test('a tensor of another session is TENSOR_NOT_FOUND', () => withSession(async (s1) => {
    await withSession(async (s2) => {
      const mine = await s2.tensor(new Float32Array([0, 0]), [2]);
      const theirs = await s1.tensor(new Float32Array([1, 2]), [2]);
      // The same handle number names another tensor in s2: refused, never used.
      assert.equal(mine.handle, theirs.handle);
      const e = await refused(() => s2.op('neg', [theirs]), 'TENSOR_NOT_FOUND', OPERAND_KEYS);
      assert.equal(e.metadata.tensor_id, theirs.handle);
      const far = await s1.tensor(new Float32Array([1]), [1]);  // a handle s2 does not have
      await sameAsServer(e, rawNeg(s2, {handle: far.handle}));
      const r = await refused(() => s2.release([theirs]), 'TENSOR_NOT_FOUND', ['tensor_id']);
      await sameAsServer(r, s2.release([far.handle]));
      assert.deepEqual((await s2.info()).tensors.map((t) => t.handle), [mine.handle]);
      const ctx = await s2.autodiff();
      await refused(() => ctx.backward(theirs), 'TENSOR_NOT_FOUND', ['tensor_id', 'root_index']);
      const batch = s2.batch();
      await refused(() => batch.op('neg', [theirs]), 'TENSOR_NOT_FOUND', OPERAND_KEYS);
      assert.deepEqual(Array.from((await theirs.get()).data), [1, 2]);
    });
  }));

  test('a closed session is SESSION_NOT_FOUND', async () => {
    const sess = await fixture.client.session();
    const t = await sess.tensor(new Float32Array([1]), [1]);
    const ctx = await sess.autodiff();
    await sess.close();
    let e;
    for (const call of [() => t.get(), () => sess.op('neg', [t]), () => sess.keepAlive(),
      () => sess.info(), () => sess.tensor(new Float32Array([1]), [1]), () => sess.release([t]),
      () => sess.autodiff(), () => sess.batch().run(), () => ctx.backward(t)]) {
      e = await refused(call, 'SESSION_NOT_FOUND', ['session_id']);
      assert.equal(e.metadata.session_id, sess.id);
      assert.equal(e.resource.resource_name, sess.id);
    }
    await sameAsServer(e, fixture.client._unary('GetSessionInfo', {session_id: sess.id}));
    await ctx.close();  // closed with its session: nothing to send
    await withSession(async (other) => {
      await refused(() => other.op('neg', [t]), 'TENSOR_NOT_FOUND', OPERAND_KEYS);
    });
  });

  test('outputs of a batch that has not run are BAD_OPERAND', () => withSession(async (sess) => {
    const x = await sess.tensor(new Float32Array([1, 2]), [2]);
    const b1 = sess.batch();
    const y = b1.op('neg', [x]);
    const keys = ['operand_call', 'operand_output', 'call_index', 'input_index', 'op'];
    const e = await refused(() => sess.op('neg', [y]), 'BAD_OPERAND', keys);
    assert.deepEqual(e.fieldViolations.map((v) => v.field), ['calls[0].inputs[0]']);
    const b2 = sess.batch();
    await refused(() => b2.op('neg', [y]), 'BAD_OPERAND', keys);
    await sameAsServer(e, fixture.client._unary('Execute', {session_id: sess.id, calls: [
      {op: 'neg', inputs: [{handle: x.handle}]},
      {op: 'neg', inputs: [{call_output: {call: 0, output: 3}}]}]}));
    await b1.run();
    assert.deepEqual(Array.from((await (await sess.op('neg', [y])).get()).data), [1, 2]);
  }));

  test('data that does not fill its shape is BAD_TENSOR_DATA', () => withSession(async (sess) => {
    await refused(() => sess.tensor(new Float32Array([1, 2, 3]), [2, 2]), 'BAD_TENSOR_DATA',
        ['bytes', 'dtype', 'shape']);
    const e = await refused(() => sess.op('neg', [{data: new Float32Array(3), shape: [2]}]),
        'BAD_TENSOR_DATA', ['bytes', 'dtype', 'shape', 'call_index', 'input_index', 'op']);
    assert.deepEqual([e.metadata.bytes, e.metadata.dtype, e.metadata.shape], ['12', 'f32', '[2]']);
    await sameAsServer(e, rawNeg(sess, {literal: {dtype: 'DTYPE_F32', shape: [2],
      data: Buffer.alloc(12)}}));
  }));

  test('what one Execute cannot carry is INVALID_REQUEST', () => withSession(async (sess) => {
    const c1 = await sess.autodiff();
    const c2 = await sess.autodiff();
    const b = sess.batch();
    b.op('randn', [], {shape: [2]}, {requiresGrad: true, ctx: c1});
    await refused(() => b.op('randn', [], {shape: [2]}, {requiresGrad: true, ctx: c2}),
        'INVALID_REQUEST', ['call_index', 'op', 'field', 'context_id']);
    const e = await refused(() => sess.autodiff({checkpointing: 'fast'}), 'INVALID_REQUEST',
        ['field', 'value']);
    await sameAsServer(e, sess._unary('OpenAutodiffContext', {session_id: sess.id,
      checkpointing: 99}));
  }));
});
