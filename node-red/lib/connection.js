'use strict';

// The connection to a gateway through an MQTT broker (MQTT.js): commands
// out, their answers back on this connection's own reply topic, the
// gateway's retained states and its status. It subscribes to all three,
// and waits for the broker's SUBACK, before it sends anything: an answer
// published before the subscription exists is lost.

const { EventEmitter } = require('node:events');
const fs = require('node:fs');
const crypto = require('node:crypto');
const mqtt = require('mqtt');
const wire = require('./wire');
const sign = require('./sign');
const explain = require('./explain');

const RESEND_MS = 1000; // first wait for an answer before the command is published again
const MAX_RESEND_MS = 8000;

class TimeoutError extends Error {}
class ClosedError extends Error {}

// brokerURL checks a broker URL and returns it as MQTT.js takes it.
function brokerURL(url) {
  let u;
  try {
    u = new URL(String(url || '').trim());
  } catch (e) {
    throw new Error(`broker ${JSON.stringify(url)} is not a URL; want e.g. tcp://127.0.0.1:1883 or mqtts://broker.lan:8883`);
  }
  const scheme = { 'tcp:': 'mqtt:', 'mqtt:': 'mqtt:', 'ssl:': 'mqtts:', 'mqtts:': 'mqtts:' }[u.protocol];
  if (!scheme) throw new Error(`broker ${url}: want tcp://, mqtt://, mqtts:// or ssl://, not ${u.protocol}//`);
  return `${scheme}//${u.host}`;
}

// fromMqttBroker returns the broker settings that b, a Node-RED
// mqtt-broker configuration node (its runtime node), connects with: its
// URL (built from its broker, port and TLS choice), its user name and
// password, and the TLS options its tls-config node gave it (CA,
// certificate, key, passphrase, server name, ALPN, and whether the
// broker's certificate is verified), as GatewayConnection takes them
// (broker, username, password, tls, via). Only those: the connection is
// still this package's own, with its own client id, clean session, QoS 1
// and subscriptions, not b's (see the help of fencegate-gateway).
function fromMqttBroker(b, label) {
  const via = `mqtt-broker node ${JSON.stringify(label)}`;
  const url = String(b.brokerurl || '');
  let u;
  try {
    u = new URL(url);
  } catch (e) {
    throw new Error(`${via}: its broker ${JSON.stringify(url)} is not a URL`);
  }
  if (u.protocol === 'ws:' || u.protocol === 'wss:') {
    throw new Error(`${via} connects over WebSocket (${url}), which the fencegate nodes do not: give it the broker's MQTT port (TCP or TLS), or set the broker in this configuration instead`);
  }
  const o = b.options || {};
  const tls = {};
  for (const k of ['ca', 'cert', 'key', 'passphrase', 'servername', 'ALPNProtocols', 'rejectUnauthorized']) {
    if (o[k] !== undefined) tls[k] = o[k];
  }
  return { broker: url, username: o.username || '', password: o.password || '', tls, via };
}

function readFile(what, path) {
  try {
    return fs.readFileSync(path);
  } catch (e) {
    throw new Error(`cannot read the ${what} file ${path}: ${e.code === 'ENOENT' ? 'no such file' : e.message}`);
  }
}

