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
const LOST_REREAD_MS = 1000; // how long a lost lease's report waits for a state newer than its token
const UNKNOWN_MS = 5000; // how long the actuator's retained state may take before its name is taken for unknown
const MAX_BACKOFF_MS = 10000;
const MAX_AGE_S = 30; // Max age unless set: no message waits longer than this to be sent

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
    node.maxAgeMs = (Number(n.maxAge) > 0 ? Number(n.maxAge) : MAX_AGE_S) * 1000;
    // Hooks for tests, undefined in production (no flow can set them):
    // afterGrant is called with {token, scope, key, lease, hold} (the lock
    // key, the etcd lease id, the Lease) after each grant, before the
    // node's first lease check under it; beforePublish with {token, seq}
    // after the node's last lease check before a command is published, and
    // right before it is: a pause there is one that only the gateway's
    // fence can catch. If beforePublish returns false, the command is not
    // published (the conformance driver sends one command, nothing after).
    node.afterGrant = undefined;
    node.beforePublish = undefined;

    const config = RED.nodes.getNode(n.gateway);
    // The messages not yet sent: {msg, send, done, cmd, at, timer}. While a
    // lease is held they are all bound to it: taken while it was held, or
    // kept for it while the node waited for it. A message bound to a lease
    // that is lost is never sent, under it or a later one (see reportLost).
    const queue = [];
    const stop = new AbortController(); // aborted on close
    node.stopSignal = stop.signal; // (tests count its listeners)
    const closing = aborted(stop.signal);
    // lease is the lease held, while commands may be sent under it; it
    // carries fenced (its fence-only command was applied) and withdraw
    // (aborted when the holding ends: nothing is published under it after).
    let lease = null;
    let scope = '';
    let seq = 0n;
    let busy = false; // a command is waiting for its answer
    let endLease = null; // resolves the current holding's wait: {why, settled}
    let lastStatus = { fill: 'grey', shape: 'ring', text: 'starting' };
    let halted = null; // the AheadError that stopped the node: no lease is requested again
    let unknown = ''; // while the gateway has no actuator of this name: why

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
    // The gateway back online: a fence-only command that went unanswered is
    // sent again, unchanged (the gateway answers a copy duplicate), so that
    // the fence is known raised without waiting for a message.
    const onGateway = (s) => {
      if (s === 'online' && lease && lease.fenceCmd && !lease.fenced && !busy && !halted) raiseFence(lease);
    };
    conn.on('problem', onProblem);
    conn.on('ready', onReady);
    conn.on('status', onGateway);

    // take takes item out of the queue, if it is there; takeAll takes
    // them all.
    const take = (item) => {
      const i = queue.indexOf(item);
      if (i >= 0) queue.splice(i, 1);
      clearTimeout(item.timer);
    };
    const takeAll = () => {
      const all = queue.splice(0);
      all.forEach(take);
      return all;
    };

    // out sends item's message on with fields; with err, Node-RED reports
    // the error with the message too (a catch node gets it).
    const out = (item, fields, err) => {
      take(item);
      Object.assign(item.msg, { actuator: node.actuator, scope }, fields);
      item.send(item.msg);
      item.done(err);
    };

    // refuse sends item on unsent: outcome refused, the reason, and the
    // error (reported with the message), with the actuator's state as the
    // gateway last published it.
    const refuse = (item, reason, err) => {
      out(item, { outcome: 'refused', reason, error: err.message, ...stateFields(conn.states.get(node.actuator)) }, err);
    };

    const tooOld = (item) => performance.now() - item.at > node.maxAgeMs;
    const drop = (item) => {
      const kept = Math.round((performance.now() - item.at) / 1000);
      out(item, { outcome: 'dropped', error: `kept ${kept} s waiting for ${lease ? 'its turn' : 'the lease'}, longer than max age ${node.maxAgeMs / 1000} s: not sent` });
    };

    // supersede emits every queued message but the newest: only the newest
    // is sent once a lease is granted.
    const supersede = () => {
      while (queue.length > 1) {
        out(queue[0], { outcome: 'superseded' });
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
      const item = { msg, send, done, cmd, at: performance.now() };
      if (halted) return refuse(item, 'fence-ahead', halted);
      if (unknown) return refuse(item, 'unknown-actuator', new Error(unknown));
      queue.push(item);
      item.timer = setTimeout(() => drop(item), node.maxAgeMs);
      if (!lease) supersede();
      pump();
    });

    // mayPublish is the lease check, the last step before a command under
    // held is published: the holding has not ended, and the lease's
    // deadline has not passed (lost reads it now; a lease past it is lost
    // at once, and its 'lost' handler reports the messages bound to it).
    function mayPublish(held, c) {
      if (lease !== held || held.lost || stop.signal.aborted) return false;
      return typeof node.beforePublish !== 'function' || node.beforePublish({ token: String(c.token), seq: String(c.seq) }) !== false;
    }

    // pump raises the fence of a new lease, or sends the next queued
    // message, if a lease is held and no command waits for its answer.
    // From the lease check to the publish it runs without a pause (no
    // await).
    function pump() {
      if (busy || !lease || halted || stop.signal.aborted) return;
      const held = lease;
      if (!held.fenced) {
        // Tried before and not known raised: again (unchanged) only for a
        // message, never by itself on a timer.
        if (!held.fenceCmd || queue.length > 0) raiseFence(held);
        return;
      }
      while (queue.length > 0 && tooOld(queue[0])) drop(queue[0]);
      if (queue.length === 0) return;
      const item = queue[0];
      let c;
      try {
        c = conn.prepare({
          actuator: node.actuator, id: typeof item.msg.commandId === 'string' ? item.msg.commandId : '',
          token: held.token, seq, holder: node.holder, ...item.cmd,
        });
      } catch (e) {
        take(item);
        status('red', 'ring', `refused before sending: ${e.message}`);
        item.done(e);
        pump();
        return;
      }
      if (!mayPublish(held, c)) return;
      take(item);
      held.sentTop = c.seq;
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
    // that outcome, unsent, and the next message (or the gateway coming
    // back online) sends the same fence-only command again: one command per
    // lease, the same id, token, seq 0 and signature every time, so that
    // every copy the broker queued is answered duplicate, never stale.
    function raiseFence(held) {
      let c = held.fenceCmd;
      if (!c) {
        try {
          c = conn.prepare({ actuator: node.actuator, token: held.token, seq: 0n, holder: node.holder });
        } catch (e) {
          status('red', 'ring', `refused before sending: ${e.message}`);
          node.error(`${node.actuator}: the fence-only command under token ${held.token}: ${e.message}`);
          for (const item of takeAll()) item.done(e);
          return;
        }
      }
      if (!mayPublish(held, c)) return;
      held.fenceCmd = c;
      if (held.sentTop < 0n) held.sentTop = 0n;
      busy = true;
      status('green', 'ring', `token ${held.token}: raising the fence`);
      conn.send(c, { timeoutMs: node.timeoutMs, mayResend: () => mayResend(held), withdraw: held.withdraw.signal })
        .then((a) => fenceAnswered(c, held, a), (e) => fenceUnanswered(c, held, e))
        .catch((e) => node.error(`${node.actuator}: ${e.message}`))
        .finally(() => {
          busy = false;
          pump();
        });
    }

    // bound returns the messages bound to held, taken out of the queue:
    // all of them while it is the lease held, none once its holding ended
    // (they went then, and those queued since wait for the next lease).
    const bound = (held) => (lease === held ? takeAll() : []);

    async function fenceAnswered(c, held, a) {
      const act = wire.decide(c, a).action;
      if (act === 'done' || act === 'reread') {
        held.fenced = true;
        if (lease === held) seq = 1n;
        status('green', 'dot', `token ${c.token}: holding the lease, fence raised`);
        return;
      }
      const fields = answerFields(c, a);
      if (act === 'reacquire' && ownFence(held, a)) {
        // The fence is at a command of this node's own under this token
        // (a copy of it answered stale): the fence is raised.
        held.fenced = true;
        seq = a.fence.seq + 1n;
        status('green', 'dot', `token ${c.token}: holding the lease, fence raised (at its own ${a.fence.token}/${a.fence.seq})`);
        return;
      }
      if (act === 'reacquire') {
        await staleAnswer(c, held, a, fields, []);
        return;
      }
      const text = `${a.outcome}${a.reason ? ` (${a.reason})` : ''}: ${a.error || 'no reason given'}`;
      status('red', 'ring', `fence-only command ${text}`);
      node.warn(`${node.actuator}: the fence-only command under token ${c.token} was ${text}; the messages waiting are not sent`);
      fields.error = `not sent: the fence-only command under token ${c.token} before it was ${text}`;
      for (const item of bound(held)) out(item, { ...fields });
    }

    function fenceUnanswered(c, held, e) {
      if (stop.signal.aborted) return; // closed: the close handler let the messages go
      const text = e instanceof TimeoutError ? e.message : `cannot send: ${e.message}`;
      status('red', 'ring', `fence-only command: ${text}`);
      node.warn(`${node.actuator}: the fence-only command under token ${c.token}: ${text}; the messages waiting are not sent`);
      for (const item of bound(held)) {
        out(item, { outcome: 'timeout', error: `not sent: the fence-only command under token ${c.token} before it: ${text}`, token: String(c.token) });
      }
    }

    // ownFence says whether a stale answer's fence is this node's own: at
    // the token of the lease it still holds, and at a seq it has published
    // under that lease itself (sentTop: the highest). Only this node sends
    // under its token while it holds the lock, so such a fence was raised
    // by one of its own commands, answered stale when a copy came again
    // (a redelivery beyond the gateway's duplicate window, or a copy under
    // another id): the scope is still the node's, and it goes on above the
    // fence (the next seq above the fence's). A fence at its token but
    // above every seq it sent, or above its token, was raised by another
    // holder, and halts the node (staleAnswer, lease.checkFence). (A
    // holder given the same token again by a restored etcd, whose fence is
    // at a seq this node sent too, cannot be told from this node's own.)
    function ownFence(held, a) {
      return lease === held && !held.lost && a.fence.token === held.token && held.sentTop >= 0n && a.fence.seq <= held.sentTop;
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

    // stateFields are a message's fields for a retained state s as reread:
    // state, fence, reread (and duty), none without s.
    function stateFields(s) {
      if (!s) return {};
      const f = { state: s.state, fence: wire.pairString(s.fence), reread: { state: s.state, fence: wire.pairString(s.fence) } };
      if (s.duty !== undefined) f.duty = wire.formatDuty(s.duty);
      return f;
    }

    // reread resolves with the actuator's retained state once it satisfies
    // ok, or after timeoutMs with undefined (orLatest: the latest state).
    function reread(ok, timeoutMs, orLatest) {
      return conn.waitState(node.actuator, ok, { timeoutMs, signal: stop.signal })
        .catch(() => (orLatest ? conn.states.get(node.actuator) : undefined));
    }

    // endHolding ends held's holding now, if it is the lease held: nothing
    // more is sent under it. The run loop waits for settled, if given,
    // before it releases the lease.
    function endHolding(held, why, settled) {
      if (lease !== held) return;
      lease = null;
      held.withdraw.abort();
      if (endLease) endLease({ why, settled });
    }

    // staleAnswer stops acting under the stale token now: the messages
    // waiting under it go out with the answer, unsent. It rereads the
    // state and checks, with the lock still held, whether the fence is one
    // that no lease from this etcd can pass (docs/controllers.md,
    // "Restoring etcd"): then the node stops (halt). items got the answer.
    function staleAnswer(c, held, a, fields, items) {
      const unsent = bound(held);
      let settle;
      endHolding(held, 'stale', new Promise((resolve) => {
        settle = resolve;
      }));
      return (async () => {
        status('red', 'ring', `stale: fence ${a.fence.token}${a.state ? ` (${a.state})` : ''}`);
        const [s, ahead] = await Promise.all([
          reread((x) => wire.comparePairs(x.fence, a.fence) >= 0, REREAD_MS, false),
          held.checkFence(a.fence.token).then(() => null, (e) => (e instanceof leases.AheadError ? e : null)),
        ]);
        if (s) Object.assign(fields, { state: s.state, reread: stateFields(s).reread });
        const notSent = `not sent: a command under token ${c.token} before it was answered stale${a.error ? ` (${a.error})` : ''}`;
        if (ahead) halt(ahead, items.length + unsent.length > 0);
        for (const item of items) out(item, ahead ? { ...fields, error: ahead.message } : { ...fields }, ahead || undefined);
        for (const item of unsent) out(item, { ...fields, error: ahead ? ahead.message : notSent }, ahead || undefined);
      })().finally(settle);
    }

    // halt stops the node for good (until it is started again): the
    // gateway's fence is one no lease from this etcd can pass, and taking
    // the lease again and again would only spend revisions until one
    // passes it, which is unsafe (Go's and Python's controllers stop too).
    // withMessages: the error is reported with them, not alone.
    function halt(err, withMessages) {
      if (halted) return;
      halted = err;
      status('red', 'ring', `stopped: ${err.summary} (restart the flows to retry)`);
      if (!withMessages) node.error(`${node.actuator}: ${err.message}`);
      if (lease) endHolding(lease, 'halted');
      for (const item of takeAll()) refuse(item, 'fence-ahead', err);
    }

    // reportLost sends the messages bound to a lost lease on unsent,
    // outcome lease-lost, with the state as the gateway says it now (as
    // reread: newer than the lost token, if a newer holder raised it
    // within a second): they were formed under a lease that is gone, so
    // the flow decides again.
    async function reportLost(held, why, items) {
      if (items.length === 0) return;
      const s = await reread((x) => x.fence.token > held.token, LOST_REREAD_MS, true);
      const error = `not sent: the lease of token ${held.token} was lost (${why}) before it was sent; ` +
        'it is never sent under a later lease: decide again, from msg.state';
      for (const item of items) {
        if (stop.signal.aborted) item.done();
        else out(item, { outcome: 'lease-lost', token: String(held.token), error, ...stateFields(s) });
      }
    }

    async function answered(item, c, held, a) {
      const fields = answerFields(c, a);
      switch (wire.decide(c, a).action) {
        case 'done': {
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
          if (ownFence(held, a)) {
            // The fence is this node's own command (see ownFence): this
            // one was not applied now; keep the lease, go on above it.
            if (seq <= a.fence.seq) seq = a.fence.seq + 1n;
            status('yellow', 'dot', `token ${c.token}: stale at its own fence ${a.fence.token}/${a.fence.seq}`);
            node.warn(`${node.actuator}: command under token ${c.token} seq ${c.seq} answered stale at this node's own fence ${a.fence.token}/${a.fence.seq} (a command it sent before, answered again); the lease is kept; send the message again if it is still wanted`);
            out(item, { ...fields, error: `not applied now: the fence ${a.fence.token}/${a.fence.seq} is at a command this node sent under token ${c.token} itself (this one, or an earlier one, answered again); reread msg.state${a.error ? ` (${a.error})` : ''}` });
            return;
          }
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

    // learnScope waits for the actuator's retained state and returns its
    // scope. The gateway retains every actuator's state: if this one has
    // not come after a few seconds while others have, the name is not one
    // of the gateway's (mistyped): the messages are refused, with the
    // error, until its state comes.
    async function learnScope() {
      status('yellow', 'ring', `waiting for the state of ${node.actuator}`);
      const hint = setTimeout(() => {
        const names = [...conn.states.keys()].sort();
        if (names.length === 0) {
          status('yellow', 'ring', `no state of ${node.actuator} from gateway ${config.gatewayId} (is it running, with this id and topic prefix?)`);
          return;
        }
        unknown = `no actuator ${node.actuator} on gateway ${config.gatewayId}; its actuators are ${names.join(', ')}`;
        status('red', 'ring', unknown);
        const waiting = takeAll();
        if (waiting.length === 0) node.error(unknown);
        for (const item of waiting) refuse(item, 'unknown-actuator', new Error(unknown));
      }, UNKNOWN_MS);
      try {
        return (await conn.waitState(node.actuator, (x) => x.scope !== '', { signal: stop.signal })).scope;
      } finally {
        clearTimeout(hint);
        unknown = '';
      }
    }

    // run learns the scope, then holds the scope's lease, again and again,
    // until the node closes or halts.
    async function run() {
      status('grey', 'ring', 'connecting to the broker');
      await conn.whenReady(stop.signal);
      scope = await learnScope();
      let backoff = 1000;
      let staleBackoff = 1000; // after a holding whose fence-only command was stale
      let lastError = '';
      while (!stop.signal.aborted && !halted) {
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
        if (stop.signal.aborted || halted) {
          await held.release().catch(() => {});
          return;
        }
        const ended = new Promise((resolve) => {
          endLease = resolve;
        });
        held.fenced = false;
        held.fenceCmd = null; // the fence-only command of this lease, once made
        held.sentTop = -1n; // the highest seq published under this lease
        held.withdraw = new AbortController();
        held.once('lost', (why) => {
          held.withdraw.abort();
          if (lease !== held) return; // its holding ended before
          status('red', 'ring', 'lease lost');
          node.warn(`${node.actuator}: lease of scope ${scope} lost (${why}); no command is sent under token ${held.token}, and no message that came under it is sent at all`);
          endHolding(held, 'lost', reportLost(held, why, takeAll()));
        });
        lease = held;
        seq = 0n; // the fence-only command's; the messages' go from 1
        status('green', 'dot', `token ${held.token}: holding the lease`);
        node.log(`${node.actuator}: lease of scope ${scope} granted: token ${held.token}, lock key ${held.key}`);
        if (typeof node.afterGrant === 'function') node.afterGrant({ token: String(held.token), scope, key: held.key, lease: held.id, hold: held });
        pump();
        const end = await Promise.race([ended, closing]);
        held.withdraw.abort();
        lease = null;
        endLease = null;
        if (end.settled) await end.settled.catch((e) => node.error(`${node.actuator}: ${e.message}`));
        await held.release().catch((e) => node.warn(`${node.actuator}: release the lease of scope ${scope}: ${e.message}`));
        // A fence-only command answered stale: wait before the next.
        if (end.why === 'stale' && !held.fenced) {
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
      conn.off('status', onGateway);
      config.deregister(node);
      for (const item of takeAll()) item.done();
      const held = lease;
      lease = null;
      if (endLease) endLease({ why: 'closed' });
      // run() releases the lease it holds; wait for it, and at most 6 s.
      Promise.race([running, sleep(6000)])
        .then(() => (held ? held.release().catch(() => {}) : undefined))
        .then(() => done(), () => done());
    });
  }

  // sleep resolves after ms, or at once when signal aborts; it leaves no
  // listener on signal.
  function sleep(ms, signal) {
    return new Promise((resolve) => {
      const end = () => {
        clearTimeout(t);
        if (signal) signal.removeEventListener('abort', end);
        resolve();
      };
      const t = setTimeout(end, ms);
      if (signal) signal.addEventListener('abort', end, { once: true });
    });
  }

  // aborted resolves with {why: 'closed'} once signal aborts (one
  // listener, for the node's life).
  function aborted(signal) {
    return new Promise((resolve) => {
      if (signal.aborted) resolve({ why: 'closed' });
      else signal.addEventListener('abort', () => resolve({ why: 'closed' }), { once: true });
    });
  }

  RED.nodes.registerType('fencegate-out', FencegateOutNode);
};

module.exports.command = command;
