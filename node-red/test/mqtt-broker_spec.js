'use strict';

// A gateway configuration that takes its broker from one of Node-RED's own
// mqtt-broker configuration nodes (and its tls-config node): the URL, the
// TLS settings and the user name and password come from there, the
// connection stays the package's own. Without services: what it takes,
// and what it refuses. With them (FENCEGATE_TEST_ETCD and
// FENCEGATE_TEST_GATEWAY_BIN, see test/env.js): a Mosquitto of this test's
// own with a TLS listener that wants a password, a gateway on it, and a
// fenced output that commands it through the mqtt-broker node's settings;
// and the red status of a wrong password.

const assert = require('node:assert');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const net = require('node:net');
const os = require('node:os');
const path = require('node:path');
const vm = require('node:vm');
const helper = require('node-red-node-test-helper');
const gatewayNode = require('../nodes/fencegate-gateway');
const outNode = require('../nodes/fencegate-out');
const tlsNode = require('@node-red/nodes/core/network/05-tls.js');
const mqttNode = require('@node-red/nodes/core/network/10-mqtt.js');
const { env, unique, statusMatching, nextOutput, freePort } = require('./env');

helper.init(require.resolve('node-red'));
const nodes = [gatewayNode, outNode, tlsNode, mqttNode];

// flow returns a tab with an mqtt-broker node (id mb, o overriding its
// properties), a gateway configuration that names it (c overriding), and a
// fenced output of the pump wired to a helper node.
function flow(o = {}, c = {}) {
  return [
    { id: 'tab1', type: 'tab' },
    { id: 'mb', type: 'mqtt-broker', name: 'site broker', broker: '127.0.0.1', port: '1883', usetls: false, protocolVersion: '4',
      keepalive: '60', cleansession: true, autoConnect: true, ...o },
    // Its own broker is one where nothing listens: it must not be used.
    { id: 'cfg', type: 'fencegate-gateway', mqttBroker: 'mb', broker: 'tcp://127.0.0.1:1', gatewayId: env.gateway || 'gw',
      prefix: 'fencegate', etcd: env.etcd || 'http://127.0.0.1:2379', ttl: 5, ...c },
    { id: 'out', z: 'tab1', type: 'fencegate-out', gateway: 'cfg', actuator: 'pump', holder: unique('nr'), timeout: 20, wires: [['seen']] },
    { id: 'seen', z: 'tab1', type: 'helper' },
  ];
}

function tlsConfig(o) {
  return { id: 'tls', type: 'tls-config', cert: '', key: '', ca: '', verifyservercert: true, ...o };
}

async function unload() {
  await helper.unload();
  await new Promise((r) => helper.stopServer(r));
}

