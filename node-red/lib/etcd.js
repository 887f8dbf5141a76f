'use strict';

// etcd's v3 API through its JSON gateway (HTTP POST with JSON bodies: bytes
// are base64, int64 are decimal strings), with Node's built-in fetch. The
// npm etcd3 client is not used: it has not been maintained since 2023, and
// its Lock discards the lock key's revision, which is the fencing token.

const explain = require('./explain');

// EtcdError is an error of etcd or of the way to it. unreachable is true
// when no endpoint could be reached (then message says why, per URL);
// code is etcd's gRPC code for an error etcd answered.
class EtcdError extends Error {
  constructor(message, { unreachable = false, code } = {}) {
    super(message);
    this.unreachable = unreachable;
    this.code = code;
  }
}

const CALL_TIMEOUT_MS = 5000;

class Etcd {
  // endpoints: one URL or several (an array, or separated by commas or
  // spaces), http:// or https://; a call goes to the first that answers.
  constructor(endpoints) {
    const list = (Array.isArray(endpoints) ? endpoints : String(endpoints || '').split(/[\s,]+/))
      .map((s) => s.trim().replace(/\/+$/, '')).filter(Boolean);
    if (list.length === 0) throw new EtcdError('no etcd endpoint: give its URL, e.g. http://127.0.0.1:2379');
    for (const u of list) {
      let p;
      try {
        p = new URL(u).protocol;
      } catch (e) {
        throw new EtcdError(`etcd endpoint ${JSON.stringify(u)} is not a URL; want e.g. http://127.0.0.1:2379`);
      }
      if (p !== 'http:' && p !== 'https:') throw new EtcdError(`etcd endpoint ${u}: want http:// or https://, not ${p}//`);
    }
    this.endpoints = list;
    this.current = 0; // the endpoint that answered last
  }

  // call POSTs body to path (/v3/...) and returns etcd's answer. It waits
  // at most timeoutMs (0: until signal aborts it, for a lock that waits in
  // the queue). An endpoint that cannot be reached is skipped for the next;
  // an error etcd answers is thrown as it is.
  async call(path, body, { signal, timeoutMs = CALL_TIMEOUT_MS } = {}) {
    const reasons = [];
    for (let n = 0; n < this.endpoints.length; n++) {
      const i = (this.current + n) % this.endpoints.length;
      const url = this.endpoints[i] + path;
      // AbortSignal.timeout takes whole milliseconds only: a fraction
      // (a deadline from performance.now()) throws a RangeError.
      const signals = [signal, timeoutMs > 0 ? AbortSignal.timeout(Math.ceil(timeoutMs)) : undefined].filter(Boolean);
      const either = anySignal(signals);
      let res, text;
      try {
        res = await fetch(url, {
          method: 'POST', body: JSON.stringify(body), headers: { 'content-type': 'application/json' },
          signal: either.signal,
        });
        text = await res.text();
      } catch (e) {
        if (signal && signal.aborted) throw abortError(signal);
        reasons.push(explain.network(this.endpoints[i], e, 'etcd'));
        continue;
      } finally {
        either.done();
      }
      let answer;
      try {
        // A stream's answer (keepalive) is one JSON object per line.
        answer = JSON.parse(text.trim().split('\n')[0]);
      } catch (e) {
        answer = undefined;
      }
      if (answer === null || typeof answer !== 'object') {
        reasons.push(`${explain.hostPort(this.endpoints[i])} answered HTTP ${res.status} without etcd's JSON (is the URL etcd's client URL?)`);
        continue;
      }
      this.current = i;
      const err = answer.error || (answer.result && answer.result.error);
      if (err) {
        const msg = typeof err === 'string' ? err : (err.message || JSON.stringify(err));
        throw new EtcdError(`etcd ${path}: ${msg}`, { code: answer.code !== undefined ? answer.code : err.grpc_code });
      }
      if (!res.ok) throw new EtcdError(`etcd ${path}: HTTP ${res.status}`);
      return answer;
    }
    throw new EtcdError(`etcd unreachable: ${reasons.join('; ')}`, { unreachable: true });
  }
}

// anySignal returns a signal that aborts when one of signals does
// (AbortSignal.any, which Node 18 lacks), and done, which takes its
// listeners off signals again: a long-lived signal (a node's, until it
// closes) must not gather one per call.
function anySignal(signals) {
  if (signals.length <= 1) return { signal: signals[0], done: () => {} };
  const c = new AbortController();
  const listening = [];
  for (const s of signals) {
    if (s.aborted) {
      c.abort(s.reason);
      break;
    }
    const on = () => c.abort(s.reason);
    s.addEventListener('abort', on, { once: true });
    listening.push([s, on]);
  }
  return { signal: c.signal, done: () => listening.forEach(([s, on]) => s.removeEventListener('abort', on)) };
}

function abortError(signal) {
  const e = new Error(signal.reason && signal.reason.message ? signal.reason.message : 'aborted');
  e.name = 'AbortError';
  return e;
}

const b64 = (s) => Buffer.from(s, 'utf8').toString('base64');
const unb64 = (s) => Buffer.from(s || '', 'base64').toString('utf8');

// leaseNotFound says whether err is etcd's "requested lease not found".
function leaseNotFound(err) {
  return err instanceof EtcdError && /lease not found/.test(err.message);
}

module.exports = { Etcd, EtcdError, b64, unb64, leaseNotFound };
