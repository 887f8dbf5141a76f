'use strict';

// The lease of a fence scope: the same etcd lock as Go's package lease, so
// that Go, Python and Node-RED controllers exclude each other. The lock is
// etcd's own (its lock service, a concurrency.Mutex on the server): the key
// is <name>/<lease id in hex>, and the fencing token is the key's
// create_revision, which is higher for every later grant.

const { EventEmitter } = require('node:events');
const { EtcdError, b64, unb64, leaseNotFound } = require('./etcd');

const PREFIX = '/fencegate/locks/';

// lockName is the lock of a gateway's scope.
function lockName(gateway, scope) {
  return PREFIX + gateway + '/' + scope;
}

// LostError: the lock was obtained after the lease was lost.
class LostError extends Error {
  constructor() {
    super('lock obtained after the lease was lost');
  }
}

// AheadError: the gateway's fence was not raised by a holder of this etcd,
// so no token this etcd grants can pass it until its revision does (Go's
// lease.AheadError, Python's fencegate.AheadError). fence and revision are
// BigInts; held, if not 0n, is the token of a lock this holder still holds
// at or below the fence. summary is the first clause, for a status.
class AheadError extends Error {
  constructor(fence, revision, held = 0n) {
    let what = `is above every revision this etcd has issued (its current revision is ${revision})`;
    if (held && revision >= fence) {
      what = `is at or above the token ${held} that this etcd has just granted to the lock this holder still holds, ` +
        `so no newer holder of this etcd raised it (this etcd handed out token ${held} again)`;
    }
    const summary = `the gateway's fence token ${fence} ${what}`;
    super(`${summary}: the fence's tokens did not come from this etcd: they were typed by hand (gateway send --token N), ` +
      'or came from another lease service, or etcd was reset or restored from an older backup. No token from this etcd ' +
      'can pass the fence until its revision does; retrying will not help. Tokens typed by hand: go on typing them, above ' +
      'the fence, and take a scope\'s tokens from one source only. An etcd restored from a backup: restore it again with ' +
      'etcdutl snapshot restore --bump-revision (see docs/controllers.md, "Restoring etcd")');
    this.name = 'AheadError';
    this.summary = summary;
    this.fence = fence;
    this.revision = revision;
    this.held = held;
  }
}

// Lease is a held lock: token (BigInt), key, id (the etcd lease, a decimal
// string). It emits 'lost' (with a reason) once if etcd says the lease is
// gone, or once the TTL has passed since the last answered keep-alive was
// sent (see Keeper); from then on its holder must not send under its
// token, and lost says so. release() lets it go.
class Lease extends EventEmitter {
  constructor(etcd, keeper, key, token) {
    super();
    this.etcd = etcd;
    this.keeper = keeper;
    this.id = keeper.id;
    this.key = key;
    this.token = token;
    keeper.onLost = (why) => this.emit('lost', why);
  }

  get lost() {
    return this.keeper.lost;
  }

  // held says whether the lock is still this lease's: its key is there,
  // under this lease, and the lease is not lost.
  async held() {
    if (this.lost) return false;
    const kv = await ownKey(this.etcd, this.key, this.id);
    return kv !== undefined && !this.lost;
  }

  // checkFence is the package's checkFence for a stale answer to a command
  // under this lease's token, before the lease is released (Go's
  // Lease.CheckFence). It also throws an AheadError if the fence is at or
  // above this token while the lock is still held: no holder of this etcd
  // can have been granted a newer token meanwhile (after a restore without
  // --bump-revision, etcd hands out its old tokens again). A fence at this
  // token raised by the holder's own commands is not a fence from
  // elsewhere: the caller rules that out first (fencegate-out's ownFence:
  // this token and a seq it sent itself), and calls this for the rest.
  async checkFence(fence) {
    await checkFence(this.etcd, fence);
    if (fence < this.token || !(await this.held())) return;
    throw new AheadError(fence, await revision(this.etcd), this.token);
  }

  // release unlocks and revokes the lease, within a few seconds; a lease
  // already gone is no error.
  async release() {
    this.keeper.stop();
    let err;
    try {
      await this.etcd.call('/v3/lock/unlock', { key: b64(this.key) });
    } catch (e) {
      err = e;
    }
    try {
      await revoke(this.etcd, this.id);
    } catch (e) {
      err = err || e;
    }
    if (err) throw err;
  }
}

async function revoke(etcd, id) {
  try {
    await etcd.call('/v3/lease/revoke', { ID: id });
  } catch (e) {
    if (!leaseNotFound(e)) throw e;
  }
}

// Keeper keeps a lease alive: a keep-alive every ttl/3 seconds. The lease
// counts as lost once etcd answers that it is gone (no TTL, or TTL <= 0),
// or as soon as the time is past its deadline: the send time of the last
// keep-alive answered (or of the grant) plus the TTL etcd gave. etcd may
// have let it expire by then, so no command may go out under it (Go's
// client decides the same, from the keep-alives' send times). lost checks
// the deadline each time it is read, and a timer checks it at the
// deadline itself; onLost is called once, with the reason.
class Keeper {
  // sent is when the grant was requested (now()'s clock).
  constructor(etcd, id, ttl, { now = monotonic, sent = now() } = {}) {
    this.etcd = etcd;
    this.id = id;
    this.ttlMs = ttl * 1000;
    this.now = now;
    this.isLost = false;
    this.lostWhy = '';
    this.onLost = () => {};
    this.stopped = false;
    this.lastError = '';
    this.deadline = sent + this.ttlMs;
    this.armDeadline();
    this.timer = setInterval(() => this.tick(), Math.max(500, Math.floor(this.ttlMs / 3)));
    this.timer.unref();
  }

