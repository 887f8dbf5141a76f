'use strict';

// fencegate-out: a fenced output for one actuator. It takes the lease of
// the actuator's fence scope from etcd (waiting in the lock's queue: a
// second Node-RED, or any other controller of the scope, is a standby),
// keeps it alive, and while it holds it sends each message as a command
// under the lease's token, with the next seq. See ../README.md.

const os = require('node:os');
const wire = require('../lib/wire');
const leases = require('../lib/lease');
const { TimeoutError } = require('../lib/connection');

const REREAD_MS = 5000; // how long a stale answer's reread waits for a state as new as its fence
const MAX_BACKOFF_MS = 10000;

// command reads msg.payload: "on", "off", true, false, {pulse: ms} or
// "reset" (a fence-only command that releases a tripped scope). It throws
// for anything else.
function command(payload) {
  if (payload === true || payload === 'on') return { state: 'on' };
  if (payload === false || payload === 'off') return { state: 'off' };
  if (payload === 'reset') return { reset: true };
  if (payload && typeof payload === 'object' && !Array.isArray(payload) && 'pulse' in payload) {
    const ms = Number(payload.pulse);
    if (!Number.isInteger(ms) || ms < 1 || ms > wire.MAX_PULSE_MS) {
      throw new Error(`msg.payload.pulse must be whole milliseconds from 1 to ${wire.MAX_PULSE_MS}, got ${JSON.stringify(payload.pulse)}`);
    }
    return { pulse_ms: ms };
  }
  let shown;
  try {
    shown = JSON.stringify(payload);
  } catch (e) {
    shown = String(payload);
  }
  throw new Error(`msg.payload must be "on", "off", true, false, {"pulse": ms} or "reset", got ${shown === undefined ? 'nothing' : shown}`);
}

