'use strict';
// AutodiffContext, and which context a call that requires gradients records into.

const {Tensor, handleIn} = require('./tensor');

// `ctx` (a context or its id) when given, else the session's most recently opened context, else
// '0' (none).
function contextIdOf(session, ctx) {
  if (ctx) return String(ctx instanceof AutodiffContext ? ctx.id : ctx);
  const open = session._contexts;
  return open.length ? open[open.length - 1].id : '0';
}

class AutodiffContext {
  constructor(session, id, checkpointing) {
    this.session = session;
    this.id = String(id);
    this.checkpointing = checkpointing;
    this.closed = false;
  }

  // Backward from `roots` (a Tensor or an array); resolves to a Map leaf Tensor -> gradient.
  // Leaves are matched to Tensor objects this session created; `byHandle` has every gradient.
  // `reduce`: buckets (arrays of requires-grad leaves, the last layers first) whose gradients
  // the server reduces across the session's group (`reduceOp` 'mean' or 'sum') while the
  // backward runs, as DistributedDataParallel does; their gradients come back reduced.
  async backward(roots, {seed = null, retainGraph = false, reduce = null,
    reduceOp = 'mean'} = {}) {
    const s = this.session;
    roots = Array.isArray(roots) ? roots : [roots];
    const rootHandles = roots.map((r, i) => handleIn(s, r, {root_index: i}));
    const reduction = reduce === null ? null : {op: reduceOp, buckets: reduce.map(
        (bucket, b) => ({leaves: bucket.map((leaf) => handleIn(s, leaf, {bucket_index: b}))}))};
    s._checkOpen();
    const seeds = [];
    const temps = [];
    if (seed !== null) {
      for (const sd of (Array.isArray(seed) ? seed : [seed])) {
        if (sd instanceof Tensor) {
          seeds.push(handleIn(s, sd, {seed_index: seeds.length}));
        } else {
          const t = await s.tensor(sd.data, sd.shape, {dtype: sd.dtype});
          temps.push(t);
          seeds.push(t.handle);
        }
      }
    }
    try {
      const resp = await s._unary('Backward', {session_id: s.id, context_id: this.id,
        roots: rootHandles, seeds, retain_graph: retainGraph, reduce: reduction});
      const grads = new Map();
      grads.byHandle = new Map();
      for (const g of resp.gradients) {
        const grad = new Tensor(s, g.grad);
        grads.byHandle.set(String(g.leaf), grad);
        const leaf = s._tensors.get(String(g.leaf));
        const obj = leaf && leaf.deref();
        if (obj) grads.set(obj, grad);
      }
      return grads;
    } finally {
      if (temps.length) await s.release(temps);
    }
  }

  async close() {
    if (this.closed) return;
    this.closed = true;
    this.session._contexts = this.session._contexts.filter((c) => c !== this);
    await this.session._unary('CloseAutodiffContext', {session_id: this.session.id,
      context_id: this.id});
  }
}

module.exports = {AutodiffContext, contextIdOf};
