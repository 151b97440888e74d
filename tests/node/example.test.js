'use strict';
// The Node example runs against a real server.
const assert = require('node:assert/strict');
const {execFile} = require('node:child_process');
const path = require('node:path');
const {test} = require('node:test');
const {startServer, REPO} = require('./server_fixture');

test('examples/basic.js runs', async () => {
  const server = await startServer();
  try {
    const out = await new Promise((resolve, reject) => {
      execFile(process.execPath, [path.join(REPO, 'client', 'node', 'examples', 'basic.js'),
        server.address], {timeout: 60000}, (err, stdout, stderr) => {
        if (err) reject(new Error(`${err.message}\n${stdout}\n${stderr}`));
        else resolve(stdout);
      });
    });
    assert.match(out, /a @ b = \[ 4, 5, 10, 11 \]/);
    assert.match(out, /refused: OPERATION_NOT_MARKED_FOR_AUTODIFF \(FAILED_PRECONDITION\)/);
  } finally {
    await server.stop();
  }
});
