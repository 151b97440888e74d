'use strict';
// The server process killed (SIGKILL) in the middle of a streamed put, a long batch and a
// backward over a long graph, seen from the Node client: the call rejects with UNAVAILABLE
// within a bound (it never hangs; the client has no deadline that could hide a hang), a server
// restarted on the same port serves new sessions through the same client, and the old session
// is SESSION_NOT_FOUND. Work is sized from a measured call, so it lasts seconds on any machine.
const assert = require('node:assert/strict');
const path = require('path');
const {test} = require('node:test');
const {startServer, tensord, REPO} = require('./server_fixture');
const {fromServiceError} = require(path.join(REPO, 'client', 'node', 'lib', 'errors'));

// A killed server's clients see their connection reset at once (milliseconds here); the bound
// is generous for a loaded CI machine and still far from a hang.
const KILL_BOUND_MS = 10000;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Milliseconds one call of `op` takes (best of three after a warm-up).
async function perCallMs(sess, op, inputs) {
  let best = Infinity;
  for (let k = 0; k < 4; k++) {
    const start = Date.now();
    await (await sess.op(op, inputs)).release();
    if (k > 0) best = Math.min(best, Date.now() - start);
  }
  return Math.max(best, 1);
}

// 256 MiB with paced chunks, so that the stream lasts seconds and the kill lands inside it
// (sess.tensor() hands every chunk to gRPC at once, which on loopback may finish first).
function pacedPut(sess, onFlight) {
  return new Promise((resolve, reject) => {
    const c = sess.client;
    let ended = false;
    const call = c.stub.PutTensor(c._metadata(), c._callOptions(), (err, resp) => {
      ended = true;
      if (err) reject(fromServiceError(err));
      else resolve(resp);
    });
    call.on('error', () => {});  // the callback reports it
    call.write({header: {session_id: sess.id, dtype: 'DTYPE_F32', shape: [64 << 20]}});
    const chunk = Buffer.alloc(1 << 20);
    let k = 0;
    const next = () => {
      if (ended) return;
      if (k === 256) return call.end();
      call.write({chunk});
      if (++k === 3) onFlight();
      setTimeout(next, 20);
    };
    next();
  });
}

async function until(what, fn) {
  const end = Date.now() + KILL_BOUND_MS;
  while (!(await fn())) {
    assert.ok(Date.now() < end, what);
    await sleep(10);
  }
}

for (const what of ['put', 'batch', 'backward']) {
  test(`kill mid-${what}: UNAVAILABLE, then a restarted server serves new sessions`, async () => {
    let server = await startServer();
    const client = tensord.connect(server.address);  // no deadline: a hang would show as one
    try {
      const sess = await client.session();
      let call;
      let underWay;
      if (what === 'put') {
        let flying = false;
        call = () => pacedPut(sess, () => {
          flying = true;
        });
        // The server charges the announced size when it has read the header.
        underWay = () => until('the put never reached the server', async () => flying &&
            Number((await sess.info()).memory_used_bytes) >= 256 << 20);
      } else if (what === 'batch') {
        const a = await sess.op('zeros', [], {shape: [256, 32768]});
        const b = await sess.op('zeros', [], {shape: [32768, 256]});
        const calls = Math.min(5000, Math.max(20,
            Math.ceil(8000 / await perCallMs(sess, 'matmul', [a, b]))));
        call = () => {
          const batch = sess.batch();  // about 8 s of matmuls with small outputs
          for (let k = 0; k < calls; k++) batch.op('matmul', [a, b]);
          return batch.run();
        };
        underWay = () => sleep(500);
      } else {
        const ctx = await sess.autodiff();
        const w = await sess.op('zeros', [], {shape: [2048, 2048]}, {requiresGrad: true, ctx});
        const nodes = Math.min(24, Math.max(4,
            Math.ceil(1000 / await perCallMs(sess, 'matmul', [w, w]))));
        const batch = sess.batch();  // a recorded chain y = y @ w of about a second
        let y = batch.op('matmul', [w, w]);
        for (let k = 1; k < nodes; k++) y = batch.op('matmul', [y, w]);
        const loss = batch.op('sum', [y]);
        const start = Date.now();
        await batch.run();
        const forwardMs = Date.now() - start;
        call = () => ctx.backward(loss.tensor);  // two matmuls per node: about twice the forward
        underWay = () => sleep(Math.max(200, forwardMs / 2));
      }

      let settled = false;
      const outcome = call().then(() => ({ok: true}), (err) => ({err, at: Date.now()}))
          .finally(() => {
            settled = true;
          });
      await underWay();
      assert.equal(settled, false, 'the call ended before the server was killed: size it up');
      const killed = Date.now();
      await server.kill();
      let timer;
      const result = await Promise.race([outcome, new Promise((r) => {
        timer = setTimeout(() => r(null), KILL_BOUND_MS);
      })]);
      clearTimeout(timer);
      assert.ok(result, `the call still hangs ${KILL_BOUND_MS} ms after the kill`);
      assert.ok(result.err, 'the call succeeded although the server was killed');
      assert.equal(result.err.codeName, 'UNAVAILABLE', String(result.err));
      assert.ok(result.at - killed < KILL_BOUND_MS);

      const port = Number(server.address.split(':').pop());
      await server.stop();
      server = await startServer({port});
      // Calls made while the channel backs off from its failed reconnects are UNAVAILABLE.
      let fresh = null;
      const end = Date.now() + 30000;
      while (!fresh) {
        try {
          fresh = await client.session();
        } catch (err) {
          if (err.codeName !== 'UNAVAILABLE' || Date.now() > end) throw err;
          await sleep(100);
        }
      }
      const x = await fresh.tensor(new Float32Array([1, 2, 3]), [3]);
      assert.deepEqual(Array.from((await x.get()).data), [1, 2, 3]);
      await fresh.close();
      // The restarted server knows nothing of the session from before.
      await assert.rejects(sess.info(), (err) => err.reason === 'SESSION_NOT_FOUND' &&
          err.codeName === 'NOT_FOUND');
    } finally {
      client.close();
      await server.stop();
    }
  });
}
