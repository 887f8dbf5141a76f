'use strict';

// fencegate-out: a fenced output for one actuator. It takes the lease of
// the actuator's fence scope from etcd (waiting in the lock's queue: a
// second Node-RED, or any other controller of the scope, is a standby),
// keeps it alive, and while it holds it raises the fence (a fence-only
// command, seq 0) and then sends each message as a command under the
// lease's token, with the next seq. See ../README.md.

const os = require('node:os');
const wire = require('../lib/wire');
const leases = require('../lib/lease');
const { TimeoutError } = require('../lib/connection');

const REREAD_MS = 5000; // how long a stale answer's reread waits for a state as new as its fence
const MAX_BACKOFF_MS = 10000;

// command reads msg.payload: "on", "off", true, false, {pulse: ms},
// {duty: percent} (a set-point output; 0 is off) or "reset" (a fence-only
// command that releases a tripped scope). It throws for anything else.
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
  if (payload && typeof payload === 'object' && !Array.isArray(payload) && 'duty' in payload) {
    try {
      wire.dutyHundredths(payload.duty);
    } catch (e) {
      const str = typeof payload.duty === 'string' ? ', a number, not a string (convert it first: $number(payload.duty) in a change node)' : '';
      const shown = typeof payload.duty === 'number' && !Number.isFinite(payload.duty) ? String(payload.duty) : JSON.stringify(payload.duty);
      throw new Error(`msg.payload.duty must be percent from 0 to 100 with at most two decimals${str}, got ${shown}`);
    }
    return payload.frequency === undefined ? { duty: payload.duty } : { duty: payload.duty, frequency: payload.frequency };
  }
  let shown;
  try {
    shown = JSON.stringify(payload);
  } catch (e) {
    shown = String(payload);
  }
  throw new Error(`msg.payload must be "on", "off", true, false, {"pulse": ms}, {"duty": percent} or "reset", got ${shown === undefined ? 'nothing' : shown}`);
}

