'use strict';

// The connection against a broker of the test's own (mqtt-packet on a TCP
// server) that does not acknowledge a command: MQTT.js keeps each such
// publish and publishes it again on reconnect. A command given up, or
// whose lease is lost, must not go out again that way. Needs no services.

const assert = require('node:assert');
const net = require('node:net');
const mqttPacket = require('mqtt-packet');
const wire = require('../lib/wire');
const { GatewayConnection, TimeoutError } = require('../lib/connection');

// fakeBroker accepts clients, answers CONNECT and SUBSCRIBE, records every
// PUBLISH and acknowledges none but those published again (dup: MQTT.js
// replays its store one packet at a time, each after the last's
// acknowledgement, and subscribes only then). drop() cuts every
// connection.
async function fakeBroker() {
  const b = { publishes: [], sockets: new Set(), connects: 0 };
  b.server = net.createServer((sock) => {
    b.sockets.add(sock);
    sock.on('close', () => b.sockets.delete(sock));
    sock.on('error', () => {});
    const parser = mqttPacket.parser({ protocolVersion: 4 });
    const write = (p) => sock.write(mqttPacket.generate(p, { protocolVersion: 4 }));
    parser.on('packet', (p) => {
      if (p.cmd === 'connect') {
        b.connects++;
        write({ cmd: 'connack', returnCode: 0, sessionPresent: false });
      } else if (p.cmd === 'subscribe') {
        write({ cmd: 'suback', messageId: p.messageId, granted: p.subscriptions.map(() => 1) });
      } else if (p.cmd === 'publish') {
        b.publishes.push({ topic: p.topic, payload: p.payload.toString(), dup: p.dup });
        if (p.dup) write({ cmd: 'puback', messageId: p.messageId });
      } else if (p.cmd === 'pingreq') {
        write({ cmd: 'pingresp' });
      }
    });
    sock.on('data', (d) => parser.parse(d));
  });
  await new Promise((r) => b.server.listen(0, '127.0.0.1', r));
  b.url = `tcp://127.0.0.1:${b.server.address().port}`;
  b.drop = () => {
    for (const s of b.sockets) s.destroy();
  };
  b.close = () => {
    b.drop();
    return new Promise((r) => b.server.close(r));
  };
  return b;
}

function until(check, what, timeoutMs = 10000) {
  return new Promise((resolve, reject) => {
    const start = Date.now();
    const poll = () => {
      if (check()) return resolve();
      if (Date.now() - start > timeoutMs) return reject(new Error(`${what}: not within ${timeoutMs} ms`));
      setTimeout(poll, 20);
    };
    poll();
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

describe('connection (a broker that acknowledges nothing)', function () {
  this.timeout(20000);
  let broker;
  let conn;
  beforeEach(async function () {
    broker = await fakeBroker();
    conn = new GatewayConnection({ broker: broker.url, gateway: 'gw' });
    conn.start();
    await conn.whenReady();
  });
  afterEach(async function () {
    await conn.close();
    await broker.close();
  });

  // reconnect cuts the connection and waits until it is back and ready.
  async function reconnect() {
    const before = broker.connects;
    broker.drop();
    await until(() => broker.connects > before && conn.ready, 'reconnected');
    await sleep(300); // time for anything MQTT.js would publish again
  }

  it('publishes nothing under a lost lease on reconnect', async function () {
    const lost = new AbortController();
    const c = conn.prepare({ actuator: 'pump', token: 5n, state: 'on' });
    const answer = conn.send(c, { timeoutMs: 8000, mayResend: () => !lost.signal.aborted, withdraw: lost.signal });
    answer.catch(() => {});
    await until(() => broker.publishes.length === 1, 'the command published');
    lost.abort();
    await reconnect();
    assert.deepStrictEqual(broker.publishes.map((p) => p.dup), [false], 'published once, not again after the lease was lost');
  });

  it('publishes nothing of a command given up (timed out) on reconnect', async function () {
    const c = conn.prepare({ actuator: 'pump', token: 5n, state: 'on' });
    await assert.rejects(conn.send(c, { timeoutMs: 300 }), TimeoutError);
    assert.strictEqual(broker.publishes.length, 1);
    await reconnect();
    assert.strictEqual(broker.publishes.length, 1, 'published once, not again after it was given up');
  });

  it('publishes a command it still waits for again on reconnect', async function () {
    const c = conn.prepare({ actuator: 'pump', token: 5n, state: 'on' });
    const answer = conn.send(c, { timeoutMs: 8000 });
    answer.catch(() => {});
    await until(() => broker.publishes.length === 1, 'the command published');
    await reconnect();
    assert.ok(broker.publishes.length >= 2, 'published again after the reconnect');
    assert.ok(broker.publishes.every((p) => p.payload === broker.publishes[0].payload), 'unchanged');
  });

  it('refuses a command whose payload is over the gateway\'s limit, before anything is sent', async function () {
    const big = { actuator: 'pump', token: 5n, state: 'on', id: '\u0001'.repeat(128), holder: '\u0001'.repeat(128) };
    assert.throws(() => conn.prepare(big), (e) => e instanceof wire.CommandError && e.why === 'payload' &&
      /^the command is \d+ bytes; the gateway takes at most 1024/.test(e.message));
    const n = wire.normalize({ ...big, id: 'x' });
    n.id = big.id; // as prepare would have returned it without the check
    await assert.rejects(conn.send(n, { timeoutMs: 1000 }), /the gateway takes at most 1024/);
    assert.strictEqual(broker.publishes.length, 0);
    // At the limit it goes.
    const ok = wire.normalize({ actuator: 'pump', token: 5n, state: 'on', id: 'a' });
    const len = Buffer.byteLength(wire.encodeRequest(ok, conn.reply));
    ok.id = 'a'.repeat(Math.min(128, 1 + 1024 - len));
    if (Buffer.byteLength(wire.encodeRequest(ok, conn.reply)) <= 1024) assert.doesNotThrow(() => wire.encodeChecked(ok, conn.reply));
  });
});
