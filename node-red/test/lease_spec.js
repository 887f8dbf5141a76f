'use strict';

// The keeper of a lease, against a fake etcd: the lease counts as lost as
// soon as the TTL has passed since the last answered keep-alive was sent,
// whatever the keep-alives still on their way. Needs no services.

const assert = require('node:assert');
const { Keeper } = require('../lib/lease');

// fakeEtcd answers each keep-alive as answer(call number) says: a TTL, or
// undefined for never (a keep-alive lost on the way).
function fakeEtcd(answer) {
  const etcd = { calls: [] };
  etcd.call = (path) => {
    etcd.calls.push(path);
    const ttl = answer(etcd.calls.length);
    return ttl === undefined ? new Promise(() => {}) : Promise.resolve({ result: { TTL: String(ttl) } });
  };
  return etcd;
}

describe('lease keeper', function () {
  this.timeout(10000);
  const keepers = [];
  afterEach(function () {
    for (const k of keepers.splice(0)) k.stop();
  });

  it('counts the lease as lost as soon as the TTL has passed since the grant was sent', function () {
    let t = 1000;
    const k = new Keeper(fakeEtcd(() => undefined), '1', 10, { now: () => t, sent: 1000 });
    keepers.push(k);
    const why = [];
    k.onLost = (w) => why.push(w);
    t = 11000;
    assert.strictEqual(k.lost, false, 'at the deadline itself it still holds');
    t = 11001;
    assert.strictEqual(k.lost, true, 'past the deadline, read before any keep-alive tick');
    assert.strictEqual(why.length, 1);
    assert.match(why[0], /no keep-alive answered within 10s/);
  });

  it('loses the lease at its deadline while a keep-alive hangs', async function () {
    const k = new Keeper(fakeEtcd(() => undefined), '1', 1);
    keepers.push(k);
    const start = performance.now();
    const lostAt = await new Promise((resolve) => {
      k.onLost = () => resolve(performance.now());
    });
    const after = lostAt - start;
    assert.ok(after >= 1000 && after < 1300, `lost ${Math.round(after)} ms after the grant; want just past 1000`);
  });

  it('moves the deadline to the answered keep-alive\'s send time plus the TTL', async function () {
    // The first keep-alive (sent at 500 ms) is answered; later ones hang.
    const k = new Keeper(fakeEtcd((n) => (n === 1 ? 1 : undefined)), '1', 1);
    keepers.push(k);
    const start = performance.now();
    const lostAt = await new Promise((resolve) => {
      k.onLost = () => resolve(performance.now());
    });
    const after = lostAt - start;
    assert.ok(after >= 1500 && after < 1800, `lost ${Math.round(after)} ms after the grant; want just past 1500`);
  });
});

// Against a real etcd (FENCEGATE_TEST_ETCD): keep-alives go through etcd's
// JSON gateway with a deadline taken from performance.now(), a fraction.
describe('lease keeper (real etcd)', function () {
  this.timeout(20000);
  const { env, unique } = require('./env');
  const { Etcd } = require('../lib/etcd');
  const leases = require('../lib/lease');
  before(function () {
    if (!env.etcd) this.skip();
  });

  it('sends a keep-alive whose timeout has a fraction of a millisecond', async function () {
    // The keeper's timeouts come from performance.now(), which has one.
    const etcd = new Etcd(env.etcd);
    const g = await etcd.call('/v3/lease/grant', { TTL: 5 });
    try {
      const a = await etcd.call('/v3/lease/keepalive', { ID: g.ID }, { timeoutMs: 1333.7 });
      assert.ok(Number((a.result || a).TTL) > 0, JSON.stringify(a));
    } finally {
      await etcd.call('/v3/lease/revoke', { ID: g.ID });
    }
  });

  it('keeps a lease of 3 s held for more than two TTLs', async function () {
    const etcd = new Etcd(env.etcd);
    const l = await leases.acquire(etcd, { gateway: unique('gw'), scope: 'keep', ttl: 3 });
    const lost = [];
    l.on('lost', (why) => lost.push(why));
    try {
      await new Promise((resolve) => setTimeout(resolve, 7000));
      assert.deepStrictEqual(lost, [], 'the lease was lost although etcd was there');
      assert.strictEqual(l.lost, false);
      const ttl = await etcd.call('/v3/lease/timetolive', { ID: l.id });
      assert.ok(Number(ttl.TTL) > 0, `etcd says the lease is gone: ${JSON.stringify(ttl)}`);
    } finally {
      await l.release();
    }
  });
});