// GatewayConnection emits 'problem' (text) when the broker cannot be
// reached or refuses this connection, 'ready' when it is connected and
// subscribed, 'state' (a parsed retained state) and 'status' (the
// gateway's online/offline).
class GatewayConnection extends EventEmitter {
  // o: broker, prefix, gateway, clientId, username, password, ca, cert,
  // key (file paths) or tls (TLS options as MQTT.js takes them, in their
  // place), via (where the broker settings come from, for messages: an
  // mqtt-broker node), signer and signingKey (a KeyObject) to sign with.
  constructor(o) {
    super();
    this.setMaxListeners(0); // one listener set per fenced output
    if (!wire.NAME.test(o.gateway || '')) throw new Error(`gateway id ${JSON.stringify(o.gateway || '')} is not a name of 1 to 64 letters, digits, _ or -`);
    this.url = brokerURL(o.broker);
    this.gateway = o.gateway;
    this.topics = wire.topics(o.prefix || wire.DEFAULT_PREFIX, o.gateway);
    this.clientId = o.clientId || `nodered-${o.gateway}-${crypto.randomBytes(5).toString('hex')}`;
    // Before anything is sent: a reply topic a broker refuses would cost
    // the gateway its connection when it answers there (a TopicError).
    this.reply = this.topics.reply(o.username, this.clientId);
    if ((o.signer && !o.signingKey) || (!o.signer && o.signingKey)) {
      throw new Error(o.signer ? `signer ${JSON.stringify(o.signer)} is set but there is no signing key: paste the PATH.key of gateway keygen` :
        'a signing key is set but no signer: name the controller as the gateway\'s configuration does (controllers: name)');
    }
    this.signer = o.signer || '';
    this.signingKey = o.signingKey;
    this.options = {
      clientId: this.clientId, clean: true, protocolVersion: 4, reconnectPeriod: 2000, connectTimeout: 5000,
      resubscribe: false, // subscribed again, and waited for, on every connect
      username: o.username || undefined, password: o.password || undefined,
    };
    this.via = o.via || '';
    if (o.tls) {
      Object.assign(this.options, o.tls);
    } else {
      if (o.ca) this.options.ca = readFile('CA', o.ca);
      if (o.cert) this.options.cert = readFile('client certificate', o.cert);
      if (o.key) this.options.key = readFile('client key', o.key);
      if (!!o.cert !== !!o.key) throw new Error('a client certificate and its key go together: give both files or neither');
    }
    this.ids = 0;
    this.idPrefix = `${this.clientId}-${Date.now() % 100000}-`;
    this.ready = false;
    this.problem = '';
    this.status = '';
    this.states = new Map(); // actuator -> parsed retained state
    this.waiting = new Set(); // commands waiting for their answer
    this.unacked = new Map(); // a command's publish the broker has not acknowledged (its callback) -> its MQTT message id, once known
    this.closed = false;
  }

  // start connects; it returns at once (see 'ready' and 'problem').
  start() {
    if (this.client) return;
    this.client = mqtt.connect(this.url, this.options);
    this.client.on('connect', () => this.subscribe());
    this.client.on('message', (topic, payload, packet) => this.receive(topic, payload, packet));
    this.client.on('error', (err) => this.setProblem(this.explainError(err)));
    this.client.on('close', () => {
      this.learnIds(); // before a reconnect's replay hides the callbacks
      if (this.ready) this.setProblem(`lost the connection to the broker ${explain.hostPort(this.url)}; reconnecting`);
      this.ready = false;
    });
  }

  explainError(err) {
    const rc = err && err.code;
    const at = explain.hostPort(this.url);
    const of = this.via ? ` of ${this.via}` : '';
    if (rc === 4 || rc === 134) return `the broker ${at} refused the user name or password${of}`;
    if (rc === 5 || rc === 135) return `the broker ${at} refused this connection: not authorized (the user name, password or client certificate${of})`;
    return `broker unreachable: ${explain.network(this.url, err, 'the MQTT broker')}${this.via ? ` (the broker settings${of})` : ''}`;
  }

  setProblem(text) {
    if (this.closed) return;
    this.problem = text;
    this.emit('problem', text);
  }

  subscribe() {
    const subs = { [this.reply]: { qos: 1 }, [this.topics.stateFilter]: { qos: 1 }, [this.topics.status]: { qos: 1 } };
    this.client.subscribe(subs, (err, granted) => {
      if (this.closed) return;
      const refused = (granted || []).filter((g) => g.qos === 128).map((g) => g.topic);
      if (err || refused.length) {
        this.setProblem(err ? `subscribe: ${err.message}` : `the broker refused the subscription to ${refused.join(', ')} (an ACL?)`);
        return;
      }
      this.ready = true;
      this.problem = '';
      this.emit('ready');
      this.retryAll(); // answers published while this connection was away are lost
    });
  }

  receive(topic, payload, packet) {
    if (topic === this.topics.status) {
      const s = payload.toString('utf8');
      // The gateway came online just now: commands published while it was
      // away may have been dropped. A retained status tells how it is, not
      // that it changed.
      if (s === 'online' && this.status !== s && !packet.retain) this.retryAll();
      this.status = s;
      this.emit('status', s);
      return;
    }
    if (topic === this.reply) {
      const a = wire.parseAnswer(payload);
      if (!a) return;
      for (const w of this.waiting) {
        if (wire.answers(w.command, a)) {
          w.answered(a);
          return;
        }
      }
      return;
    }
    const actuator = this.topics.stateActuator(topic);
    if (actuator) {
      const s = wire.parseState(payload);
      if (s && s.actuator === actuator) {
        this.states.set(actuator, s);
        this.emit('state', s);
      }
    }
  }

