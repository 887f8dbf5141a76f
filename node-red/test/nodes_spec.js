'use strict';

// The nodes in a Node-RED runtime without the services: configuration
// errors, input checks, and messages that wait for a lease that cannot
// come. These always run.

const assert = require('node:assert');
const helper = require('node-red-node-test-helper');
const gatewayNode = require('../nodes/fencegate-gateway');
const outNode = require('../nodes/fencegate-out');
const { statusMatching, nextOutput, freePort } = require('./env');

helper.init(require.resolve('node-red'));
const nodes = [gatewayNode, outNode];

function flow(cfg, out = {}) {
  return [
    { id: 'tab1', type: 'tab' },
    { id: 'cfg', type: 'fencegate-gateway', broker: 'tcp://127.0.0.1:1883', gatewayId: 'gw', prefix: 'fencegate', etcd: 'http://127.0.0.1:2379', ttl: 5, ...cfg },
    { id: 'out', z: 'tab1', type: 'fencegate-out', gateway: 'cfg', actuator: 'pump', timeout: 5, wires: [['seen']], ...out },
    { id: 'seen', z: 'tab1', type: 'helper' },
  ];
}

// errorOf resolves with the text of node's next error.
function errorOf(node) {
  return new Promise((resolve) => node.once('call:error', (call) => resolve(String(call.args[0]))));
}

