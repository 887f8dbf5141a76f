#!/usr/bin/env node
'use strict';

// The Node-RED conformance driver (conformance/README.md, "The drivers"):
// a flow of a gateway configuration and one fenced output, in a Node-RED
// runtime (node-red-node-test-helper's), that sends one message and writes
// the node's grant and answer as JSON lines. The node raises the fence
// (a fence-only command) before the message:
//
//   node test/conformance-driver.js --broker URL --gateway ID --etcd URL
//     --actuator NAME --holder NAME --id ID --ttl SECONDS [--timeout SECONDS]
//     [--stop-after-grant | --stop-under-lease] [--signer NAME --key PATH.key] on|off
//
// --stop-after-grant: the pause test's paused controller. The node raises
// the fence under its new lease and checks the lease for the message's
// command; then the process stops itself (SIGSTOP), between the node's
// last lease check and the publish (a test hook of the node, which no flow
// reaches). Once continued, it publishes under the token it had, whatever
// became of the lease: the gateway must refuse it (stale).
//
// --stop-under-lease: the process stops itself right after the grant,
// before the node's lease checks. Once continued, the message goes
// through the node's lease guard: if the lease was lost meanwhile, nothing
// is published (not under that token, nor any new one), the driver writes
// {"event":"lost","token":"<the lost token>","reason":"<why>"} and exits
// 8; if the lease is still held, it is sent as usual.
//
// The driver sends one command: the node publishes the fence-only
// command of its first lease and the message's command, and nothing
// after these (not the fence of a lease it takes by itself later).
//
// Exit status, as gateway send's: 0 applied or duplicate, 3 stale (also
// when the fence is above every revision etcd has issued: the node
// stopped, and stderr says so), 4 rejected, 5 failed, 6 no answer within
// --timeout (stderr says why: the gateway offline, say), 7 applied or
// duplicate but the output is not as asked, 8 the lease was lost before
// the message was sent (nothing was sent), 1 anything else (with one line
// on stderr).

const fs = require('node:fs');
const path = require('node:path');

// stdout carries the events alone: Node-RED's log goes to stderr.
for (const k of ['log', 'info', 'warn', 'error', 'debug']) {
  console[k] = (...a) => process.stderr.write(a.map(String).join(' ') + '\n');
}

function event(e) {
  fs.writeSync(1, JSON.stringify(e) + '\n'); // at once, before a SIGSTOP
}

function fail(text) {
  process.stderr.write(`conformance-driver: ${text}\n`);
  process.exit(1);
}

const USAGE = 'usage: conformance-driver.js --broker URL --gateway ID --etcd URL --actuator NAME --holder NAME --id ID --ttl SECONDS [--timeout SECONDS] [--stop-after-grant | --stop-under-lease] [--signer NAME --key PATH.key] on|off';

function parseArgs(argv) {
  const o = { timeout: 30, stopAfterGrant: false, stopUnderLease: false };
  const valued = { '--broker': 'broker', '--gateway': 'gateway', '--etcd': 'etcd', '--actuator': 'actuator', '--holder': 'holder',
    '--id': 'id', '--ttl': 'ttl', '--timeout': 'timeout', '--signer': 'signer', '--key': 'key' };
  const rest = [];
  for (let i = 0; i < argv.length; i++) {
    let a = argv[i];
    let v;
    if (a.startsWith('--') && a.includes('=')) [a, v] = [a.slice(0, a.indexOf('=')), a.slice(a.indexOf('=') + 1)];
    if (a === '--stop-after-grant') o.stopAfterGrant = true;
    else if (a === '--stop-under-lease') o.stopUnderLease = true;
    else if (valued[a]) {
      if (v === undefined) {
        if (i + 1 >= argv.length) fail(`${a} needs a value; ${USAGE}`);
        v = argv[++i];
      }
      o[valued[a]] = v;
    } else if (a.startsWith('-')) fail(`unknown flag ${a}; ${USAGE}`);
    else rest.push(a);
  }
  for (const k of ['broker', 'gateway', 'etcd', 'actuator']) if (!o[k]) fail(`--${k} is required; ${USAGE}`);
  if (rest.length !== 1 || !['on', 'off'].includes(rest[0])) fail(`want one state, on or off, after the flags; ${USAGE}`);
  o.state = rest[0];
  for (const k of ['ttl', 'timeout']) {
    if (o[k] !== undefined && !(Number(o[k]) > 0)) fail(`--${k} ${o[k]}: want a number of seconds above 0`);
  }
  if (!!o.signer !== !!o.key) fail('--signer and --key go together');
  if (o.stopAfterGrant && o.stopUnderLease) fail('--stop-after-grant and --stop-under-lease: one or the other');
  return o;
}

