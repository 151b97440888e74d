'use strict';
// Client: the channel (plaintext, TLS or mutual TLS, bearer token), the service-wide RPCs and
// the health check; connect() makes one.

const crypto = require('crypto');
const fs = require('fs');
const grpc = require('@grpc/grpc-js');
const {TensordService, HealthService} = require('./proto');
const {WIRE_TO_DTYPE} = require('./dtypes');
const {fromServiceError} = require('./errors');
const {Session} = require('./session');

// Every call that concerns a session, CreateSession included, carries the session's affinity
// key under this metadata key, so that a balancer in front of several servers can hash on it
// and send all of a session's calls to the server that created it (docs/scaling.md).
const SESSION_METADATA_KEY = 'x-tensord-session';

// PEM contents from a Buffer, or from a file path.
function readPem(value, what) {
  if (value === undefined || value === null || Buffer.isBuffer(value)) return value || null;
  try {
    return fs.readFileSync(value);
  } catch (e) {
    throw new Error(`tensord: cannot read the ${what} file ${value}: ${e.message}`);
  }
}

// Channel credentials from the connect options: plaintext unless tls, tlsCa or a client
// certificate is given.
function channelCredentials(options) {
  if (options.credentials) return options.credentials;
  const ca = readPem(options.tlsCa, 'CA certificate');
  const cert = readPem(options.tlsCert, 'client certificate');
  const key = readPem(options.tlsKey, 'client key');
  if (!cert !== !key) {
    throw new Error('tensord: mutual TLS needs both a client certificate (tlsCert) and its key ' +
                    '(tlsKey)');
  }
  if (!options.tls && !ca && !cert) return grpc.credentials.createInsecure();
  return grpc.credentials.createSsl(ca, key, cert);
}

class Client {
  // options: tlsCa (CA certificate, a path or a Buffer of PEM; implies TLS), tls (TLS with the
  // system roots), tlsCert/tlsKey (client certificate and key for mutual TLS), token (sent as
  // "authorization: Bearer <token>"; use TLS too), timeoutMs, channelOptions, credentials
  // (ready-made grpc.ChannelCredentials, overriding the TLS options). See docs/security.md.
  constructor(address, options = {}) {
    this.address = address || process.env.TENSORD_ADDRESS || '127.0.0.1:50051';
    const creds = channelCredentials(options);
    const channelOptions = {'grpc.max_receive_message_length': -1,
      'grpc.max_send_message_length': -1, ...(options.channelOptions || {})};
    this.stub = new TensordService(this.address, creds, channelOptions);
    this.health = new HealthService(this.address, creds, channelOptions);
    this.token = options.token || null;
    this.timeoutMs = options.timeoutMs || 0;
  }

  // The metadata of one call, built here only: the bearer token, and for a call that concerns a
  // session its affinity key.
  _metadata(affinityKey) {
    const md = new grpc.Metadata();
    if (this.token) md.set('authorization', `Bearer ${this.token}`);
    if (affinityKey) md.set(SESSION_METADATA_KEY, affinityKey);
    return md;
  }

  _callOptions() {
    return this.timeoutMs ? {deadline: Date.now() + this.timeoutMs} : {};
  }

  // options: stub (default the Tensord service), affinityKey (of the session the call concerns).
  _unary(method, req, {stub = this.stub, affinityKey = null} = {}) {
    return new Promise((resolve, reject) => {
      stub[method](req, this._metadata(affinityKey), this._callOptions(), (err, resp) => {
        if (err) reject(fromServiceError(err));
        else resolve(resp);
      });
    });
  }

  // float32MatmulPrecision: 'highest' (the default), 'high' (TensorFloat-32 products on cuda
  // devices) or 'medium' (bfloat16 products too), as torch.set_float32_matmul_precision.
  async session({device = '', ttlSeconds = 0, memoryQuotaBytes = 0, autodiff = true,
    float32MatmulPrecision = ''} = {}) {
    // The session's affinity key is drawn before the server is asked, so that a balancer
    // hashing on it routes CreateSession to the server every later call of the session reaches.
    const affinityKey = crypto.randomBytes(16).toString('hex');
    const resp = await this._unary('CreateSession', {device, ttl_seconds: ttlSeconds,
      memory_quota_bytes: memoryQuotaBytes, disable_autodiff: !autodiff,
      float32_matmul_precision: float32MatmulPrecision}, {affinityKey});
    return new Session(this, resp, affinityKey);
  }

  async devices() {
    return (await this._unary('ListDevices', {})).devices.map((d) => ({...d,
      memory_bytes: Number(d.memory_bytes)}));
  }

  async ops() {
    const resp = await this._unary('ListOps', {});
    const marking = {MARKING_DIFFERENTIABLE: 'differentiable', MARKING_ZERO_GRAD: 'zero_grad',
      MARKING_NON_DIFFERENTIABLE: 'non_differentiable'};
    return resp.ops.map((o) => ({...o, marking: marking[o.marking] || 'unmarked',
      dtypes: o.dtypes.map((d) => WIRE_TO_DTYPE[d])}));
  }

  async check(service = '') {
    const resp = await this._unary('Check', {service}, {stub: this.health});
    return resp.status;
  }

  // Resolves once the health check answers SERVING.
  async ready(timeoutMs = 30000) {
    const deadline = Date.now() + timeoutMs;
    let last = null;
    while (Date.now() < deadline) {
      try {
        if (await this.check() === 'SERVING') return;
      } catch (e) {
        last = e;
      }
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`tensord: ${this.address} not ready after ${timeoutMs} ms (${last})`);
  }

  close() {
    this.stub.close();
    this.health.close();
  }
}

function connect(address, options) {
  return new Client(address, options);
}

module.exports = {Client, connect, SESSION_METADATA_KEY};