  get lost() {
    this.checkDeadline();
    return this.isLost;
  }

  checkDeadline() {
    if (!this.isLost && !this.stopped && this.now() > this.deadline) {
      this.lose(`no keep-alive answered within ${this.ttlMs / 1000}s of its sending${this.lastError ? `: ${this.lastError}` : ''}`);
    }
  }

  // armDeadline sets the timer that checks the deadline when it comes.
  armDeadline() {
    clearTimeout(this.deadlineTimer);
    if (this.stopped) return;
    this.deadlineTimer = setTimeout(() => this.checkDeadline(), Math.max(0, Math.ceil(this.deadline - this.now())) + 1);
    this.deadlineTimer.unref();
  }

  stop() {
    this.stopped = true;
    clearInterval(this.timer);
    clearTimeout(this.deadlineTimer);
  }

  lose(why) {
    if (this.isLost || this.stopped) return;
    this.isLost = true;
    this.lostWhy = why;
    this.stop();
    this.onLost(why);
  }

  async tick() {
    if (this.stopped || this.busy) return;
    if (this.lost) return;
    this.busy = true;
    const sent = this.now();
    try {
      const a = await this.etcd.call('/v3/lease/keepalive', { ID: this.id }, { timeoutMs: Math.max(1000, this.deadline - sent) });
      const r = a.result || a;
      if (!r.TTL || Number(r.TTL) <= 0) {
        this.lose('etcd says the lease is gone (expired or revoked)');
      } else if (!this.lost && sent + Number(r.TTL) * 1000 > this.deadline) {
        this.deadline = sent + Number(r.TTL) * 1000;
        this.armDeadline();
      }
    } catch (e) {
      this.lastError = e.message; // the deadline decides; this says why it passed
    } finally {
      this.busy = false;
    }
  }
}

function monotonic() {
  return performance.now();
}

// acquire waits for the lock of gateway's scope and returns its Lease.
// It grants a lease of ttl seconds, keeps it alive (while it waits in the
// lock's queue, too), locks, and reads its key back: the key must exist
// under this lease, and the lease must not be lost; its create_revision is
// the token. A lease lost while waiting queues again at once, under a new
// lease. signal ends the wait (the lease is then revoked). onWaiting, if
// given, is called once the lease is granted and the lock requested.
async function acquire(etcd, { gateway, scope, ttl = 10, signal, onWaiting } = {}) {
  if (!gateway || !scope || /\//.test(gateway + scope)) {
    throw new Error(`gateway ${JSON.stringify(gateway)} and scope ${JSON.stringify(scope)} must be non-empty and contain no /`);
  }
  for (;;) {
    if (signal && signal.aborted) throw abortError();
    const sent = monotonic();
    const g = await etcd.call('/v3/lease/grant', { TTL: ttl }, { signal });
    if (!g.ID) throw new EtcdError('etcd granted no lease (no ID in its answer)');
    const keeper = new Keeper(etcd, String(g.ID), Number(g.TTL) || ttl, { sent });
    const waiting = new AbortController();
    const onAbort = () => waiting.abort();
    if (signal) signal.addEventListener('abort', onAbort, { once: true });
    keeper.onLost = () => waiting.abort();
    let key;
    try {
      if (onWaiting) onWaiting();
      const l = await etcd.call('/v3/lock/lock', { name: b64(lockName(gateway, scope)), lease: keeper.id }, { signal: waiting.signal, timeoutMs: 0 });
      key = unb64(l.key);
      if (!key) throw new EtcdError('etcd answered the lock without a key');
    } catch (e) {
      keeper.stop();
      await revoke(etcd, keeper.id).catch(() => {});
      if (signal && signal.aborted) throw abortError();
      if (keeper.lost) continue; // the lease ran out in the queue: queue again
      throw e;
    } finally {
      if (signal) signal.removeEventListener('abort', onAbort);
    }
    const lease = new Lease(etcd, keeper, key, 0n);
    let kv;
    try {
      kv = await ownKey(etcd, key, keeper.id);
    } catch (e) {
      await lease.release().catch(() => {});
      throw e;
    }
    if (!kv || keeper.lost) {
      await lease.release().catch(() => {});
      throw new LostError();
    }
    const rev = BigInt(kv.create_revision || 0);
    if (rev <= 0n) {
      await lease.release().catch(() => {});
      throw new EtcdError(`the lock key has revision ${rev}`);
    }
    lease.token = rev;
    return lease;
  }
}

// ownKey returns the lock key's etcd record if it is there under lease id,
// undefined if not.
async function ownKey(etcd, key, id) {
  const r = await etcd.call('/v3/kv/range', { key: b64(key) });
  const kv = r.kvs && r.kvs[0];
  return kv && String(kv.lease) === id ? kv : undefined;
}

// checkFence throws an AheadError if fence (a BigInt: a gateway's fence
// token, as a stale answer reports it) is above etcd's current revision:
// then no newer holder of this etcd raised it, and acquiring the lease
// again cannot produce a token that passes it (Go's lease.CheckFence).
async function checkFence(etcd, fence) {
  const rev = await revision(etcd);
  if (fence > rev) throw new AheadError(fence, rev);
}

// revision returns etcd's current revision (a BigInt): every token it ever
// granted is at or below it.
async function revision(etcd) {
  const r = await etcd.call('/v3/kv/range', { key: b64(PREFIX), count_only: true });
  return BigInt((r.header && r.header.revision) || 0);
}

function abortError() {
  const e = new Error('aborted');
  e.name = 'AbortError';
  return e;
}

module.exports = { acquire, revision, checkFence, lockName, Lease, Keeper, LostError, AheadError, PREFIX };
