'use strict';
// Programs: a step compiled on the server once and run in one round trip (forward, backward
// and updates), atomically. See docs/programs.md.
//
//   const p = sess.program({ctx});
//   const x = p.parameter({data: exampleX, shape: [8, 4]}, 'x');
//   const loss = p.op('sum', [p.op('mul', [x, w])], {}, {fetch: true});
//   p.backward([loss], [w]);
//   p.update('sgd', [w, p.gradient(w)], {lr: 0.1});
//   const step = await p.compile();
//   const {values} = await step.run([{data: batchX, shape: [8, 4]}]);   // values[loss.call]

const {WIRE_TO_DTYPE, fromBytes} = require('./dtypes');
const {clientError} = require('./errors');
const {Tensor, Pending, handleIn} = require('./tensor');
const {contextIdOf} = require('./autodiff');
const {opCall, operand, ProgramParameter, ProgramGradient} = require('./batch');

function decode(data) {
  const dtype = WIRE_TO_DTYPE[data.dtype];
  const shape = data.shape.map(Number);
  return {dtype, shape, data: fromBytes(data.data, dtype, shape)};
}

class Program {
  constructor(session, id, compiled) {
    this.session = session;
    this.id = String(id);
    this.compiled = compiled;  // per call: [{dtype, shape}] as compiled
    this.released = false;
  }

  // inputs: one operand per parameter. Resolves to {values, outputs, gradients}: per call the
  // fetched values ({dtype, shape, data}) and kept Tensors, and the fetched gradients.
  async run(inputs = []) {
    if (this.released) {
      throw clientError('PROGRAM_NOT_FOUND', `tensord: program ${this.id} was released`,
          {program_id: this.id});
    }
    const req = {session_id: this.session.id, program_id: this.id,
      inputs: inputs.map((v, k) => operand(v, null, this.session, {parameter_index: k}))};
    const resp = await this.session._unary('RunProgram', req);
    return {
      values: resp.results.map((r) => r.values.map(decode)),
      outputs: resp.results.map((r) => r.outputs.filter((info) => String(info.handle) !== '0')
          .map((info) => this.session._track(new Tensor(this.session, info)))),
      gradients: resp.gradients.map(decode),
    };
  }

  async release() {
    if (this.released) return;
    this.released = true;
    await this.session._unary('ReleaseProgram', {session_id: this.session.id,
      program_id: this.id});
  }
}

// Builds a CompileProgramRequest: parameters, forward calls, then the backward and updates
// (numbered after the forward calls, so every forward call comes first).
class ProgramBuilder {
  constructor(session, {ctx = null, noGrad = false} = {}) {
    this.session = session;
    this.contextId = contextIdOf(session, ctx);
    this.noGrad = noGrad;
    this.parameters = [];
    this.calls = [];
    this.updates = [];
    this.backwardSpec = null;
  }

  // `example` (any operand but a Pending) fixes the kind, dtype and shape runs must bind.
  parameter(example, name = '') {
    const k = this.parameters.length;
    this.parameters.push({name, example: operand(example, null, this.session,
        {parameter_index: k})});
    return new ProgramParameter(k);
  }

  gradient(leaf) {
    return new ProgramGradient(handleIn(this.session, leaf));
  }

  _add(list, name, inputs, attrs, options, index) {
    const call = opCall(name, inputs, attrs, options, this, this.session, index);
    call.fetch = !!options.fetch;
    call.keep = !!options.keep;
    list.push(call);
    const n = options.numOutputs || 1;
    const outs = Array.from({length: n}, (_, k) => new Pending(this, index, k));
    return options.numOutputs ? outs : outs[0];
  }

  // A forward call; options: fetch, keep, requiresGrad, numOutputs.
  op(name, inputs = [], attrs = {}, options = {}) {
    if (this.backwardSpec || this.updates.length) {
      throw clientError('INVALID_REQUEST', `tensord: program: forward call ${name} added ` +
          'after the backward or an update; add every forward call first',
      {op: name, call_index: this.calls.length});
    }
    return this._add(this.calls, name, inputs, attrs, options, this.calls.length);
  }

  // roots: one-element forward outputs (Pending); leaves: requires-grad leaves (Tensors).
  backward(roots, leaves, {fetchGradients = false} = {}) {
    this.backwardSpec = {
      roots: roots.map((r, i) => {
        if (!(r instanceof Pending) || r.batch !== this) {
          throw clientError('BAD_OPERAND', 'tensord: a program\'s backward roots are outputs ' +
              'of its own calls', {root_index: i});
        }
        return {call: r.call, output: r.output};
      }),
      leaves: leaves.map((l, i) => handleIn(this.session, l, {leaf_index: i})),
      fetch_gradients: fetchGradients,
    };
  }

  // An update call: runs without recording after the backward.
  update(name, inputs = [], attrs = {}, options = {}) {
    return this._add(this.updates, name, inputs, attrs, options,
        this.calls.length + this.updates.length);
  }

  async compile() {
    const req = {session_id: this.session.id, parameters: this.parameters, calls: this.calls,
      updates: this.updates, context_id: this.contextId, no_grad: this.noGrad};
    if (this.backwardSpec) req.backward = this.backwardSpec;
    const resp = await this.session._unary('CompileProgram', req);
    return new Program(this.session, resp.program_id, resp.calls.map((c) => c.outputs.map(
        (info) => ({dtype: WIRE_TO_DTYPE[info.dtype], shape: info.shape.map(Number)}))));
  }
}

module.exports = {Program, ProgramBuilder};
