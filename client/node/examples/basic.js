#!/usr/bin/env node
'use strict';
// A first tour of the Node client: upload, ops, a batch, a backward pass and a typed error.
//   node client/node/examples/basic.js [host:port]     (default $TENSORD_ADDRESS or 127.0.0.1:50051)
const tensord = require('..');

async function main() {
  const client = tensord.connect(process.argv[2]);
  await client.ready(10000);
  const sess = await client.session();
  try {
    // Upload two matrices and multiply them on the server.
    const a = await sess.tensor(new Float32Array([1, 2, 3, 4, 5, 6]), [2, 3]);
    const b = await sess.tensor(new Float32Array([1, 0, 0, 1, 1, 1]), [3, 2]);
    const y = await sess.op('matmul', [a, b]);
    console.log('a @ b =', await y.toArray(), 'shape', y.shape);

    // Several ops in one atomic round trip; later calls use earlier outputs.
    const batch = sess.batch();
    const scaled = batch.op('mul', [y, 0.5]);
    const total = batch.op('sum', [scaled]);
    await batch.run();
    console.log('sum(0.5 * a @ b) =', (await total.tensor.toArray())[0]);

    // Gradients: loss = mean(relu(x @ w)), w is a requires-grad leaf of an autodiff context.
    const ctx = await sess.autodiff();
    const w = await sess.tensor(new Float32Array([0.1, -0.2, 0.3]), [3, 1], {requiresGrad: true});
    const h = await sess.op('relu', [await sess.op('matmul', [a, w])]);
    const loss = await sess.op('mean', [h]);
    const grads = await ctx.backward(loss);
    console.log('loss =', (await loss.toArray())[0], 'dloss/dw =', await grads.get(w).toArray());

    // Writing into an autodiff tensor while recording is refused with a typed error.
    try {
      await sess.op('assign', [w, {data: new Float32Array(3), shape: [3, 1]}]);
    } catch (err) {
      console.log(`refused: ${err.reason} (${err.codeName})`, err.metadata);
    }
    await ctx.close();
  } finally {
    await sess.close();
    client.close();
  }
}

main().catch((err) => {
  console.error(err.reason ? `${err.reason}: ${err.message}` : err);
  process.exit(1);
});