const EXIT = { applied: 0, duplicate: 0, stale: 3, rejected: 4, failed: 5, timeout: 6 };
const EXIT_OUTPUT = 7;
const EXIT_LOST = 8;

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const helper = require('node-red-node-test-helper');
  helper.init(require.resolve('node-red'));
  const nodes = [require('../nodes/fencegate-gateway'), require('../nodes/fencegate-out')];
  const flow = [
    { id: 'driver-tab', type: 'tab', label: 'conformance driver' },
    { id: 'driver-gateway', type: 'fencegate-gateway', broker: o.broker, gatewayId: o.gateway, prefix: 'fencegate',
      etcd: o.etcd, ttl: Number(o.ttl) || 10, signer: o.signer || '' },
    { id: 'driver-out', z: 'driver-tab', type: 'fencegate-out', gateway: 'driver-gateway', actuator: o.actuator,
      // The message waits as long as the driver does: for the lock, then
      // for the fence-only command's answer.
      holder: o.holder || '', timeout: Number(o.timeout), maxAge: 2 * Number(o.timeout) + 5, wires: [['driver-answers']] },
    { id: 'driver-answers', z: 'driver-tab', type: 'helper' },
  ];
  const credentials = o.key ? { 'driver-gateway': { signingKey: readKey(o.key) } } : {};

  let finishing = null; // the exit code, once finishing
  const finish = async (code, why) => {
    if (finishing !== null) return;
    finishing = code;
    if (why) process.stderr.write(`conformance-driver: ${why}\n`);
    // Closing the flow releases the lease (unlock and revoke).
    await Promise.race([helper.unload(), new Promise((r) => setTimeout(r, 8000))]).catch(() => {});
    process.exit(code);
  };

  await helper.load(nodes, flow, credentials);
  const out = helper.getNode('driver-out');
  if (!out) return finish(1, 'the fenced output did not start');
  let lastStatus = '';
  out.on('call:status', (call) => {
    lastStatus = call.args[0] && call.args[0].text;
  });
  let ahead = null;
  out.on('call:error', (call) => {
    // An error about the message itself (refused before sending, say).
    if (!call.args[1]) return;
    const e = call.args[0];
    if (e && e.name === 'AheadError') ahead = e; // the node stopped; the message follows, with the stale answer
    else finish(1, String(e && e.message ? e.message : e));
  });
  let granted = '';
  let stopBeforePublish = false;
  let sent = false; // the message's command was published
  const waitForGrant = setTimeout(() => finish(1, `no lease of ${o.actuator}'s scope within ${o.timeout}s (${lastStatus || 'no status'})`),
    Number(o.timeout) * 1000);
  out.afterGrant = (g) => {
    if (granted) return; // a later grant is the node's own business
    granted = g.token;
    clearTimeout(waitForGrant);
    event({ event: 'granted', token: g.token, scope: g.scope });
    if (o.stopUnderLease) process.kill(process.pid, 'SIGSTOP');
    if (o.stopAfterGrant) stopBeforePublish = true;
  };
  out.beforePublish = (c) => {
    if (sent || c.token !== granted || finishing !== null) return false; // one command, under the first lease
    if (c.seq === '0') return true; // the fence-only command
    sent = true;
    if (stopBeforePublish) process.kill(process.pid, 'SIGSTOP');
    return true;
  };
  helper.getNode('driver-answers').on('input', (msg) => {
    if (msg.outcome === 'lease-lost') {
      event({ event: 'lost', token: msg.token, reason: msg.error });
      finish(EXIT_LOST);
      return;
    }
    if (msg.outcome === 'timeout') {
      finish(EXIT.timeout, msg.error);
      return;
    }
    if (msg.outcome in EXIT) {
      const a = msg.answer;
      event({ event: 'answer', outcome: a.outcome, reason: a.reason, fence: a.fence, state: a.state });
      if (a.outcome === 'stale' && msg.reread) event({ event: 'reread', state: msg.reread.state, fence: msg.reread.fence });
      if (a.outcome === 'stale' && !msg.reread) finish(1, 'no state as new as the stale answer\'s fence came from the gateway');
      else if (ahead) finish(EXIT.stale, ahead.message);
      else if (EXIT[a.outcome] === 0 && (msg.state !== o.state || (msg.actual && msg.actual !== o.state))) {
        finish(EXIT_OUTPUT, `${a.outcome}, but ${o.actuator} is ${msg.state}${msg.actual ? ` (reads back ${msg.actual})` : ''}, not ${o.state} as asked`);
      } else finish(EXIT[a.outcome]);
      return;
    }
    finish(1, `${msg.outcome}${msg.error ? `: ${msg.error}` : ''}`);
  });
  out.receive({ payload: o.state, commandId: o.id || undefined });
}

function readKey(file) {
  try {
    return fs.readFileSync(path.resolve(file), 'utf8');
  } catch (e) {
    return fail(`--key ${file}: ${e.message}`);
  }
}

process.on('unhandledRejection', (e) => fail(e && e.message ? e.message : String(e)));
main().catch((e) => fail(e && e.message ? e.message : String(e)));