module.exports = function (RED) {
  function FencegateOutNode(n) {
    RED.nodes.createNode(this, n);
    const node = this;
    node.actuator = (n.actuator || '').trim();
    node.holder = (n.holder || '').trim() || `node-red@${os.hostname()}`;
    node.timeoutMs = (Number(n.timeout) > 0 ? Number(n.timeout) : 30) * 1000;
    node.maxAgeMs = (Number(n.maxAge) > 0 ? Number(n.maxAge) : 0) * 1000; // 0: a kept message waits as long as it takes
    // afterGrant, if a test sets it, is called with {token, scope, key,
    // lease} (the lock key, the etcd lease id) after each grant, before the
    // first command under it. Undefined in production.
    node.afterGrant = undefined;

    const config = RED.nodes.getNode(n.gateway);
    const queue = []; // messages not yet sent: {msg, send, done, cmd, at}
    const stop = new AbortController(); // aborted on close
    // lease is the lease held, while commands may be sent under it; it
    // carries fenced (its fence-only command was applied) and withdraw
    // (aborted when the holding ends: nothing is published under it after).
    let lease = null;
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
      queue.push({ msg, send, done, cmd, at: Date.now() });
      if (!lease) supersede();
      pump();
    });

    // pump raises the fence of a new lease, or sends the next queued
    // message, if a lease is held and no command waits for its answer.
    // Until the command is published it runs without a pause (no await): a
    // test that stops the process in afterGrant sees the command go out at
    // once when it continues.
    function pump(afterGrant) {
      if (busy || !lease || stop.signal.aborted) return;
      if (lease.lost && !afterGrant) return; // lost reads the lease's deadline now
      const held = lease;
      if (!held.fenced) {
        raiseFence(held, afterGrant);
        return;
      }
      if (queue.length === 0) return;
      const item = queue.shift();
      if (node.maxAgeMs > 0 && Date.now() - item.at > node.maxAgeMs) {
        out(item, { outcome: 'dropped', error: `kept ${Math.round((Date.now() - item.at) / 1000)} s waiting for the lease, longer than max age ${node.maxAgeMs / 1000} s: not sent` });
        pump();
        return;
      }
      let c;
      try {
        c = conn.prepare({
          actuator: node.actuator, id: typeof item.msg.commandId === 'string' ? item.msg.commandId : '',
          token: held.token, seq, holder: node.holder, ...item.cmd,
        });
      } catch (e) {
        status('red', 'ring', `refused before sending: ${e.message}`);
        item.done(e);
        pump();
        return;
      }
      seq++;
      busy = true;
      const asked = c.pulseMs > 0n ? `pulse ${c.pulseMs} ms` : c.duty !== undefined ? `duty ${wire.formatDuty(c.duty)}%` : c.reset ? 'reset' : c.state;
      status('green', 'ring', `token ${held.token}: sending ${asked}`);
      conn.send(c, { timeoutMs: node.timeoutMs, mayResend: () => mayResend(held), withdraw: held.withdraw.signal })
        .then((a) => answered(item, c, held, a), (e) => unanswered(item, c, e))
        .catch((e) => node.error(`${node.actuator}: ${e.message}`, item.msg))
        .finally(() => {
          busy = false;
          pump();
        });
    }

    const mayResend = (held) => lease === held && !held.lost && !stop.signal.aborted;

    // raiseFence sends the fence-only command {token, seq 0} of a new lease
    // before any message, so that the gateway refuses every older
    // holder's command, queued or late, from then on (docs/protocol.md,
    // "Raise the fence first"); the messages go from seq 1. Applied: the
    // messages go. Stale: a newer holder has the scope; the messages
    // waiting go out with that answer, unsent, and the lease is acquired
    // again, as after any stale answer. Any other answer, or none: the
    // fence is not known to be raised, the messages waiting go out with
    // that outcome, unsent, and the next message tries the fence again.
    // afterGrant (a test's pause after the grant) lets the command go out
    // even if the lease was lost meanwhile: the gateway must refuse it.
    function raiseFence(held, afterGrant) {
      let c;
      try {
        c = conn.prepare({ actuator: node.actuator, token: held.token, seq: 0n, holder: node.holder });
      } catch (e) {
        status('red', 'ring', `refused before sending: ${e.message}`);
        node.error(`${node.actuator}: the fence-only command under token ${held.token}: ${e.message}`);
        for (const item of queue.splice(0)) item.done(e);
        return;
      }
      busy = true;
      status('green', 'ring', `token ${held.token}: raising the fence`);
      conn.send(c, { timeoutMs: node.timeoutMs, mayResend: () => mayResend(held), withdraw: afterGrant ? undefined : held.withdraw.signal })
        .then((a) => fenceAnswered(c, held, a), (e) => fenceUnanswered(c, e))
        .catch((e) => node.error(`${node.actuator}: ${e.message}`))
        .finally(() => {
          busy = false;
          pump();
        });
    }

    async function fenceAnswered(c, held, a) {
      const act = wire.decide(c, a).action;
      if (act === 'done' || act === 'reread') {
        held.fenced = true;
        if (lease === held) seq = 1n;
        ahead = '';
        status('green', 'dot', `token ${c.token}: holding the lease, fence raised`);
        return;
      }
      const waiting = queue.splice(0);
      const fields = answerFields(c, a);
      if (act === 'reacquire') {
        await staleAnswer(c, held, a, fields, waiting);
        return;
      }
      const text = `${a.outcome}${a.reason ? ` (${a.reason})` : ''}: ${a.error || 'no reason given'}`;
      status('red', 'ring', `fence-only command ${text}`);
      node.warn(`${node.actuator}: the fence-only command under token ${c.token} was ${text}; the messages waiting are not sent`);
      fields.error = `not sent: the fence-only command under token ${c.token} before it was ${text}`;
      for (const item of waiting) out(item, { ...fields });
    }

    function fenceUnanswered(c, e) {
      const waiting = queue.splice(0);
      if (stop.signal.aborted) {
        for (const item of waiting) item.done();
        return;
      }
      const text = e instanceof TimeoutError ? e.message : `cannot send: ${e.message}`;
      status('red', 'ring', `fence-only command: ${text}`);
      node.warn(`${node.actuator}: the fence-only command under token ${c.token}: ${text}; the messages waiting are not sent`);
      for (const item of waiting) {
        out(item, { outcome: 'timeout', error: `not sent: the fence-only command under token ${c.token} before it: ${text}`, token: String(c.token) });
      }
    }

    function answerFields(c, a) {
      const fields = {
        outcome: a.outcome, reason: a.reason, fence: wire.pairString(a.fence), state: a.state, token: String(c.token),
        answer: { outcome: a.outcome, reason: a.reason, fence: wire.pairString(a.fence), state: a.state, error: a.error },
      };
      if (a.actual) fields.actual = a.actual;
      if (a.pulse) fields.pulse = a.pulse;
      if (a.duty !== undefined) fields.duty = wire.formatDuty(a.duty);
      if (a.actualDuty !== undefined) fields.actualDuty = wire.formatDuty(a.actualDuty);
      if (a.error) fields.error = a.error;
      return fields;
    }

    // staleAnswer stops acting under the stale token now, rereads the
    // state, sends items on with the answer and the reread state (the
    // lease is acquired again meanwhile), and says so if the fence is
    // above everything etcd has issued.
    async function staleAnswer(c, held, a, fields, items) {
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
      for (const item of items) out(item, { ...fields });
      await aheadOfEtcd(a.fence.token);
    }

    async function answered(item, c, held, a) {
      const fields = answerFields(c, a);
      switch (wire.decide(c, a).action) {
        case 'done': {
          ahead = '';
          const what = c.pulseMs > 0n ? `pulse ${c.pulseMs} ms` : c.duty !== undefined ? `duty ${wire.formatDuty(c.duty)}%` : c.reset ? 'reset' : `${a.state || c.state || 'fence only'}`;
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
        case 'reacquire':
          // Stop acting under this token now; the answer goes out once
          // the state is reread, and the lease is acquired again.
          await staleAnswer(c, held, a, fields, [item]);
          return;
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
      let staleBackoff = 1000; // after a holding whose fence-only command was stale
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
        held.fenced = false;
        held.withdraw = new AbortController();
        held.once('lost', (why) => {
          held.withdraw.abort();
          status('red', 'ring', 'lease lost');
          node.warn(`${node.actuator}: lease of scope ${scope} lost (${why}); no command is sent under token ${held.token}`);
          if (endLease) endLease('lost');
        });
        lease = held;
        seq = 0n; // the fence-only command's; the messages' go from 1
        if (ahead) status('red', 'ring', `token ${held.token}: ${ahead}`);
        else status('green', 'dot', `token ${held.token}: holding the lease`);
        if (typeof node.afterGrant === 'function') {
          node.afterGrant({ token: String(held.token), scope, key: held.key, lease: held.id });
          pump(true);
        } else {
          pump();
        }
        const why = await Promise.race([ended, aborted(stop.signal)]);
        held.withdraw.abort();
        lease = null;
        endLease = null;
        supersede();
        await held.release().catch((e) => node.warn(`${node.actuator}: release the lease of scope ${scope}: ${e.message}`));
        // A fence no grant passes (one above every revision of this etcd)
        // answers every fence-only command stale: wait before the next.
        if (why === 'stale' && !held.fenced) {
          await sleep(staleBackoff, stop.signal);
          staleBackoff = Math.min(2 * staleBackoff, MAX_BACKOFF_MS);
        } else {
          staleBackoff = 1000;
        }
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
