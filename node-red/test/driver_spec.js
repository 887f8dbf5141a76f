'use strict';

// The conformance driver, as the Go harness's pause test runs it: A is
// granted the lease and stops itself; its lease runs out; B takes the
// scope and commits; A continues, sends under its old token, and must be
// answered stale with B's fence, and reread B's state. Skips without the
// services (see integration_spec.js).

const assert = require('node:assert');
const { spawn } = require('node:child_process');
const path = require('node:path');
const mqtt = require('mqtt');
const { env, unique } = require('./env');

const driver = path.join(__dirname, 'conformance-driver.js');

function start(args) {
  const p = spawn(process.execPath, [driver, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
  p.lines = [];
  p.stderrText = '';
  let buf = '';
  p.stdout.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      p.lines.push(JSON.parse(buf.slice(0, i)));
      buf = buf.slice(i + 1);
      p.emit('line');
    }
  });
  p.stderr.on('data', (d) => {
    p.stderrText += d;
  });
  p.exited = new Promise((resolve) => p.on('exit', (code) => resolve(code)));
  return p;
}

function until(p, check, what, timeoutMs = 30000) {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what}: not within ${timeoutMs} ms; stdout ${JSON.stringify(p.lines)}, stderr ${p.stderrText}`)), timeoutMs);
    const poll = () => {
      const v = check();
      if (v) {
        clearTimeout(t);
        clearInterval(iv);
        resolve(v);
      }
    };
    const iv = setInterval(poll, 20);
    poll();
  });
}

// stopped says whether the kernel reports process pid stopped.
function stopped(pid) {
  try {
    const stat = require('node:fs').readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat[stat.lastIndexOf(')') + 2] === 'T';
  } catch (e) {
    return false;
  }
}

// watchSets records the commands published to valve from now on
// (parsed, with at: when they came); end() stops.
async function watchSets() {
  const c = mqtt.connect(env.broker.replace(/^tcp:/, 'mqtt:'), { clientId: unique('watch') });
  await new Promise((resolve, reject) => {
    c.once('connect', resolve);
    c.once('error', reject);
  });
  const seen = [];
  c.on('message', (t, payload) => seen.push(JSON.parse(payload.toString())));
  await c.subscribeAsync(`fencegate/${env.gateway}/valve/set`, { qos: 1 });
  seen.end = () => c.endAsync();
  return seen;
}

describe('conformance driver (integration)', function () {
  this.timeout(90000);
  const started = [];

  before(function () {
    if (!env.broker || !env.etcd || !env.gateway || process.platform !== 'linux') this.skip();
  });

  after(function () {
    for (const p of started) {
      try {
        process.kill(p.pid, 'SIGCONT');
        p.kill();
      } catch (e) { /* gone */ }
    }
  });

  const args = () => ['--broker', env.broker, '--gateway', env.gateway, '--etcd', env.etcd, '--actuator', 'valve', '--ttl', '2', '--timeout', '60'];

  it('a paused holder is answered stale with the new holder\'s fence and rereads its state', async function () {
    const common = args();
    const seen = await watchSets();
    try {
      const A = start([...common, '--holder', 'A', '--id', unique('a'), '--stop-after-grant', 'on']);
      started.push(A);
      const granted = await until(A, () => A.lines.find((e) => e.event === 'granted'), 'A granted');
      await until(A, () => stopped(A.pid), 'A stopped itself');
      const B = start([...common, '--holder', 'B', '--id', unique('b'), 'off']);
      started.push(B);
      assert.strictEqual(await B.exited, 0, B.stderrText);
      const bGrant = B.lines.find((e) => e.event === 'granted');
      assert.ok(BigInt(bGrant.token) > BigInt(granted.token));
      assert.deepStrictEqual(B.lines.find((e) => e.event === 'answer'),
        { event: 'answer', outcome: 'applied', reason: '', fence: { token: bGrant.token, seq: '1' }, state: 'off' },
        'B\'s message goes after its fence-only command (seq 0)');
      const resumed = seen.length;
      process.kill(A.pid, 'SIGCONT');
      assert.strictEqual(await A.exited, 3, A.stderrText);
      await new Promise((r) => setTimeout(r, 500));
      const continued = seen.slice(resumed).filter((c) => c.holder === 'A');
      assert.deepStrictEqual([...new Set(continued.map((c) => `${c.id} ${c.token}`))], [`${continued[0].id} ${granted.token}`],
        'after it continued, A published one command (its copies), under its old token: no fence of a new lease');
      const answer = A.lines.find((e) => e.event === 'answer');
      assert.strictEqual(answer.outcome, 'stale');
      assert.deepStrictEqual(answer.fence, { token: bGrant.token, seq: '1' });
      assert.deepStrictEqual(A.lines.find((e) => e.event === 'reread'), { event: 'reread', state: 'off', fence: { token: bGrant.token, seq: '1' } });
    } finally {
      await seen.end();
    }
  });

  it('--stop-under-lease: a lease lost while stopped sends nothing, says lost and exits 8', async function () {
    const seen = await watchSets();
    try {
      const A = start([...args(), '--holder', 'A-under-lease', '--id', unique('a'), '--stop-under-lease', 'on']);
      started.push(A);
      const granted = await until(A, () => A.lines.find((e) => e.event === 'granted'), 'A granted');
      await until(A, () => stopped(A.pid), 'A stopped itself');
      const B = start([...args(), '--holder', 'B', '--id', unique('b'), 'off']);
      started.push(B);
      assert.strictEqual(await B.exited, 0, B.stderrText);
      const resumed = seen.length;
      process.kill(A.pid, 'SIGCONT');
      assert.strictEqual(await A.exited, 8, A.stderrText);
      const lost = A.lines.find((e) => e.event === 'lost');
      assert.ok(lost, JSON.stringify(A.lines));
      assert.strictEqual(lost.token, granted.token);
      assert.match(lost.reason, /lost/);
      assert.deepStrictEqual(Object.keys(lost).sort(), ['event', 'reason', 'token']);
      assert.ok(!A.lines.some((e) => e.event === 'answer'), JSON.stringify(A.lines));
      await new Promise((r) => setTimeout(r, 500));
      assert.deepStrictEqual(seen.slice(resumed).filter((c) => c.holder === 'A-under-lease'), [], 'A published after it resumed');
      assert.deepStrictEqual(seen.filter((c) => c.holder === 'A-under-lease'), [], 'A published nothing at all: it stopped before its fence-only command');
    } finally {
      await seen.end();
    }
  });

  it('--stop-under-lease: a lease still held when it continues sends normally', async function () {
    const A = start([...args(), '--ttl', '10', '--holder', 'A', '--id', unique('a'), '--stop-under-lease', 'on']);
    started.push(A);
    const granted = await until(A, () => A.lines.find((e) => e.event === 'granted'), 'A granted');
    await until(A, () => stopped(A.pid), 'A stopped itself');
    process.kill(A.pid, 'SIGCONT');
    assert.strictEqual(await A.exited, 0, A.stderrText);
    assert.deepStrictEqual(A.lines.find((e) => e.event === 'answer'),
      { event: 'answer', outcome: 'applied', reason: '', fence: { token: granted.token, seq: '1' }, state: 'on' });
  });
});