describe('fenced output nodes (no services)', function () {
  this.timeout(20000);
  beforeEach(function (done) {
    helper.startServer(done);
  });
  afterEach(async function () {
    await helper.unload();
    await new Promise((r) => helper.stopServer(r));
  });

  it('checks the payload: on, off, true, false, {pulse}, {duty}, reset', function () {
    const { command } = outNode;
    assert.deepStrictEqual(command('on'), { state: 'on' });
    assert.deepStrictEqual(command(true), { state: 'on' });
    assert.deepStrictEqual(command('off'), { state: 'off' });
    assert.deepStrictEqual(command(false), { state: 'off' });
    assert.deepStrictEqual(command({ pulse: 500 }), { pulse_ms: 500 });
    assert.deepStrictEqual(command({ duty: 42.5 }), { duty: 42.5 });
    assert.throws(() => command({ duty: 150 }), /msg.payload.duty must be percent from 0 to 100/);
    // A number, as the gateway takes it: a string is not read into one.
    assert.throws(() => command({ duty: '50' }), /msg.payload.duty must be percent from 0 to 100 with at most two decimals, a number, not a string \(convert it first: \$number\(payload.duty\) in a change node\), got "50"/);
    assert.throws(() => command({ duty: NaN }), /got NaN/);
    assert.throws(() => command({ duty: Infinity }), /got Infinity/);
    assert.deepStrictEqual(command({ duty: -0 }), { duty: -0 });
    assert.deepStrictEqual(command('reset'), { reset: true });
    assert.throws(() => command('ON'), /msg.payload must be "on", "off", true, false, \{"pulse": ms\}, \{"duty": percent\} or "reset", got "ON"/);
    assert.throws(() => command({ pulse: 600001 }), /whole milliseconds from 1 to 600000/);
    assert.throws(() => command(undefined), /got nothing/);
  });

  for (const [what, cfg, creds, re] of [
    ['a broker URL of another scheme', { broker: 'http://127.0.0.1:1883' }, {}, /gateway configuration: broker http:\/\/127.0.0.1:1883: want tcp:\/\/, mqtt:\/\/, mqtts:\/\/ or ssl:\/\//],
    ['an etcd that is no URL', { etcd: 'localhost' }, {}, /etcd endpoint "localhost" is not a URL/],
    ['a gateway id with a slash', { gatewayId: 'a/b' }, {}, /gateway id "a\/b" is not a name/],
    ['a signer without a key', { signer: 'ctl-a' }, {}, /signer "ctl-a" is set but there is no signing key/],
    ['a public key for a signing key', { signer: 'ctl-a' }, { signingKey: 'ed25519:Q/Fuwj5jnz8w6hj9zftC5vNVTKnAMCZv8e65PA52pkw=' }, /the signing key is a public key \(PATH.pub\)/],
    ['a missing CA file', { broker: 'mqtts://127.0.0.1:8883', ca: '/nonexistent/ca.crt' }, {}, /cannot read the CA file \/nonexistent\/ca.crt: no such file/],
  ]) {
    it(`says what is wrong with ${what}`, async function () {
      await helper.load(nodes, flow(cfg), { cfg: creds });
      const out = helper.getNode('out');
      const st = await statusMatching(out, /gateway configuration/);
      assert.match(st.text, re);
      const err = errorOf(out);
      out.receive({ payload: 'on' });
      assert.match(await err, re);
    });
  }

  it('takes a signing key whose line breaks were lost', async function () {
    const key = '-----BEGIN PRIVATE KEY----- MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g -----END PRIVATE KEY-----';
    await helper.load(nodes, flow({ signer: 'ctl-a', broker: `tcp://127.0.0.1:${await freePort()}` }), { cfg: { signingKey: key } });
    assert.strictEqual(helper.getNode('cfg').configError, undefined);
    assert.strictEqual(require('../lib/sign').publicKey(require('../lib/sign').privateKey(key)), 'ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=');
  });

  it('refuses a bad payload with a clear error', async function () {
    await helper.load(nodes, flow({ broker: `tcp://127.0.0.1:${await freePort()}` }));
    const out = helper.getNode('out');
    const err = errorOf(out);
    out.receive({ payload: 42 });
    assert.match(await err, /msg.payload must be "on", "off", true, false, \{"pulse": ms\}, \{"duty": percent\} or "reset", got 42/);
  });

  it('while no lease comes, a newer message supersedes the one that waits', async function () {
    await helper.load(nodes, flow({ broker: `tcp://127.0.0.1:${await freePort()}` }));
    const out = helper.getNode('out');
    await statusMatching(out, /^broker unreachable: connection refused/);
    const first = nextOutput(helper.getNode('seen'));
    out.receive({ payload: 'on', n: 1 });
    out.receive({ payload: 'off', n: 2 });
    const msg = await first;
    assert.strictEqual(msg.n, 1);
    assert.strictEqual(msg.outcome, 'superseded');
    assert.strictEqual(msg.actuator, 'pump');
  });

  it('bounds max age: 30 s unless set, a kept message is dropped when it is older, lease or none', async function () {
    // Issue 34, 1: a message never waits for ever to be sent.
    for (const [maxAge, ms] of [[undefined, 30000], [0, 30000], ['', 30000], [5, 5000]]) {
      await helper.load(nodes, flow({ broker: `tcp://127.0.0.1:${await freePort()}` }, { maxAge }));
      assert.strictEqual(helper.getNode('out').maxAgeMs, ms, `maxAge ${JSON.stringify(maxAge)}`);
      await helper.unload();
    }
    await helper.load(nodes, flow({ broker: `tcp://127.0.0.1:${await freePort()}` }, { maxAge: 1 }));
    const out = helper.getNode('out');
    const kept = nextOutput(helper.getNode('seen'), 3000);
    const t0 = Date.now();
    out.receive({ payload: 'on', n: 1 });
    const msg = await kept;
    assert.strictEqual(msg.outcome, 'dropped', JSON.stringify(msg));
    assert.strictEqual(msg.n, 1);
    assert.match(msg.error, /^kept 1 s waiting for the lease, longer than max age 1 s: not sent$/);
    assert.ok(Date.now() - t0 >= 1000);
  });
});

describe('examples/fenced-pump.json', function () {
  it('is a flow of inject nodes, a fenced output of the pump and a debug node, without credentials', function () {
    const text = require('node:fs').readFileSync(require('node:path').join(__dirname, '..', 'examples', 'fenced-pump.json'), 'utf8');
    const flow = JSON.parse(text);
    const types = flow.map((n) => n.type).sort();
    assert.deepStrictEqual(types, ['debug', 'fencegate-gateway', 'fencegate-out', 'inject', 'inject', 'tab']);
    const out = flow.find((n) => n.type === 'fencegate-out');
    assert.strictEqual(out.actuator, 'pump');
    assert.strictEqual(flow.find((n) => n.id === out.gateway).type, 'fencegate-gateway');
    assert.deepStrictEqual(flow.filter((n) => n.type === 'inject').map((n) => n.payload).sort(), ['off', 'on']);
    assert.ok(!/credentials|password|PRIVATE KEY/.test(text));
  });
});
