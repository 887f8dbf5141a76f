'use strict';

// The conformance driver, as the Go harness's pause test runs it: A is
// granted the lease and stops itself; its lease runs out; B takes the
// scope and commits; A continues, sends under its old token, and must be
// answered stale with B's fence, and reread B's state. Skips without the
// services (see integration_spec.js).

const assert = require('node:assert');
const { spawn } = require('node:child_process');
const path = require('node:path');
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

  it('a paused holder is answered stale with the new holder\'s fence and rereads its state', async function () {
    const common = ['--broker', env.broker, '--gateway', env.gateway, '--etcd', env.etcd, '--actuator', 'valve', '--ttl', '2', '--timeout', '60'];
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
    process.kill(A.pid, 'SIGCONT');
    assert.strictEqual(await A.exited, 3, A.stderrText);
    const answer = A.lines.find((e) => e.event === 'answer');
    assert.strictEqual(answer.outcome, 'stale');
    assert.deepStrictEqual(answer.fence, { token: bGrant.token, seq: '1' });
    assert.deepStrictEqual(A.lines.find((e) => e.event === 'reread'), { event: 'reread', state: 'off', fence: { token: bGrant.token, seq: '1' } });
  });
});