module.exports = function (RED) {
  function FencegateOutNode(n) {
    RED.nodes.createNode(this, n);
    const node = this;
    node.actuator = (n.actuator || '').trim();
    node.holder = (n.holder || '').trim() || `node-red@${os.hostname()}`;
    node.timeoutMs = (Number(n.timeout) > 0 ? Number(n.timeout) : 30) * 1000;
    // afterGrant, if a test sets it, is called with {token, scope, key,
    // lease} (the lock key, the etcd lease id) after each grant, before the
    // first command under it. Undefined in production.
    node.afterGrant = undefined;

    const config = RED.nodes.getNode(n.gateway);
    const queue = []; // messages not yet sent: {msg, send, done, cmd}
    const stop = new AbortController(); // aborted on close
    let lease = null; // the lease held, while commands may be sent under it
    let scope = '';
    let seq = 0n;
    let busy = false; // a command is waiting for its answer
    let endLease = null; // resolves the current holding's wait: why it ended
    let lastStatus = { fill: 'grey', shape: 'ring', text: 'starting' };
    let ahead = ''; // a fence no lease from this etcd can pass, until a command passes

    const status = (fill, shape, text) => {
      lastStatus = { fill, shape, text };
      node.status(lastStatus);
    };

    if (!config) {
      node.status({ fill: 'red', shape: 'ring', text: 'no gateway configured' });
      node.on('input', (msg, send, done) => done(new Error('no fencegate-gateway configuration selected')));
      return;
    }
    if (!wire.NAME.test(node.actuator)) {
      node.status({ fill: 'red', shape: 'ring', text: 'no actuator' });
      node.on('input', (msg, send, done) => done(new Error(`actuator ${JSON.stringify(node.actuator)} is not a name of 1 to 64 letters, digits, _ or -`)));
      return;
    }
    if (config.configError) {
      node.status({ fill: 'red', shape: 'ring', text: config.configError });
      node.on('input', (msg, send, done) => done(new Error(config.configError)));
      return;
    }
    const conn = config.connection;
    config.register(node);

    // The broker's troubles take the status while they last.
    const onProblem = (text) => node.status({ fill: 'red', shape: 'ring', text });
    const onReady = () => node.status(lastStatus);
    conn.on('problem', onProblem);
    conn.on('ready', onReady);

    const out = (item, fields) => {
      Object.assign(item.msg, { actuator: node.actuator, scope }, fields);
      item.send(item.msg);
      item.done();
    };

    // supersede emits every queued message but the newest: only the newest
    // is sent once a lease is granted.
    const supersede = () => {
      while (queue.length > 1) {
        out(queue.shift(), { outcome: 'superseded' });
      }
    };

    node.on('input', (msg, send, done) => {
      let cmd;
      try {
        cmd = command(msg.payload);
      } catch (e) {
        done(e);
        return;
      }
      queue.push({ msg, send, done, cmd });
      if (!lease) supersede();
      pump();
    });

    // pump sends the next queued message if a lease is held and no command
    // waits for its answer. Until the command is published it runs without
    // a pause (no await): a test that stops the process in afterGrant sees
    // the command go out at once when it continues.
    function pump(afterGrant) {
      if (busy || !lease || queue.length === 0 || stop.signal.aborted) return;
      if (lease.lost && !afterGrant) return;
      const item = queue.shift();
      const held = lease;
      let c;
      try {
        c = conn.prepare({
          actuator: node.actuator, id: typeof item.msg.commandId === 'string' ? item.msg.commandId : '',
          token: held.token, seq, holder: node.holder, ...item.cmd,
        });
      } catch (e) {
        item.done(e);
        pump();
        return;
      }
      seq++;
      busy = true;
      const asked = c.pulseMs > 0n ? `pulse ${c.pulseMs} ms` : c.reset ? 'reset' : c.state;
      status('green', 'ring', `token ${held.token}: sending ${asked}`);
      conn.send(c, { timeoutMs: node.timeoutMs, mayResend: () => lease === held && !held.lost && !stop.signal.aborted })
        .then((a) => answered(item, c, held, a), (e) => unanswered(item, c, e))
        .catch((e) => node.error(`${node.actuator}: ${e.message}`, item.msg))
        .finally(() => {
          busy = false;
          pump();
        });
    }

    async function answered(item, c, held, a) {
      const fields = {
        outcome: a.outcome, reason: a.reason, fence: wire.pairString(a.fence), state: a.state, token: String(c.token),
        answer: { outcome: a.outcome, reason: a.reason, fence: wire.pairString(a.fence), state: a.state, error: a.error },
      };
      if (a.actual) fields.actual = a.actual;
      if (a.pulse) fields.pulse = a.pulse;
      if (a.error) fields.error = a.error;
      switch (wire.decide(c, a).action) {
        case 'done': {
          ahead = '';
          const what = c.pulseMs > 0n ? `pulse ${c.pulseMs} ms` : c.reset ? 'reset' : `${a.state || c.state || 'fence only'}`;
          status('green', 'dot', `token ${c.token}: ${a.outcome} ${what}`);
          out(item, fields);
          return;
        }
        case 'reread': {
          // Taken, but the output is otherwise now (a later command, the
          // boot rule at a restart, a failed drive): say so; a new message
          // sets it again.
          const now = a.actual && a.actual !== a.state ? `recorded ${a.state}, reads back ${a.actual}` : a.state;
          status('yellow', 'dot', `token ${c.token}: ${a.outcome}, but ${node.actuator} is ${now}`);
          node.warn(`${node.actuator}: ${a.outcome}, but it is ${now} now, not ${c.state} as asked; send the message again to set it`);
          out(item, fields);
          return;
        }
        case 'reacquire': {
          // Stop acting under this token now; the answer goes out once
          // the state is reread, and the lease is acquired again.
          if (lease === held && endLease) endLease('stale');
          status('red', 'ring', `stale: fence ${a.fence.token}${a.state ? ` (${a.state})` : ''}`);
          let reread;
          try {
            reread = await conn.waitState(node.actuator, (s) => wire.comparePairs(s.fence, a.fence) >= 0, { timeoutMs: REREAD_MS, signal: stop.signal });
          } catch (e) {
            reread = undefined;
          }
          if (reread) {
            fields.state = reread.state;
            fields.reread = { state: reread.state, fence: wire.pairString(reread.fence) };
          }
          out(item, fields);
          await aheadOfEtcd(a.fence.token);
          return;
        }
        case 'report':
          status('red', 'ring', `${a.outcome}: ${a.reason || a.error}`);
          node.warn(`${node.actuator}: command ${a.outcome} (${a.reason}): ${a.error}`);
          out(item, fields);
          return;
        default: // retry-later: failed
          status('red', 'ring', `${a.outcome}: ${a.error || 'no reason given'}`);
          node.warn(`${node.actuator}: command ${a.outcome}: ${a.error}`);
          out(item, fields);
      }
    }

    // aheadOfEtcd says so when a stale answer's fence is above every
    // revision etcd has issued: no lease from this etcd can pass it
    // (tokens typed by hand, another lease service, or an etcd restored
    // from an older backup; see docs/controllers.md, "Restoring etcd").
    async function aheadOfEtcd(fenceToken) {
      let rev;
      try {
        rev = await leases.revision(config.etcd);
      } catch (e) {
        return; // etcd's trouble shows when the lease is requested
      }
      if (fenceToken > rev) {
        const text = `the fence's token ${fenceToken} is above every revision etcd has issued (${rev}): no lease from this etcd can pass it`;
        node.error(`${node.actuator}: ${text}. The fence's tokens were typed by hand (gateway send --token), came from another lease service, or etcd was restored from an older backup (docs/controllers.md, "Restoring etcd")`);
        ahead = text;
        status('red', 'ring', text);
      }
    }

    function unanswered(item, c, e) {
      if (stop.signal.aborted) {
        item.done(); // closed while it waited: its answer is nobody's now
        return;
      }
      const text = e instanceof TimeoutError ? e.message : `cannot send: ${e.message}`;
      status('red', 'ring', text);
      node.warn(`${node.actuator}: ${text}`);
      out(item, { outcome: 'timeout', error: text, token: String(c.token) });
    }

    // run learns the scope, then holds the scope's lease, again and again,
    // until the node closes.
    async function run() {
      status('grey', 'ring', 'connecting to the broker');
      await conn.whenReady(stop.signal);
      status('yellow', 'ring', `waiting for the state of ${node.actuator}`);
      // The gateway retains every actuator's state: one that has not come
      // after a few seconds is likely misnamed, or the gateway is not there.
      const hint = setTimeout(() => {
        const names = [...conn.states.keys()].sort();
        status('yellow', 'ring', names.length ?
          `no actuator ${node.actuator} on gateway ${config.gatewayId}; its actuators are ${names.join(', ')}` :
          `no state of ${node.actuator} from gateway ${config.gatewayId} (is it running, with this id and topic prefix?)`);
      }, 5000);
      let s;
      try {
        s = await conn.waitState(node.actuator, (x) => x.scope !== '', { signal: stop.signal });
      } finally {
        clearTimeout(hint);
      }
      scope = s.scope;
      let backoff = 1000;
      let lastError = '';
      while (!stop.signal.aborted) {
        status('yellow', 'ring', 'waiting for lease');
        let held;
        try {
          held = await leases.acquire(config.etcd, { gateway: config.gatewayId, scope, ttl: config.ttl, signal: stop.signal });
        } catch (e) {
          if (stop.signal.aborted) return;
          const text = e.message;
          status('red', 'ring', text);
          if (text !== lastError) node.error(`${node.actuator}: lease of scope ${scope}: ${text}`);
          lastError = text;
          await sleep(backoff, stop.signal);
          backoff = Math.min(2 * backoff, MAX_BACKOFF_MS);
          continue;
        }
        backoff = 1000;
        lastError = '';
        if (stop.signal.aborted) {
          await held.release().catch(() => {});
          return;
        }
        const ended = new Promise((resolve) => {
          endLease = resolve;
        });
        held.once('lost', (why) => {
          status('red', 'ring', 'lease lost');
          node.warn(`${node.actuator}: lease of scope ${scope} lost (${why}); no command is sent under token ${held.token}`);
          if (endLease) endLease('lost');
        });
        lease = held;
        seq = 0n;
        if (ahead) status('red', 'ring', `token ${held.token}: ${ahead}`);
        else status('green', 'dot', `token ${held.token}: holding the lease`);
        if (typeof node.afterGrant === 'function') {
          node.afterGrant({ token: String(held.token), scope, key: held.key, lease: held.id });
          pump(true);
        } else {
          pump();
        }
        await Promise.race([ended, aborted(stop.signal)]);
        lease = null;
        endLease = null;
        supersede();
        await held.release().catch((e) => node.warn(`${node.actuator}: release the lease of scope ${scope}: ${e.message}`));
      }
    }

    const running = run().catch((e) => {
      if (e.name !== 'AbortError') {
        status('red', 'ring', e.message);
        node.error(`${node.actuator}: ${e.message}`);
      }
    });

    node.on('close', (removed, done) => {
      stop.abort();
      conn.off('problem', onProblem);
      conn.off('ready', onReady);
      config.deregister(node);
      for (const item of queue.splice(0)) item.done();
      const held = lease;
      lease = null;
      if (endLease) endLease('closed');
      // run() releases the lease it holds; wait for it, and at most 6 s.
      Promise.race([running, sleep(6000)])
        .then(() => (held ? held.release().catch(() => {}) : undefined))
        .then(() => done(), () => done());
    });
  }

  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const t = setTimeout(resolve, ms);
      if (signal) signal.addEventListener('abort', () => {
        clearTimeout(t);
        resolve();
      }, { once: true });
    });
  }

  function aborted(signal) {
    return new Promise((resolve) => {
      if (signal.aborted) resolve('closed');
      else signal.addEventListener('abort', () => resolve('closed'), { once: true });
    });
  }

  RED.nodes.registerType('fencegate-out', FencegateOutNode);
};

module.exports.command = command;