describe('the broker of an mqtt-broker node (no services)', function () {
  this.timeout(20000);
  let dir;
  before(function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencegate-mb-'));
  });
  after(function () {
    fs.rmSync(dir, { recursive: true, force: true });
  });
  beforeEach(function (done) {
    helper.startServer(done);
  });
  afterEach(unload);

  it('connects with its server, port, user name and password, on a connection of its own', async function () {
    const port = await freePort();
    await helper.load(nodes, flow({ port: String(port), clientid: 'the-broker-nodes-id', cleansession: false }),
      { mb: { user: 'controller', password: 'pw-of-the-broker-node' } });
    const cfg = helper.getNode('cfg');
    assert.strictEqual(cfg.configError, undefined);
    const c = cfg.connection;
    assert.strictEqual(c.url, `mqtt://127.0.0.1:${port}`);
    assert.strictEqual(c.options.username, 'controller');
    assert.strictEqual(c.options.password, 'pw-of-the-broker-node');
    assert.strictEqual(c.options.clean, true, 'a clean session, whatever the broker node says');
    assert.match(c.clientId, new RegExp(`^nodered-${c.gateway}-[0-9a-f]{10}$`), 'a client id of its own');
    assert.strictEqual(c.reply, `fencegate/${c.gateway}/reply/controller/${c.clientId}`);
    assert.strictEqual(helper.getNode('mb').client, undefined, 'the mqtt-broker node itself does not connect');
    const st = await statusMatching(helper.getNode('out'), /^broker unreachable/);
    assert.match(st.text, new RegExp(`^broker unreachable: connection refused: nothing listens at 127.0.0.1:${port} .*\\(the broker settings of mqtt-broker node "site broker"\\)$`));
  });

  it('takes the TLS settings of its tls-config node', async function () {
    const ca = path.join(dir, 'ca.crt');
    fs.writeFileSync(ca, 'the CA file\n');
    await helper.load(nodes, [...flow({ broker: 'localhost', port: '8883', usetls: true, tls: 'tls' }),
      tlsConfig({ ca, servername: 'broker.lan', alpnprotocol: 'mqtt' })], { mb: { user: 'u', password: 'p' } });
    const c = helper.getNode('cfg').connection;
    assert.strictEqual(c.url, 'mqtts://localhost:8883');
    assert.strictEqual(String(c.options.ca), 'the CA file\n');
    assert.strictEqual(c.options.servername, 'broker.lan');
    assert.deepStrictEqual(c.options.ALPNProtocols, ['mqtt']);
    assert.strictEqual(c.options.rejectUnauthorized, true);
    assert.ok(!helper.log().args.some((a) => /without verifying/.test(JSON.stringify(a))));
  });

  it('warns when the broker\'s certificate is not verified', async function () {
    await helper.load(nodes, [...flow({ broker: 'localhost', port: '8883', usetls: true, tls: 'tls' }), tlsConfig({ verifyservercert: false })]);
    const cfg = helper.getNode('cfg');
    assert.strictEqual(cfg.connection.options.rejectUnauthorized, false);
    const warned = cfg.warn.getCalls().filter((x) => x.thisValue === cfg).map((x) => String(x.args[0]));
    assert.deepStrictEqual(warned, ['TLS to the broker mqtts://localhost:8883 without verifying its certificate: the TLS configuration of mqtt-broker node "site broker" has "Verify server certificate" off (or it has none)']);
  });

  for (const [what, nodesOf, re] of [
    ['an mqtt-broker node that is not deployed', (f) => f.filter((n) => n.id !== 'mb'),
      /^gateway configuration: its MQTT broker node mb is not deployed \(deleted, or disabled\?\): choose another, or none and set the broker here$/],
    ['a node of another type', (f) => [...f.filter((n) => n.id !== 'mb'), tlsConfig({ id: 'mb' })],
      /^gateway configuration: its MQTT broker node mb is a tls-config node, not an mqtt-broker/],
    ['a broker over WebSocket', (f) => f.map((n) => (n.id === 'mb' ? { ...n, broker: 'ws://127.0.0.1:9001/mqtt' } : n)),
      /^gateway configuration: mqtt-broker node "site broker" connects over WebSocket \(ws:\/\/127.0.0.1:9001\/mqtt\), which the fencegate nodes do not: give it the broker's MQTT port \(TCP or TLS\), or set the broker in this configuration instead$/],
  ]) {
    it(`says what is wrong with ${what}`, async function () {
      await helper.load(nodes, nodesOf(flow()));
      const st = await statusMatching(helper.getNode('out'), /gateway configuration/);
      assert.strictEqual(st.fill, 'red');
      assert.match(st.text, re);
    });
  }
});

describe('fencegate-gateway in the editor', function () {
  // The node's definition, as the editor's RED.nodes.registerType gets it.
  function definition() {
    const html = fs.readFileSync(path.join(__dirname, '..', 'nodes', 'fencegate-gateway.html'), 'utf8');
    const script = html.match(/<script type="text\/javascript">([\s\S]*?)<\/script>/)[1];
    let def;
    const RED = {
      nodes: { registerType: (type, d) => { def = d; }, node: (id) => ({ mb: { name: '', broker: 'broker.lan', port: '8883' } })[id] },
      validators: { regex: (re) => (v) => re.test(v), number: () => (v) => !isNaN(Number(v)) },
    };
    vm.runInNewContext(script, { RED });
    return def;
  }

  it('offers the mqtt-broker nodes, and wants its own broker only without one', function () {
    const d = definition();
    assert.deepStrictEqual({ ...d.defaults.mqttBroker }, { value: '', type: 'mqtt-broker', required: false });
    const valid = (node) => d.defaults.broker.validate.call(node, node.broker);
    assert.strictEqual(valid({ mqttBroker: '', broker: 'tcp://127.0.0.1:1883' }), true);
    assert.strictEqual(valid({ mqttBroker: '', broker: '' }), false);
    assert.strictEqual(valid({ mqttBroker: '', broker: 'http://x' }), false);
    assert.strictEqual(valid({ mqttBroker: 'mb', broker: '' }), true);
    assert.strictEqual(d.label.call({ gatewayId: 'gw', mqttBroker: 'mb', broker: 'tcp://127.0.0.1:1883' }), 'gw @ broker.lan:8883');
    assert.strictEqual(d.label.call({ gatewayId: 'gw', mqttBroker: '', broker: 'tcp://127.0.0.1:1883' }), 'gw @ tcp://127.0.0.1:1883');
  });
});

// program returns whether name is on PATH.
function program(name) {
  try {
    execFileSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' });
    return true;
  } catch (e) {
    return false;
  }
}

function listening(port) {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => {
      s.destroy();
      resolve(true);
    });
    s.on('error', () => resolve(false));
  });
}

