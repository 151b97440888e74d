'use strict';
// Session affinity (docs/scaling.md): the client draws one key per session before
// CreateSession and sends it as x-tensord-session metadata with CreateSession and with every
// later call of the session, streams included; calls of no session carry none, and the bearer
// token still goes with every call. Seen by a grpc-js client interceptor, against the real
// server.
const assert = require('node:assert/strict');
const path = require('path');
const {test} = require('node:test');
const {serverForFile, tensord, REPO} = require('./server_fixture');
// The client's own copy of grpc-js, so that the interceptor is of the same module.
const grpc = require(path.join(REPO, 'client', 'node', 'node_modules', '@grpc', 'grpc-js'));

const fixture = serverForFile();

test('every call of a session carries its affinity key', async () => {
  const calls = [];
  const record = (options, nextCall) => new grpc.InterceptingCall(nextCall(options), {
    start(metadata, listener, next) {
      calls.push([options.method_definition.path.split('/').pop(),
        metadata.get(tensord.SESSION_METADATA_KEY)[0], metadata.get('authorization')[0]]);
      next(metadata, listener);
    },
  });
  const client = tensord.connect(fixture.server.address,
      {token: 'not-checked', channelOptions: {interceptors: [record]}});
  try {
    await client.devices();
    const s1 = await client.session();
    const s2 = await client.session();
    const t = await s1.tensor(new Float32Array([1, 2, 3]));
    const y = await s1.op('add', [t, 1]);
    assert.deepEqual(Array.from((await y.get()).data), [2, 3, 4]);
    await s1.info();
    await s1.keepAlive();
    await (await s1.autodiff()).close();
    await (await s2.tensor(new Float64Array([1, 1]))).get();
    await s1.close();
    await s2.close();

    const [k1, k2] = [s1.affinityKey, s2.affinityKey];
    assert.match(k1, /^[0-9a-f]{32}$/);
    assert.match(k2, /^[0-9a-f]{32}$/);
    assert.notEqual(k1, k2);
    assert.deepEqual(calls.map(([method, key]) => [method, key]), [
      ['ListDevices', undefined],
      ['CreateSession', k1],
      ['CreateSession', k2],
      ['PutTensor', k1],
      ['Execute', k1],
      ['GetTensor', k1],
      ['GetSessionInfo', k1],
      ['KeepAlive', k1],
      ['OpenAutodiffContext', k1],
      ['CloseAutodiffContext', k1],
      ['PutTensor', k2],
      ['GetTensor', k2],
      ['CloseSession', k1],
      ['CloseSession', k2],
    ]);
    for (const [method, , auth] of calls) assert.equal(auth, 'Bearer not-checked', method);
  } finally {
    client.close();
  }
});