  retryAll() {
    for (const w of this.waiting) w.retry();
  }

  // whenReady resolves once the connection is subscribed; signal aborts.
  whenReady(signal) {
    if (this.ready) return Promise.resolve();
    return this.waitFor('ready', () => this.ready, signal);
  }

  // waitState resolves with actuator's retained state once it satisfies
  // ok (any, if ok is not given). It rejects with a TimeoutError after
  // timeoutMs (0: never), or when signal aborts.
  waitState(actuator, ok, { timeoutMs = 0, signal } = {}) {
    const good = () => {
      const s = this.states.get(actuator);
      return s && (!ok || ok(s)) ? s : undefined;
    };
    return this.waitFor('state', good, signal, timeoutMs).then(() => good());
  }

  waitFor(event, check, signal, timeoutMs = 0) {
    return new Promise((resolve, reject) => {
      if (check()) {
        resolve();
        return;
      }
      let timer;
      const finish = (err) => {
        this.off(event, onEvent);
        if (signal) signal.removeEventListener('abort', onAbort);
        clearTimeout(timer);
        if (err) reject(err);
        else resolve();
      };
      const onEvent = () => check() && finish();
      const onAbort = () => finish(abortError());
      this.on(event, onEvent);
      if (signal) {
        if (signal.aborted) return finish(abortError());
        signal.addEventListener('abort', onAbort, { once: true });
      }
      if (timeoutMs > 0) timer = setTimeout(() => finish(new TimeoutError(`no ${event} within ${timeoutMs / 1000}s`)), timeoutMs);
    });
  }

  // prepare returns command c normalized (wire.normalize; it throws a
  // wire.CommandError for a command that must not be sent, its payload
  // over the gateway's limit too), with an id (a unique one if c has
  // none), signed if this connection signs.
  prepare(c) {
    let n = wire.normalize({ ...c, id: c.id || this.idPrefix + ++this.ids });
    if (this.signingKey) n = sign.sign(this.signingKey, this.signer, this.gateway, n);
    wire.encodeChecked(n, this.reply);
    return n;
  }

  // send publishes command n (as prepare returns it; QoS 1, not retained)
  // and resolves with its answer. The first publish happens before send
  // returns. Until the answer comes it publishes the command again,
  // unchanged, after 1 s, the wait doubling up to 8 s, and at once when the
  // gateway comes online or this connection has reconnected, as long as
  // mayResend() says so; it rejects with a TimeoutError after timeoutMs.
  //
  // MQTT.js keeps every QoS 1 publish the broker has not acknowledged and
  // publishes it again on each reconnect, asking no one. So when the
  // command is given up (answered, timed out, closed), when mayResend()
  // says no, or when withdraw (an AbortSignal: its lease is lost) aborts,
  // its unacknowledged publishes are taken out of MQTT.js's store: a
  // command is never published after its lease is lost. The answer is
  // still awaited after withdraw: a publish that went out may be decided.
  send(n, { timeoutMs = 30000, mayResend = () => true, withdraw } = {}) {
    let payload;
    try {
      payload = wire.encodeChecked(n, this.reply);
    } catch (e) {
      return Promise.reject(e);
    }
    const topic = this.topics.set(n.actuator);
    return new Promise((resolve, reject) => {
      let interval = RESEND_MS;
      let timer;
      let withdrawn = false;
      const w = { command: n };
      const pending = new Set(); // this command's publishes not yet acknowledged (their callbacks)
      const allowed = () => !withdrawn && mayResend();
      const takeBack = () => {
        clearTimeout(timer);
        this.withdraw(pending);
      };
      const publish = () => {
        if (this.ready) this.publishOnce(topic, payload, pending);
      };
      const schedule = () => {
        clearTimeout(timer);
        timer = setTimeout(() => {
          interval = Math.min(2 * interval, MAX_RESEND_MS);
          if (!allowed()) {
            takeBack();
            return;
          }
          publish();
          schedule();
        }, interval);
      };
      const onWithdraw = () => {
        withdrawn = true;
        takeBack();
      };
      const finish = () => {
        this.waiting.delete(w);
        clearTimeout(deadline);
        if (withdraw) withdraw.removeEventListener('abort', onWithdraw);
        takeBack();
      };
      w.answered = (a) => {
        finish();
        resolve(a);
      };
      w.closed = () => {
        finish();
        reject(new ClosedError(`the connection to gateway ${this.gateway} was closed before the answer came`));
      };
      w.retry = () => {
        if (!allowed()) {
          takeBack();
          return;
        }
        interval = RESEND_MS;
        publish();
        schedule();
      };
      const deadline = setTimeout(() => {
        finish();
        reject(new TimeoutError(this.unanswered(timeoutMs)));
      }, timeoutMs);
      this.waiting.add(w);
      if (withdraw) {
        if (withdraw.aborted) withdrawn = true;
        else withdraw.addEventListener('abort', onWithdraw, { once: true });
      }
      if (!withdrawn) {
        publish();
        schedule();
      }
    });
  }

