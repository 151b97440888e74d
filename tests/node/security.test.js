'use strict';
// The Node client against a server with TLS and bearer tokens. Certificates are made for the
// run by scripts/make-test-certs.sh (openssl CLI) in a temporary directory.
const assert = require('node:assert/strict');
const {execFileSync, spawn} = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const {after, before, describe, test} = require('node:test');
const {tensord, REPO} = require('./server_fixture');

const TOKEN_ALICE = 'node-alice-0123456789abcdef';
const TOKEN_BOB = 'node-bob-fedcba9876543210';

let dir;
let proc;
let address;
let log = '';

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const {port} = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

before(async () => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'tensord-node-pki-'));
  execFileSync('sh', [path.join(REPO, 'scripts', 'make-test-certs.sh'), dir]);
  fs.writeFileSync(path.join(dir, 'tokens.txt'),
      `# tenants\n${TOKEN_ALICE} alice\n${TOKEN_BOB} bob\n`);
  const bin = process.env.TENSORD_BIN || path.join(REPO, 'build', 'tensord');
  const port = await freePort();
  address = `localhost:${port}`;
  proc = spawn(bin, [`--address=127.0.0.1:${port}`, `--tls_cert=${dir}/server.pem`,
    `--tls_key=${dir}/server.key`, `--auth_tokens=${dir}/tokens.txt`],
  {stdio: ['ignore', 'ignore', 'pipe']});
  proc.stderr.on('data', (d) => {
    log += d;
  });
  // Probing before the port is bound would put the channel into gRPC's reconnect backoff
  // (seconds); the start-up line says when it is.
  const deadline = Date.now() + 60000;
  while (!log.includes('listening on')) {
    if (proc.exitCode !== null || Date.now() > deadline) throw new Error(`server: ${log}`);
    await new Promise((r) => setTimeout(r, 20));
  }
  const probe = tensord.connect(address, {tlsCa: path.join(dir, 'ca.pem')});
  try {
    await probe.ready(60000);  // health needs no token
  } finally {
    probe.close();
  }
});

after(async () => {
  if (proc && proc.exitCode === null) {
    const exited = new Promise((resolve) => proc.once('exit', resolve));
    proc.kill('SIGTERM');
    await exited;
  }
  if (dir) fs.rmSync(dir, {recursive: true, force: true});
});

describe('TLS and tokens', () => {
  test('a token over TLS reaches the whole API', async () => {
    // The CA as a path and as a Buffer.
    for (const tlsCa of [path.join(dir, 'ca.pem'), fs.readFileSync(path.join(dir, 'ca.pem'))]) {
      const client = tensord.connect(address, {tlsCa, token: TOKEN_ALICE});
      try {
        const sess = await client.session();
        const a = await sess.tensor(new Float32Array([1, 2, 3]), [3]);
        const y = await sess.op('mul', [a, a]);
        assert.deepEqual(Array.from((await y.get()).data), [1, 4, 9]);
        await sess.close();
      } finally {
        client.close();
      }
    }
  });

  test('a missing or unknown token is UNAUTHENTICATED, without echoing it', async () => {
    const tlsCa = path.join(dir, 'ca.pem');
    for (const [token, cause] of [[undefined, 'missing'], ['node-mallory-00000000000000', 'unknown']]) {
      const client = tensord.connect(address, {tlsCa, token});
      try {
        await assert.rejects(client.session(), (err) => {
          assert.ok(err instanceof tensord.TensordError);
          assert.equal(err.reason, 'UNAUTHENTICATED');
          assert.equal(err.codeName, 'UNAUTHENTICATED');
          assert.equal(err.metadata.cause, cause);
          if (token) assert.ok(!err.message.includes(token));
          return true;
        });
      } finally {
        client.close();
      }
    }
    assert.ok(tensord.ERROR_REASONS.includes('UNAUTHENTICATED'));
  });

  test('a plaintext client cannot talk to the TLS server', async () => {
    const client = tensord.connect(address, {token: TOKEN_ALICE, timeoutMs: 10000});
    try {
      await assert.rejects(client.session(), (err) => {
        assert.equal(err.codeName, 'UNAVAILABLE');
        assert.equal(err.reason, '');
        return true;
      });
    } finally {
      client.close();
    }
  });

  test("another tenant's session is not found", async () => {
    const tlsCa = path.join(dir, 'ca.pem');
    const alice = tensord.connect(address, {tlsCa, token: TOKEN_ALICE});
    const bob = tensord.connect(address, {tlsCa, token: TOKEN_BOB});
    try {
      const sess = await alice.session();
      for (const id of [sess.id, 'f'.repeat(32)]) {
        await assert.rejects(bob._unary('GetSessionInfo', {session_id: id}), (err) => {
          assert.equal(err.reason, 'SESSION_NOT_FOUND');
          return true;
        });
      }
      await sess.keepAlive();  // still alice's
      await sess.close();
    } finally {
      alice.close();
      bob.close();
    }
  });

  test('half a client key pair is refused before connecting', () => {
    assert.throws(() => tensord.connect(address, {tlsCa: path.join(dir, 'ca.pem'),
      tlsCert: path.join(dir, 'client.pem')}), /both/);
  });
});