// waitFor resolves once check() does, within ms.
async function waitFor(what, check, ms, log) {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`${what} within ${ms} ms:\n${log ? log() : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

describe('the broker of an mqtt-broker node, over TLS with a password (integration)', function () {
  this.timeout(60000);
  const procs = [];
  let dir;
  let gateway;
  let tlsPort;

  // start runs a program of this suite's, with its output in .log.
  function start(cmd, args) {
    const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    p.log = '';
    p.stdout.on('data', (d) => { p.log += d; });
    p.stderr.on('data', (d) => { p.log += d; });
    procs.push(p);
    return p;
  }

  before(async function () {
    const missing = ['mosquitto', 'mosquitto_passwd', 'openssl'].filter((p) => !program(p));
    if (!env.etcd || !env.gatewayBin) this.skip();
    if (missing.length) {
      if (process.env.CI === 'true') throw new Error(`not installed: ${missing.join(', ')}`);
      this.skip();
    }
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencegate-mb-tls-'));
    const sh = (script) => execFileSync('sh', ['-ec', script], { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
    // As docs/controllers.md makes them (Over TLS, with a password).
    sh('openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=test CA" -keyout ca.key -out ca.crt\n' +
      'openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=localhost" -keyout broker.key -out broker.csr\n' +
      "printf 'subjectAltName=DNS:localhost,IP:127.0.0.1\\nextendedKeyUsage=serverAuth\\n' > broker.ext\n" +
      'openssl x509 -req -in broker.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile broker.ext -out broker.crt\n' +
      'mosquitto_passwd -c -b passwd controller the-controller-password');
    const plain = await freePort();
    tlsPort = await freePort();
    fs.writeFileSync(path.join(dir, 'mosquitto.conf'), ['per_listener_settings true', `listener ${plain} 127.0.0.1`, 'allow_anonymous true',
      `listener ${tlsPort} 127.0.0.1`, `cafile ${dir}/ca.crt`, `certfile ${dir}/broker.crt`, `keyfile ${dir}/broker.key`,
      'allow_anonymous false', `password_file ${dir}/passwd`, 'user root', ''].join('\n'));
    const m = start('mosquitto', ['-c', path.join(dir, 'mosquitto.conf')]);
    await waitFor('mosquitto not listening', async () => (await listening(plain)) && listening(tlsPort), 10000, () => m.log);
    // The gateway on the plain listener.
    gateway = unique('nr-mb');
    fs.writeFileSync(path.join(dir, 'gateway.yaml'),
      `id: ${gateway}\nmqtt:\n  broker: tcp://127.0.0.1:${plain}\nstore: ${dir}/fence.db\nboard: sim\nhttp: ""\nactuators:\n  - {name: pump, pin: GPIO17}\n`);
    const g = start(env.gatewayBin, ['run', '--config', path.join(dir, 'gateway.yaml'), '--init']);
    await waitFor('gateway not ready', () => /gateway ready/.test(g.log), 20000, () => g.log);
  });

  after(async function () {
    for (const p of procs.reverse()) {
      if (p.exitCode === null) {
        p.kill('SIGTERM');
        await new Promise((r) => p.once('exit', r));
      }
    }
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  beforeEach(function (done) {
    helper.startServer(done);
  });
  afterEach(unload);

  function tlsFlow() {
    return [...flow({ broker: 'localhost', port: String(tlsPort), usetls: true, tls: 'tls' }, { gatewayId: gateway }),
      tlsConfig({ ca: path.join(dir, 'ca.crt') })];
  }

  it('commands the gateway with the mqtt-broker node\'s address, TLS settings and password: applied', async function () {
    await helper.load(nodes, tlsFlow(), { mb: { user: 'controller', password: 'the-controller-password' } });
    const out = helper.getNode('out');
    await statusMatching(out, /holding the lease/);
    const answer = nextOutput(helper.getNode('seen'));
    out.receive({ payload: 'on' });
    const msg = await answer;
    assert.strictEqual(msg.outcome, 'applied', JSON.stringify(msg));
    assert.strictEqual(msg.state, 'on');
    assert.strictEqual(helper.getNode('cfg').connection.url, `mqtts://localhost:${tlsPort}`);
  });

  it('a wrong password on the mqtt-broker node: a red status that says so', async function () {
    await helper.load(nodes, tlsFlow(), { mb: { user: 'controller', password: 'not-the-password' } });
    const st = await statusMatching(helper.getNode('out'), /refused/);
    assert.strictEqual(st.fill, 'red');
    assert.strictEqual(st.text, `the broker localhost:${tlsPort} refused this connection: not authorized (the user name, password or client certificate of mqtt-broker node "site broker")`);
  });
});
