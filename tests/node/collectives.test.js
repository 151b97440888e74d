'use strict';
// Process groups from Node: two servers join a group through a file rendezvous, all_reduce
// sums across them, and an autodiff tensor of a closed context on one rank fails the
// collective on both ranks with AUTODIFF_CONTEXT_NOT_ENABLED naming that rank; a backward
// reduces its gradients over the group.
const assert = require('node:assert/strict');
const crypto = require('crypto');
const fs = require('fs');
const os = require('os');
const path = require('path');
const {after, before, test} = require('node:test');
const {startServer} = require('./server_fixture');

const servers = [];
let dir;
before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tensord-group-'));
  const args = ['--collective-address=127.0.0.1'];
  servers.push(await startServer({args}), await startServer({args}));
});
after(async () => {
  for (const s of servers) await s.stop();
  fs.rmSync(dir, {recursive: true, force: true});
});

async function joinedSessions() {
  const sessions = await Promise.all(servers.map((s) => s.client.session({})));
  const name = `node-${crypto.randomBytes(6).toString('hex')}`;
  const infos = await Promise.all(
      sessions.map((s, rank) => s.joinGroup(name, rank, 2, `file://${dir}`)));
  assert.deepEqual(infos.map((i) => i.rank), [0, 1]);
  assert.deepEqual(infos.map((i) => i.backend), ['gloo', 'gloo']);
  return sessions;
}

test('all_reduce sums over the group', async () => {
  const sessions = await joinedSessions();
  const outs = await Promise.all(sessions.map(async (s, rank) => {
    const x = await s.tensor(new Float64Array([rank + 1, 10]), [2]);
    return (await (await s.op('all_reduce', [x], {op: 'sum'})).get()).data;
  }));
  for (const out of outs) assert.deepEqual(Array.from(out), [3, 20]);
  await Promise.all(sessions.map((s) => s.close()));
});

test('a closed context on one rank fails the collective on every rank', async () => {
  const sessions = await joinedSessions();
  const results = await Promise.allSettled(sessions.map(async (s, rank) => {
    const ctx = await s.autodiff();
    const x = await s.tensor(new Float64Array([1, 2]), [2], {requiresGrad: true});
    if (rank === 1) await ctx.close();
    return s.op('all_reduce', [x]);
  }));
  for (const r of results) {
    assert.equal(r.status, 'rejected');
    assert.equal(r.reason.reason, 'AUTODIFF_CONTEXT_NOT_ENABLED', r.reason.message);
    assert.equal(r.reason.metadata.rank, '1');
    assert.equal(r.reason.metadata.op, 'all_reduce');
  }
  // The group is still usable.
  const outs = await Promise.all(sessions.map(async (s) => {
    const x = await s.tensor(new Float64Array([1]), [1]);
    return (await (await s.op('all_reduce', [x])).get()).data[0];
  }));
  assert.deepEqual(outs, [2, 2]);
  await Promise.all(sessions.map((s) => s.close()));
});

test('a backward reduces its gradients over the group while it runs', async () => {
  const sessions = await joinedSessions();
  const grads = await Promise.all(sessions.map(async (s, rank) => {
    const ctx = await s.autodiff();
    const w = await s.tensor(new Float64Array([1, 2]), [2], {requiresGrad: true});
    const x = await s.tensor(new Float64Array([rank + 1, -rank]), [2]);
    const loss = await s.op('sum', [await s.op('mul', [w, x])]);
    const g = await ctx.backward(loss, {reduce: [[w]]});
    return Array.from((await g.get(w).get()).data);
  }));
  // The mean of x over the ranks: [1, 0] and [2, -1].
  for (const g of grads) assert.deepEqual(g, [1.5, -0.5]);
  await Promise.all(sessions.map((s) => s.close()));
});
