'use strict';
// Starts the real tensord server binary ($TENSORD_BIN or <repo>/build/tensord) on a free
// loopback port (or on a given one, to restart it at the same address) and waits for its
// health check. Not a test file (no .test.js suffix).
const {spawn} = require('child_process');
const fs = require('fs');
const net = require('net');
const path = require('path');
const {after, before} = require('node:test');

const REPO = path.resolve(__dirname, '..', '..');
const tensord = require(path.join(REPO, 'client', 'node'));

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

async function startServer({port = 0, args = []} = {}) {
  const bin = process.env.TENSORD_BIN || path.join(REPO, 'build', 'tensord');
  if (!fs.existsSync(bin)) {
    throw new Error(`tensord server binary not found at ${bin}: build it or set TENSORD_BIN`);
  }
  let lastError = null;
  for (let attempt = 0; attempt < 5; attempt++) {
    const address = `127.0.0.1:${port || await freePort()}`;
    const proc = spawn(bin, [`--address=${address}`, ...args],
        {stdio: ['ignore', 'ignore', 'pipe']});
    let log = '';
    proc.stderr.on('data', (d) => {
      log += d;
    });
    const exited = new Promise((resolve) => proc.once('exit', () => resolve('exited')));
    const client = tensord.connect(address);
    try {
      const outcome = await Promise.race([client.ready(60000).then(() => 'ready'), exited]);
      if (outcome === 'ready') {
        return {
          address,
          client,
          log: () => log,
          // SIGKILL: the server dies at once, as in a crash.
          async kill() {
            if (proc.exitCode === null && proc.signalCode === null) {
              proc.kill('SIGKILL');
              await exited;
            }
          },
          async stop() {
            client.close();
            if (proc.exitCode === null) {
              proc.kill('SIGTERM');
              await exited;
            }
          },
        };
      }
      lastError = new Error(`server exited: ${log}`);
    } catch (e) {
      lastError = e;
      proc.kill('SIGKILL');
    }
    client.close();
  }
  throw lastError;
}

// One server for the tests of a file: started before them, stopped after them. `client` is
// set once it is up.
function serverForFile() {
  const fixture = {server: null, client: null};
  before(async () => {
    fixture.server = await startServer();
    fixture.client = fixture.server.client;
  });
  after(async () => {
    if (fixture.server) await fixture.server.stop();
  });
  return fixture;
}

module.exports = {startServer, serverForFile, tensord, REPO};