  // publishOnce publishes a command's payload (QoS 1, not retained) and
  // keeps the publish, by its callback, in pending and this.unacked until
  // the broker acknowledges it (or it is withdrawn).
  publishOnce(topic, payload, pending) {
    const done = () => {
      pending.delete(done);
      this.unacked.delete(done);
    };
    pending.add(done);
    this.unacked.set(done, undefined);
    this.client.publish(topic, payload, { qos: 1, retain: false }, done);
    this.learnIds();
  }

  // learnIds finds the MQTT message ids of the unacknowledged publishes
  // in MQTT.js's outgoing table, by their callbacks: MQTT.js gives the id
  // only there, and replaces the callbacks there when it replays its store
  // on a reconnect. (A publish MQTT.js holds back while it replays has no
  // id yet.)
  learnIds() {
    const c = this.client;
    if (!c || ![...this.unacked.values()].includes(undefined)) return;
    for (const id of Object.keys(c.outgoing || {})) {
      const o = c.outgoing[id];
      if (o && this.unacked.get(o.cb) === undefined && this.unacked.has(o.cb)) this.unacked.set(o.cb, Number(id));
    }
  }

  // withdraw takes the publishes in pending out of MQTT.js: those it holds
  // unacknowledged in its outgoing store (which it would publish again on
  // reconnect) and those it holds back while it replays its store.
  withdraw(pending) {
    const c = this.client;
    if (!c || pending.size === 0) return;
    this.learnIds();
    for (const cb of [...pending]) {
      const id = this.unacked.get(cb);
      if (id !== undefined && c.outgoing && c.outgoing[id]) c.removeOutgoingMessage(id); // calls cb
    }
    const q = c._storeProcessingQueue;
    if (Array.isArray(q)) {
      for (let i = q.length - 1; i >= 0; i--) {
        if (pending.has(q[i].callback)) {
          const [e] = q.splice(i, 1);
          e.callback(new Error('withdrawn'));
        }
      }
    }
    for (const cb of pending) this.unacked.delete(cb); // acknowledged meanwhile, or gone with a closed client
    pending.clear();
  }

  // unanswered says why a command may have gone unanswered: while the
  // gateway says it is online, likely a broker ACL that drops the answers
  // on their way to the reply topic (as client/send.go says it).
  unanswered(timeoutMs) {
    let s = `no answer from the gateway ${this.gateway} within ${timeoutMs / 1000}s`;
    if (!this.ready) return `${s}: not connected to the broker (${this.problem || 'connecting'})`;
    if (this.status === 'online') {
      s += `, which is online, on reply topic ${this.reply}: if the broker has an ACL, it must let the gateway write ${this.topics.replyBase}# and this controller read its reply topic (docs/security.md, Broker ACLs)`;
    } else {
      s += `: its status is ${this.status ? JSON.stringify(this.status) : 'unknown'} (is the gateway running, with this id and topic prefix?)`;
    }
    return s;
  }

  // close disconnects; sends still waiting for their answers end with a
  // ClosedError.
  close() {
    return new Promise((resolve) => {
      this.closed = true;
      for (const w of this.waiting) w.closed();
      if (!this.client) return resolve();
      this.client.end(true, {}, () => resolve());
    });
  }
}

function abortError() {
  const e = new Error('aborted');
  e.name = 'AbortError';
  return e;
}

module.exports = { GatewayConnection, TimeoutError, ClosedError, brokerURL, fromMqttBroker };
