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

// Lease is a held lock: token (BigInt), key, id (the etcd lease, a decimal
// string). It emits 'lost' (with a reason) once if etcd says the lease is
// gone, or no keep-alive was answered for the TTL; from then on its holder
// must not send under its token. release() lets it go.
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
// is lost when etcd answers that it is gone (no TTL, or TTL <= 0), or when
// no keep-alive was answered for ttl seconds since the last one that was
// (as Go's client decides: etcd may have let it expire meanwhile).
class Keeper {
  constructor(etcd, id, ttl, now = Date.now) {
    this.etcd = etcd;
    this.id = id;
    this.ttlMs = ttl * 1000;
    this.now = now;
    this.lost = false;
    this.lostWhy = '';
    this.onLost = () => {};
    this.deadline = now() + this.ttlMs;
    this.stopped = false;
    this.timer = setInterval(() => this.tick(), Math.max(500, Math.floor(this.ttlMs / 3)));
    this.timer.unref();
  }

  stop() {
    this.stopped = true;
    clearInterval(this.timer);
  }

  lose(why) {
    if (this.lost || this.stopped) return;
    this.lost = true;
    this.lostWhy = why;
    this.stop();
    this.onLost(why);
  }

  async tick() {
    if (this.stopped || this.busy) return;
    if (this.now() > this.deadline) {
      this.lose(`no keep-alive answered for ${this.ttlMs / 1000}s`);
      return;
    }
    this.busy = true;
    const sent = this.now();
    try {
      const a = await this.etcd.call('/v3/lease/keepalive', { ID: this.id }, { timeoutMs: Math.max(1000, this.deadline - sent) });
      const r = a.result || a;
      if (!r.TTL || Number(r.TTL) <= 0) {
        this.lose('etcd says the lease is gone (expired or revoked)');
      } else {
        this.deadline = sent + Number(r.TTL) * 1000;
      }
    } catch (e) {
      if (this.now() > this.deadline) this.lose(`no keep-alive answered for ${this.ttlMs / 1000}s: ${e.message}`);
    } finally {
      this.busy = false;
    }
  }
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
    const g = await etcd.call('/v3/lease/grant', { TTL: ttl }, { signal });
    if (!g.ID) throw new EtcdError('etcd granted no lease (no ID in its answer)');
    const keeper = new Keeper(etcd, String(g.ID), Number(g.TTL) || ttl);
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
      const r = await etcd.call('/v3/kv/range', { key: b64(key) });
      kv = r.kvs && r.kvs[0];
    } catch (e) {
      await lease.release().catch(() => {});
      throw e;
    }
    if (!kv || String(kv.lease) !== keeper.id || keeper.lost) {
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

module.exports = { acquire, revision, lockName, Lease, Keeper, LostError, PREFIX };
