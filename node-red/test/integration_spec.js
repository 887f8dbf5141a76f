'use strict';

// The nodes in a Node-RED runtime against a real broker, etcd and gateway:
// FENCEGATE_TEST_BROKER, _ETCD, _GATEWAY and _KEY name them (see the
// repository's testenv package, or test/local-env.sh). Without them these
// tests skip.

const assert = require('node:assert');
const { spawn, spawnSync, execFile } = require('node:child_process');
const { getEventListeners } = require('node:events');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const mqtt = require('mqtt');
const helper = require('node-red-node-test-helper');
const gatewayNode = require('../nodes/fencegate-gateway');
const outNode = require('../nodes/fencegate-out');
const { GatewayConnection } = require('../lib/connection');
const { Etcd } = require('../lib/etcd');
const leases = require('../lib/lease');
const { env, unique, flow, signingKey, nextOutput, statusMatching, locks, freePort, sleep } = require('./env');

helper.init(require.resolve('node-red'));

const nodes = [gatewayNode, outNode];

// grants records each grant of node's lease (its afterGrant hook).
function grants(node) {
  const got = [];
  const waiters = [];
  node.afterGrant = (g) => {
    got.push(g);
    waiters.splice(0).forEach((w) => w(g));
  };
  got.next = (timeoutMs = 20000) => new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${node.id}: no grant within ${timeoutMs} ms`)), timeoutMs);
    waiters.push((g) => {
      clearTimeout(t);
      resolve(g);
    });
  });
  return got;
}

async function etcdCall(path, body) {
  const res = await fetch(env.etcd + path, { method: 'POST', body: JSON.stringify(body) });
  return res.json();
}

const b64 = (s) => Buffer.from(s).toString('base64');

// raiseFence moves actuator's fence to a token that etcd has issued as a
// revision (so every later grant is above it), and above token, without
// the lock. It returns that token.
async function raiseFence(actuator, token) {
  const k = b64(`/fencegate-test/${unique('rev')}`);
  let rev;
  do {
    const r = await etcdCall('/v3/kv/put', { key: k, value: b64('x') });
    rev = BigInt(r.header.revision);
  } while (rev <= BigInt(token));
  await etcdCall('/v3/kv/deleterange', { key: k });
  const c = mqtt.connect(env.broker.replace(/^tcp:/, 'mqtt:'), { clientId: unique('raiser') });
  await new Promise((resolve, reject) => {
    c.once('connect', resolve);
    c.once('error', reject);
  });
  await c.publishAsync(`fencegate/${env.gateway}/${actuator}/set`, `{"id":"${unique('raise')}","token":${rev},"holder":"a newer holder"}`, { qos: 1 });
  await c.endAsync();
  return rev;
}

// sendAs sends command c (token as BigInt) on conn and waits for its answer.
async function sendAs(conn, c) {
  const a = await conn.send(conn.prepare(c), { timeoutMs: 10000 });
  assert.strictEqual(a.outcome, 'applied', a.error);
  return a;
}

// commandsOn records the commands published on topic (parsed), from now
// on; end() stops.
async function commandsOn(topic) {
  const got = [];
  const c = mqtt.connect(env.broker.replace(/^tcp:/, 'mqtt:'), { clientId: unique('watch') });
  await new Promise((resolve, reject) => {
    c.once('connect', resolve);
    c.once('error', reject);
  });
  c.on('message', (t, payload) => got.push(JSON.parse(payload.toString())));
  await c.subscribeAsync(topic, { qos: 1 });
  got.end = () => c.endAsync();
  return got;
}

// errorsOf records node's errors; withMessage(n, re) asserts that one,
// and only one, was reported with the message whose n is n (as a catch
// node gets it), and that it matches re.
function errorsOf(node) {
  const errors = [];
  node.on('call:error', (call) => errors.push(call.args));
  errors.withMessage = (n, re) => {
    const linked = errors.filter(([, m]) => m && m.n === n);
    assert.strictEqual(linked.length, 1, `node.error with the message, for a catch node: ${errors.map(([e]) => String(e))}`);
    assert.match(String(linked[0][0].message || linked[0][0]), re);
  };
  return errors;
}

// runDriver runs the conformance driver for actuator of gateway gw and
// resolves with its exit code, stdout and stderr.
function runDriver(gw, actuator, state, ...flags) {
  return new Promise((resolve) => execFile(process.execPath, [path.join(__dirname, 'conformance-driver.js'),
    '--broker', env.broker, '--gateway', gw, '--etcd', env.etcd, '--actuator', actuator, '--holder', 'driver', '--ttl', '5', ...flags, state],
  { timeout: 60000 }, (err, stdout, stderr) => resolve({ code: err ? err.code : 0, stdout, stderr })));
}

// startGateway starts another gateway (FENCEGATE_TEST_GATEWAY_BIN, sim
// board, a store of its own) on the test broker, with one actuator, pump,
// and returns its id once it takes commands; it stops when test's suite
// ends.
async function startGateway(test) {
  const id = unique('nr-gw');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencegate-nr-'));
  const config = path.join(dir, 'gateway.yaml');
  fs.writeFileSync(config, `id: ${id}\nmqtt:\n  broker: ${env.broker}\nstore: ${path.join(dir, 'fence.db')}\nboard: sim\nhttp: ""\nactuators:\n  - {name: pump, pin: GPIO17}\n`);
  await runGateway({ id, dir, config });
  return id;
}

// runGateway starts gateway g ({id, dir, config}: its configuration and
// store, as startGateway made them, or as a killed one left them) and
// resolves once it takes commands.
async function runGateway(g) {
  const { id, config } = g;
  const p = spawn(env.gatewayBin, ['run', '--config', config, '--init'], { stdio: ['ignore', 'pipe', 'pipe'] });
  const i = started.indexOf(g);
  if (i >= 0) started.splice(i, 1);
  g.p = p;
  started.push(g);
  let log = '';
  await new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`gateway ${id} not ready within 20 s:\n${log}`)), 20000);
    const on = (d) => {
      log += d;
      if (/gateway ready/.test(log)) {
        clearTimeout(t);
        resolve();
      }
    };
    p.stdout.on('data', on);
    p.stderr.on('data', on);
    p.on('exit', (code) => reject(new Error(`gateway ${id} exited ${code}:\n${log}`)));
  });
}

const started = [];

after(async function () {
  for (const { p, dir } of started.splice(0)) {
    if (p.exitCode === null && p.signalCode === null) {
      p.kill('SIGTERM');
      await new Promise((r) => p.once('exit', r));
    }
    fs.rmSync(dir, { recursive: true, force: true });
  }
});

describe('fenced output in Node-RED (integration)', function () {
  this.timeout(90000);

  before(function () {
    if (!env.broker || !env.etcd || !env.gateway) this.skip();
  });

  beforeEach(function (done) {
    helper.startServer(done);
  });

  afterEach(async function () {
    await helper.unload();
    await new Promise((r) => helper.stopServer(r));
    // The gateways are this suite's own: no lock of them may outlive a flow,
    // neither a holder's nor a standby's place in the queue.
    const ours = [env.gateway, ...started.map((g) => g.id)];
    const left = (await locks()).filter((k) => ours.some((gw) => k.startsWith(`/fencegate/locks/${gw}/`)));
    assert.deepStrictEqual(left, [], 'locks left behind after the flow stopped');
  });

  it('loads, takes the lease, switches the pump on and sends the answer on', async function () {
    await helper.load(nodes, flow([{ id: 'out', actuator: 'pump' }]));
    const out = helper.getNode('out');
    const g = grants(out);
    const first = await g.next();
    assert.strictEqual(first.scope, 'pump');
    const logged = out.log.getCalls().filter((c) => c.thisValue === out).map((c) => String(c.args[0]));
    assert.ok(logged.includes(`pump: lease of scope pump granted: token ${first.token}, lock key ${first.key}`),
      `the grant is logged with its token and lock key (docs/controllers.md): ${JSON.stringify(logged)}`);
    const answer = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: 'on', topic: 'mine' });
    const msg = await answer;
    assert.strictEqual(msg.outcome, 'applied', JSON.stringify(msg));
    assert.strictEqual(msg.state, 'on');
    assert.strictEqual(msg.token, first.token);
    assert.deepStrictEqual(msg.fence, { token: first.token, seq: '1' }, 'the first message goes after the fence-only command (seq 0)');
    assert.strictEqual(msg.actuator, 'pump');
    assert.strictEqual(msg.scope, 'pump');
    assert.strictEqual(msg.topic, 'mine', 'the message goes on with its own properties');
    await statusMatching(out, new RegExp(`^token ${first.token}: applied on$`));
    const second = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: false });
    const m2 = await second;
    assert.strictEqual(m2.outcome, 'applied');
    assert.deepStrictEqual(m2.fence, { token: first.token, seq: '2' }, 'the next command has the next seq');
    assert.strictEqual(m2.state, 'off');
  });

  it('after a stale answer: emits it with the reread state, takes a new lease, never resends', async function () {
    // A long TTL: the node's keeper asks etcd about its lease only every
    // 10 s, so it does not see that its lease went before its command does.
    await helper.load(nodes, flow([{ id: 'out', actuator: 'valve' }], { ttl: 30 }));
    const out = helper.getNode('out');
    const helperNode = helper.getNode('out-out');
    const g = grants(out);
    const first = await g.next();
    const conn = helper.getNode('cfg').connection;
    await conn.waitState('valve', (s) => s.fence.token >= BigInt(first.token), { timeoutMs: 10000 });
    // A newer holder: the node's lease ends in etcd (revoked, as if it
    // expired), the test takes the lock and raises the fence with its token.
    await etcdCall('/v3/lease/revoke', { ID: first.lease });
    const newer = await leases.acquire(new Etcd(env.etcd), { gateway: env.gateway, scope: 'valve', ttl: 5 });
    let regrant;
    try {
      await sendAs(conn, { actuator: 'valve', token: newer.token, holder: 'a newer holder' });
      await conn.waitState('valve', (s) => s.fence.token >= newer.token, { timeoutMs: 10000 });
      const answer = nextOutput(helperNode);
      regrant = g.next();
      out.receive({ payload: 'on' });
      const msg = await answer;
      assert.strictEqual(msg.outcome, 'stale', JSON.stringify(msg));
      assert.strictEqual(msg.token, first.token);
      assert.deepStrictEqual(msg.fence, { token: String(newer.token), seq: '0' });
      assert.ok(msg.reread, 'the state was reread');
      assert.ok(BigInt(msg.reread.fence.token) >= newer.token);
      assert.strictEqual(msg.state, msg.reread.state);
    } finally {
      await newer.release();
    }
    const again = await regrant;
    assert.ok(BigInt(again.token) > newer.token, `the new token ${again.token} is above the fence ${newer.token}`);
    const next = nextOutput(helperNode);
    out.receive({ payload: 'off' });
    const m2 = await next;
    assert.strictEqual(m2.outcome, 'applied', JSON.stringify(m2));
    assert.strictEqual(m2.token, again.token);
    assert.deepStrictEqual(m2.fence, { token: again.token, seq: '1' });
  });

  it('never sends a message that came while it held a lease it then lost: the message goes out lease-lost', async function () {
    // Issue 34, 1: the whole Node-RED pauses past its lease; another
    // controller takes the scope and switches the valve off; Node-RED
    // resumes, and a message formed before the pause reaches the node
    // before it has seen its lease go. It must not be sent, under the old
    // lease or a new one.
    if (!env.gatewayBin) this.skip();
    await helper.load(nodes, flow([{ id: 'out', actuator: 'valve', holder: 'nr-paused' }], { ttl: 2 }));
    const out = helper.getNode('out');
    const g = grants(out);
    const first = await g.next();
    await statusMatching(out, /fence raised$/);
    const conn = helper.getNode('cfg').connection;
    const sent = await commandsOn(`fencegate/${env.gateway}/valve/set`);
    try {
      const answer = nextOutput(helper.getNode('out-out'));
      // The message arrives as the process resumes, before the node's timers run.
      setTimeout(() => out.receive({ payload: 'on', n: 1 }), 0);
      // The pause: spawnSync blocks this process (its timers, its sockets)
      // while the other controller waits out the node's lease and commits.
      const b = spawnSync(env.gatewayBin, ['send', '--broker', env.broker, '--gateway', env.gateway, '--actuator', 'valve',
        '--etcd', env.etcd, '--ttl', '2', '--holder', 'the new holder', '--timeout', '30s', 'off'], { encoding: 'utf8', timeout: 60000 });
      assert.strictEqual(b.status, 0, `gateway send: ${b.stdout}${b.stderr}`);
      const tokenB = BigInt(/granted token (\d+)/.exec(b.stdout + b.stderr)[1]);
      const resumed = sent.length;
      const msg = await answer;
      assert.strictEqual(msg.outcome, 'lease-lost', JSON.stringify(msg));
      assert.strictEqual(msg.n, 1);
      assert.strictEqual(msg.token, first.token, 'the token of the lease that was lost');
      assert.match(msg.error, new RegExp(`^not sent: the lease of token ${first.token} was lost`));
      assert.strictEqual(msg.state, 'off', 'the state as the new holder left it, reread');
      assert.deepStrictEqual(msg.fence, { token: String(tokenB), seq: '0' });
      assert.deepStrictEqual(msg.reread, { state: 'off', fence: { token: String(tokenB), seq: '0' } });
      await statusMatching(out, /fence raised$/); // a new lease, taken by itself
      await sleep(500);
      const afterResume = sent.slice(resumed).filter((c) => c.holder === 'nr-paused');
      assert.deepStrictEqual(afterResume.filter((c) => c.state !== undefined), [], 'no command with a state from the paused node after it resumed');
      assert.strictEqual(conn.states.get('valve').state, 'off', 'the valve is as the new holder left it');
      // A message that comes after the loss is fresh: sent under the new lease.
      const fresh = nextOutput(helper.getNode('out-out'));
      out.receive({ payload: 'on', n: 2 });
      const m2 = await fresh;
      assert.strictEqual(m2.outcome, 'applied', JSON.stringify(m2));
      assert.ok(BigInt(m2.token) > tokenB);
    } finally {
      await sent.end();
    }
  });

  it('raises the fence right after the grant: an older holder\'s late command is refused', async function () {
    await helper.load(nodes, flow([{ id: 'out', actuator: 'pump' }]));
    const out = helper.getNode('out');
    const g = await grants(out).next();
    const conn = helper.getNode('cfg').connection;
    const s = await conn.waitState('pump', (x) => x.fence.token === BigInt(g.token), { timeoutMs: 10000 });
    assert.strictEqual(s.fence.seq, 0n, 'the fence-only command has seq 0');
    await statusMatching(out, new RegExp(`^token ${g.token}: holding the lease, fence raised$`));
    // A command of an older holder (a lower token, above the fence before
    // the grant) arrives late: the raised fence refuses it.
    const late = await conn.send(conn.prepare({ actuator: 'pump', token: BigInt(g.token) - 1n, holder: 'an older holder', state: 'on' }), { timeoutMs: 10000 });
    assert.strictEqual(late.outcome, 'stale', JSON.stringify(late, (k, v) => (typeof v === 'bigint' ? String(v) : v)));
    assert.strictEqual(late.fence.token, BigInt(g.token));
  });

  it('refuses a command whose payload is over the gateway\'s limit, before sending it', async function () {
    await helper.load(nodes, flow([{ id: 'out', actuator: 'pump', holder: '\u0001'.repeat(128) }]));
    const out = helper.getNode('out');
    await grants(out).next();
    const err = new Promise((resolve) => out.once('call:error', (call) => resolve(call.args)));
    out.receive({ payload: 'on', commandId: '\u0001'.repeat(120) });
    const [e, msg] = await err;
    assert.match(String(e.message || e), /the command is \d+ bytes; the gateway takes at most 1024/);
    assert.strictEqual(msg.commandId, '\u0001'.repeat(120), 'the error goes with the message');
    await statusMatching(out, /^refused before sending: the command is \d+ bytes; the gateway takes at most 1024/);
  });

  it('drops a message kept longer than max age at takeover', async function () {
    // The test holds the valve's lease; the node waits as a standby.
    const mine = await leases.acquire(new Etcd(env.etcd), { gateway: env.gateway, scope: 'valve', ttl: 5 });
    try {
      await helper.load(nodes, flow([{ id: 'out', actuator: 'valve', maxAge: 1 }]));
      const out = helper.getNode('out');
      await statusMatching(out, /^waiting for lease$/);
      const kept = nextOutput(helper.getNode('out-out'));
      out.receive({ payload: 'on', n: 1 });
      await sleep(1500);
      const g = grants(out).next();
      await mine.release();
      await g;
      const m = await kept;
      assert.strictEqual(m.outcome, 'dropped', JSON.stringify(m));
      assert.strictEqual(m.n, 1);
      assert.match(m.error, /^kept \d+ s waiting for the lease, longer than max age 1 s: not sent$/);
      // A message that did not wait so long goes.
      const next = nextOutput(helper.getNode('out-out'));
      out.receive({ payload: 'off' });
      assert.strictEqual((await next).outcome, 'applied');
    } finally {
      await mine.release().catch(() => {});
    }
  });

  it('signs commands to the door with the key from the credentials', async function () {
    if (!env.keyFile) this.skip();
    const f = flow([{ id: 'out', actuator: 'door' }], { signer: 'ctl-a' });
    await helper.load(nodes, f, { cfg: { signingKey: signingKey() } });
    const out = helper.getNode('out');
    await grants(out).next();
    const answer = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: 'on' });
    const msg = await answer;
    assert.strictEqual(msg.outcome, 'applied', JSON.stringify(msg));
    assert.strictEqual(msg.state, 'on');
  });

  it('an unsigned command to the door is rejected as unsigned', async function () {
    await helper.load(nodes, flow([{ id: 'out', actuator: 'door' }]));
    const out = helper.getNode('out');
    await grants(out).next();
    const answer = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: 'on' });
    const msg = await answer;
    assert.strictEqual(msg.outcome, 'rejected');
    assert.strictEqual(msg.reason, 'unsigned');
  });

  it('two fenced outputs of one scope (two configurations) exclude each other; the standby takes over', async function () {
    // (A node's id must not be another's property value: Node-RED would
    // take it for a reference to a configuration node.)
    const f = [...flow([{ id: 'n-fan', actuator: 'fan' }]), ...flow([{ id: 'n-heater', actuator: 'heater' }], { id: 'cfg2' }, 'tab2')];
    await helper.load(nodes, f);
    const fan = helper.getNode('n-fan');
    const heater = helper.getNode('n-heater');
    const gf = grants(fan);
    const gh = grants(heater);
    const holder = await Promise.race([gf.next().then((g) => ['fan', g]), gh.next().then((g) => ['heater', g])]);
    const [holding, standby, standbyGrants] = holder[0] === 'fan' ? [fan, heater, gh] : [heater, fan, gf];
    assert.strictEqual(holder[1].scope, 'climate');
    await statusMatching(standby, /^waiting for lease$/);
    const standbyOut = helper.getNode(`${standby.id}-out`);
    // While it waits, a newer message supersedes an older one.
    const superseded = nextOutput(standbyOut);
    standby.receive({ payload: 'on', n: 1 });
    standby.receive({ payload: 'off', n: 2 });
    const s1 = await superseded;
    assert.strictEqual(s1.outcome, 'superseded');
    assert.strictEqual(s1.n, 1);
    await sleep(1000);
    assert.strictEqual(standbyGrants.length, 0, 'the standby got no lease while the other holds it');
    const sent = nextOutput(helper.getNode(`${holding.id}-out`));
    holding.receive({ payload: 'on' });
    assert.strictEqual((await sent).outcome, 'applied');
    // The holder's lease goes (revoked, as if it expired): it stops, and
    // the standby is granted and sends the message it kept.
    const taken = standbyGrants.next();
    const kept = nextOutput(standbyOut);
    await etcdCall('/v3/lease/revoke', { ID: holder[1].lease });
    const g2 = await taken;
    assert.ok(BigInt(g2.token) > BigInt(holder[1].token));
    const m = await kept;
    assert.strictEqual(m.outcome, 'applied', JSON.stringify(m));
    assert.strictEqual(m.n, 2);
    assert.strictEqual(m.token, g2.token);
    await statusMatching(holding, /^(lease lost|waiting for lease)$/);
    // The old holder sends nothing under its lost token: its message waits
    // for a lease of its own.
    const waited = nextOutput(helper.getNode(`${holding.id}-out`), 1500).then((msg) => `sent: ${JSON.stringify(msg)}`, () => 'waited');
    holding.receive({ payload: 'off' });
    assert.strictEqual(await waited, 'waited');
  });

  it('keeps the password and the signing key out of the flow', async function () {
    const key = env.keyFile ? signingKey() : '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n';
    const password = unique('secret');
    const f = flow([{ id: 'out', actuator: 'pump' }], { signer: 'ctl-a', username: 'ctl' });
    await helper.load(nodes, f, { cfg: { password, signingKey: key } });
    const exported = JSON.stringify(helper._redNodes.getFlows());
    const body = key.replace(/-----[A-Z ]+-----/g, '').trim().split('\n')[0];
    assert.ok(!exported.includes(password), 'the password is in the flow');
    assert.ok(!exported.includes(body), 'the signing key is in the flow');
    const creds = helper._redNodes.getCredentials('cfg');
    assert.strictEqual(creds.password, password, 'the password is among the credentials');
    assert.strictEqual(creds.signingKey, key, 'the key is among the credentials');
  });

  it('says clearly when the broker is unreachable', async function () {
    const port = await freePort();
    await helper.load(nodes, flow([{ id: 'out', actuator: 'pump' }], { broker: `tcp://127.0.0.1:${port}` }));
    const st = await statusMatching(helper.getNode('out'), /^broker unreachable/);
    assert.strictEqual(st.text, `broker unreachable: connection refused: nothing listens at 127.0.0.1:${port} (is the MQTT broker running? is the URL right?)`);
  });

  it('says clearly when etcd is unreachable', async function () {
    const port = await freePort();
    await helper.load(nodes, flow([{ id: 'out', actuator: 'pump' }], { etcd: `http://127.0.0.1:${port}` }));
    const st = await statusMatching(helper.getNode('out'), /^etcd unreachable/);
    assert.strictEqual(st.text, `etcd unreachable: connection refused: nothing listens at 127.0.0.1:${port} (is etcd running? is the URL right?)`);
  });

  it('runs the example flow: inject on, the fenced pump, debug', async function () {
    const example = require('../examples/fenced-pump.json').map((n) => (n.type === 'fencegate-gateway' ?
      { ...n, broker: env.broker, etcd: env.etcd, gatewayId: env.gateway, ttl: 5 } : n));
    const inject = require('@node-red/nodes/core/common/20-inject');
    const debug = require('@node-red/nodes/core/common/21-debug');
    await helper.load([...nodes, inject, debug], example);
    const out = helper.getNode(example.find((n) => n.type === 'fencegate-out').id);
    const g = await grants(out).next();
    const dbg = helper.getNode(example.find((n) => n.type === 'debug').id);
    const seen = new Promise((resolve) => dbg.once('input', resolve));
    helper.getNode(example.find((n) => n.type === 'inject' && n.payload === 'on').id).receive({});
    const msg = await seen;
    assert.strictEqual(msg.outcome, 'applied', JSON.stringify(msg));
    assert.strictEqual(msg.token, g.token);
    assert.strictEqual(msg.state, 'on');
  });

  it('stops, and takes no lease again, when the fence is above every revision etcd has issued', async function () {
    // Issue 34, 2. On a gateway of its own: the fence it leaves behind passes no token.
    if (!env.gatewayBin) this.skip();
    this.timeout(120000);
    const gw = await startGateway(this);
    const rev = async () => BigInt((await etcdCall('/v3/kv/range', { key: b64('/fencegate/locks/'), count_only: true })).header.revision);
    const typed = (await rev()) + 1000000000n;
    const conn = new GatewayConnection({ broker: env.broker, gateway: gw });
    conn.start();
    await conn.whenReady();
    await sendAs(conn, { actuator: 'pump', token: typed, holder: 'typed by hand' });
    await conn.close();
    const sent = await commandsOn(`fencegate/${gw}/+/set`);
    try {
      await helper.load(nodes, flow([{ id: 'out', actuator: 'pump' }], { gatewayId: gw }));
      const out = helper.getNode('out');
      const errors = errorsOf(out);
      const answer = nextOutput(helper.getNode('out-out'));
      out.receive({ payload: 'on', n: 1 });
      const msg = await answer;
      assert.strictEqual(msg.outcome, 'stale', JSON.stringify(msg));
      assert.strictEqual(msg.n, 1);
      assert.strictEqual(msg.fence.token, String(typed));
      const why = new RegExp(`the gateway's fence token ${typed} is above every revision this etcd has issued`);
      assert.match(msg.error, why);
      await statusMatching(out, new RegExp(`^stopped: the gateway's fence token ${typed} is above every revision this etcd has issued`));
      assert.strictEqual(out.status.getCalls().filter((c) => c.thisValue === out).pop().args[0].fill, 'red');
      errors.withMessage(1, why);
      // It stays stopped: no lock requested, no command sent, for 25 s.
      await sleep(1000); // its lease released
      const revBefore = await rev();
      const commandsBefore = sent.length;
      const later = nextOutput(helper.getNode('out-out'));
      out.receive({ payload: 'off', n: 2 });
      const m2 = await later;
      assert.strictEqual(m2.outcome, 'refused', JSON.stringify(m2));
      assert.strictEqual(m2.reason, 'fence-ahead');
      assert.match(m2.error, why);
      await sleep(25000);
      assert.strictEqual(await rev(), revBefore, 'etcd\'s revision moved: the node requested a lease again');
      assert.deepStrictEqual(sent.slice(commandsBefore), [], 'the node sent commands again');
    } finally {
      await sent.end();
    }
    // The conformance driver stops with the error too: exit 3, the reason on stderr.
    const d = await runDriver(gw, 'pump', 'on');
    assert.strictEqual(d.code, 3, d.stderr);
    assert.match(d.stderr, /above every revision/);
  });

  it('the conformance driver: no answer while the gateway is offline exits 6 and says so', async function () {
    if (!env.gatewayBin) this.skip();
    const gw = await startGateway(this);
    const { p } = started.find((g) => g.id === gw);
    p.kill('SIGTERM'); // a clean stop: its status is offline, its states stay retained
    await new Promise((r) => p.once('exit', r));
    const d = await runDriver(gw, 'pump', 'on', '--timeout', '4');
    assert.strictEqual(d.code, 6, d.stderr);
    assert.match(d.stderr, /offline/);
  });

  it('stops when the fence passed its token while it still holds the lock (etcd handed the token out again)', async function () {
    await helper.load(nodes, flow([{ id: 'out', actuator: 'valve' }]));
    const out = helper.getNode('out');
    const first = await grants(out).next();
    const conn = helper.getNode('cfg').connection;
    await conn.waitState('valve', (s) => s.fence.token >= BigInt(first.token), { timeoutMs: 10000 });
    // Raised by no holder of the lock: the node holds it all along.
    const raised = await raiseFence('valve', first.token);
    await conn.waitState('valve', (s) => s.fence.token >= raised, { timeoutMs: 10000 });
    const answer = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: 'on' });
    const msg = await answer;
    assert.strictEqual(msg.outcome, 'stale');
    assert.match(msg.error, new RegExp(`the gateway's fence token ${raised} is at or above the token ${first.token} that this etcd has just granted to the lock this holder still holds`));
    await statusMatching(out, /^stopped: /);
  });

  it('a gateway killed as a flow deploys: the fence-only command is resent unchanged, not re-raised by itself, and the node goes on once the gateway is back', async function () {
    // The broker queues what the node publishes for the crashed gateway's
    // session; on restart the gateway takes the queue in order. Copies of
    // one command are answered duplicate; commands under new ids were
    // answered stale, "equals the fence", and the node stopped.
    if (!env.gatewayBin) this.skip();
    this.timeout(120000);
    const gw = await startGateway(this);
    const g = started.find((x) => x.id === gw);
    // "gateway ready" may come before its retained states reach the
    // broker: kill it only once the pump's is there, which the node
    // reads its scope from (else it waits for the scope, not a grant).
    const states = await commandsOn(`fencegate/${gw}/pump/state`);
    for (let i = 0; states.length === 0 && i < 200; i++) await sleep(50);
    await states.end();
    assert.ok(states.length > 0, `no retained state of pump from gateway ${gw}`);
    g.p.kill('SIGKILL');
    await new Promise((r) => g.p.once('exit', r));
    const sent = await commandsOn(`fencegate/${gw}/pump/set`);
    try {
      await helper.load(nodes, flow([{ id: 'out', actuator: 'pump', timeout: 3 }], { gatewayId: gw }));
      const out = helper.getNode('out');
      const errors = errorsOf(out);
      const first = await grants(out).next();
      const fenceOnly = () => sent.filter((c) => String(c.token) === first.token && !('seq' in c) && !('state' in c));
      await sleep(4000); // past Answer within (3 s) once
      const before = fenceOnly().length;
      assert.ok(before >= 1, 'the fence-only command was published');
      await sleep(5000); // and twice
      assert.strictEqual(fenceOnly().length, before, 'the fence-only command was raised again with no message waiting');
      await runGateway(g);
      await statusMatching(out, /fence raised/, 20000);
      const answer = nextOutput(helper.getNode('out-out'));
      out.receive({ payload: 'on' });
      const msg = await answer;
      assert.strictEqual(msg.outcome, 'applied', JSON.stringify(msg));
      assert.deepStrictEqual(msg.fence, { token: first.token, seq: '1' });
      const last = await statusMatching(out, new RegExp(`^token ${first.token}: applied on$`));
      assert.strictEqual(last.fill, 'green');
      assert.deepStrictEqual(new Set(fenceOnly().map((c) => c.id)).size, 1, `one fence-only command, sent again unchanged: ${JSON.stringify(fenceOnly())}`);
      assert.deepStrictEqual(errors.map(([e]) => String(e)), []);
    } finally {
      await sent.end();
    }
  });

  // copyFirst makes node publish, right after its grant and before its
  // fence-only command (on its own connection, so in that order), a
  // fence-only command under its token with seq and holder, under an id of
  // its own: the gateway answers the node's fence-only command stale.
  function copyFirst(out, gw, seq, holder) {
    const got = grants(out);
    const conn = helper.getNode('cfg').connection;
    const recorded = out.afterGrant;
    out.afterGrant = (g) => {
      conn.client.publish(`fencegate/${gw}/pump/set`, `{"id":"${unique('copy')}","token":${g.token}${seq ? `,"seq":${seq}` : ''},"holder":${JSON.stringify(holder)}}`, { qos: 1 });
      recorded(g);
    };
    return got;
  }

  it('a stale answer at its own token and a seq it sent itself (its fence-only command under another id) is its own fence: it goes on', async function () {
    if (!env.gatewayBin) this.skip();
    const gw = await startGateway(this);
    await helper.load(nodes, flow([{ id: 'out', actuator: 'pump', holder: 'me' }], { gatewayId: gw }));
    const out = helper.getNode('out');
    const errors = errorsOf(out);
    const first = await copyFirst(out, gw, 0, 'me').next();
    await statusMatching(out, new RegExp(`^token ${first.token}: holding the lease, fence raised \\(at its own ${first.token}/0\\)$`));
    const answer = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: 'on' });
    const msg = await answer;
    assert.strictEqual(msg.outcome, 'applied', JSON.stringify(msg));
    assert.deepStrictEqual(msg.fence, { token: first.token, seq: '1' });
    await statusMatching(out, new RegExp(`^token ${first.token}: applied on$`));
    assert.deepStrictEqual(errors.map(([e]) => String(e)), []);
  });

  it('stops when the fence is at its own token but a seq it never sent (another holder given the same token)', async function () {
    if (!env.gatewayBin) this.skip();
    const gw = await startGateway(this);
    await helper.load(nodes, flow([{ id: 'out', actuator: 'pump', holder: 'me' }], { gatewayId: gw }));
    const out = helper.getNode('out');
    const first = await copyFirst(out, gw, 7, 'another holder').next();
    await statusMatching(out, new RegExp(`^stopped: the gateway's fence token ${first.token} is at or above the token ${first.token}`));
    const answer = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: 'on' });
    const msg = await answer;
    assert.strictEqual(msg.outcome, 'refused', JSON.stringify(msg));
    assert.strictEqual(msg.reason, 'fence-ahead');
  });

  it('leaves no abort listener behind after 100 lease cycles', async function () {
    // Issue 34, 7: each cycle added listeners to the node's long-lived
    // signal, and Node warned (MaxListenersExceededWarning) after ten.
    this.timeout(180000);
    const warnings = [];
    const onWarning = (w) => warnings.push(w);
    process.on('warning', onWarning);
    try {
      await helper.load(nodes, flow([{ id: 'out', actuator: 'pump' }], { ttl: 2 }));
      const out = helper.getNode('out');
      const g = grants(out);
      let grant = await g.next();
      const counts = [];
      for (let i = 1; i <= 100; i++) {
        // The lease is lost: revoked in etcd, and the keeper asks at once.
        const next = g.next();
        await etcdCall('/v3/lease/revoke', { ID: grant.lease });
        await grant.hold.keeper.tick();
        grant = await next;
        counts.push(getEventListeners(out.stopSignal, 'abort').length);
      }
      assert.ok(Math.max(...counts) <= 2, `abort listeners on the node's signal after each of 100 cycles: ${counts.join(' ')}`);
    } finally {
      process.off('warning', onWarning);
    }
    assert.deepStrictEqual(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map(String), []);
  });

  it('a mistyped actuator: red status naming the gateway\'s actuators, the error with the message, which goes out refused', async function () {
    // Issue 34, 8.
    await helper.load(nodes, flow([{ id: 'out', actuator: 'pmup' }]));
    const out = helper.getNode('out');
    const errors = errorsOf(out);
    const answer = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: 'on', n: 1 });
    const msg = await answer;
    const why = new RegExp(`^no actuator pmup on gateway ${env.gateway}; its actuators are (.+, )?pump(, .+)?$`);
    assert.strictEqual(msg.outcome, 'refused', JSON.stringify(msg));
    assert.strictEqual(msg.reason, 'unknown-actuator');
    assert.match(msg.error, why);
    assert.strictEqual(msg.n, 1);
    const st = await statusMatching(out, why);
    assert.strictEqual(st.fill, 'red');
    errors.withMessage(1, why);
    // The next message is refused at once.
    const t0 = Date.now();
    const again = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: 'off', n: 2 });
    const m2 = await again;
    assert.strictEqual(m2.outcome, 'refused');
    assert.ok(Date.now() - t0 < 1000);
  });

  it('leaves no lease in etcd when the flow stops', async function () {
    await helper.load(nodes, flow([{ id: 'out', actuator: 'pump' }]));
    const out = helper.getNode('out');
    const g = await grants(out).next();
    assert.ok((await locks()).includes(g.key), `the lock key ${g.key} is there while held`);
    const answer = nextOutput(helper.getNode('out-out'));
    out.receive({ payload: 'off' });
    await answer;
    await helper.unload();
    assert.ok(!(await locks()).includes(g.key), 'the lock key is gone');
    const ttl = await etcdCall('/v3/lease/timetolive', { ID: g.lease });
    assert.strictEqual(ttl.TTL, '-1', `the lease is revoked: ${JSON.stringify(ttl)}`);
  });
});
