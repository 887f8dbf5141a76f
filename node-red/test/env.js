'use strict';

// What the integration tests share: the services the Go harness started
// (FENCEGATE_TEST_*), flows of a gateway configuration and fenced outputs,
// and waits for a node's output and status.

const crypto = require('node:crypto');
const fs = require('node:fs');
const net = require('node:net');

const env = {
  broker: process.env.FENCEGATE_TEST_BROKER,
  etcd: process.env.FENCEGATE_TEST_ETCD,
  gateway: process.env.FENCEGATE_TEST_GATEWAY,
  keyFile: process.env.FENCEGATE_TEST_KEY,
  gatewayBin: process.env.FENCEGATE_TEST_GATEWAY_BIN,
};

// unique returns a name unique to this run.
function unique(what) {
  return `${what}-${crypto.randomBytes(4).toString('hex')}`;
}

// flow returns a flow (a tab) of one gateway configuration (id cfg) and,
// for each of outs ({id, actuator, holder, timeout, maxAge}), a fenced output wired to a
// helper node <id>-out. o overrides the configuration's properties (its id
// too).
function flow(outs, o = {}, tab = 'tab1') {
  const nodes = [{ id: tab, type: 'tab', label: tab }, {
    id: 'cfg', type: 'fencegate-gateway', broker: env.broker, gatewayId: env.gateway, prefix: 'fencegate',
    etcd: env.etcd, ttl: 5, signer: '', ...o,
  }];
  for (const x of outs) {
    nodes.push({ id: x.id, z: tab, type: 'fencegate-out', gateway: nodes[1].id, actuator: x.actuator, holder: x.holder || unique('nr'),
      timeout: x.timeout || 20, maxAge: x.maxAge || 0, wires: [[`${x.id}-out`]] });
    nodes.push({ id: `${x.id}-out`, z: tab, type: 'helper' });
  }
  return nodes;
}

function signingKey() {
  return fs.readFileSync(env.keyFile, 'utf8');
}

// nextOutput resolves with the next message the helper node receives.
function nextOutput(helperNode, timeoutMs = 20000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no output from ${helperNode.id} within ${timeoutMs} ms`)), timeoutMs);
    helperNode.once('input', (msg) => {
      clearTimeout(t);
      resolve(msg);
    });
  });
}

// statusMatching resolves with the first status of node (already shown, or
// later) whose text matches re.
function statusMatching(node, re, timeoutMs = 20000) {
  // node.status is the helper's spy, shared by every node: its calls are
  // told apart by their this.
  const last = () => {
    const calls = node.status.getCalls().filter((c) => c.thisValue === node);
    return calls.length ? calls[calls.length - 1].args[0] : undefined;
  };
  return new Promise((resolve, reject) => {
    const now = last();
    if (now && re.test(now.text)) return resolve(now);
    const t = setTimeout(() => {
      node.off('call:status', on);
      reject(new Error(`no status of ${node.id} matching ${re} within ${timeoutMs} ms; last: ${JSON.stringify(last())}`));
    }, timeoutMs);
    const on = (call) => {
      if (re.test(call.args[0].text)) {
        clearTimeout(t);
        node.off('call:status', on);
        resolve(call.args[0]);
      }
    };
    node.on('call:status', on);
  });
}

// locks returns the lock keys under /fencegate/locks/ in etcd.
async function locks() {
  const b64 = (s) => Buffer.from(s).toString('base64');
  const res = await fetch(env.etcd + '/v3/kv/range', {
    method: 'POST', body: JSON.stringify({ key: b64('/fencegate/locks/'), range_end: b64('/fencegate/locks0'), keys_only: true }),
  });
  const r = await res.json();
  return (r.kvs || []).map((kv) => Buffer.from(kv.key, 'base64').toString());
}

// freePort returns a local TCP port that nothing listens on.
function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

module.exports = { env, unique, flow, signingKey, nextOutput, statusMatching, locks, freePort, sleep };
