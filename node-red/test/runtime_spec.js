'use strict';

// The package in node-red's own runtime: loaded from a user directory's
// node_modules (a link to this folder, whose node_modules has its
// dependencies; test/install_spec.js installs it as the docs do, a copy
// with its dependency beside it), the example flow deployed through the
// admin API with a password and a signing key, which must land in the
// encrypted credentials file, never in the flow file or the flows the
// editor exports. Needs no services.

const assert = require('node:assert');
const { spawn } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { freePort, sleep } = require('./env');

const pkg = path.join(__dirname, '..');
const KEY = '-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIJ1hsZ3v/VpguoRK9JLsLMREScVpezJpGXA7rAMcrn9g\n-----END PRIVATE KEY-----\n';

describe('in node-red\'s own runtime', function () {
  this.timeout(60000);
  let dir;
  let proc;
  let base;

  before(async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'fencegate-nr-user-'));
    fs.mkdirSync(path.join(dir, 'node_modules', '@fencegate'), { recursive: true });
    fs.symlinkSync(pkg, path.join(dir, 'node_modules', '@fencegate', 'node-red-fencegate'));
    fs.writeFileSync(path.join(dir, 'package.json'), JSON.stringify({ name: 'user', private: true,
      dependencies: { '@fencegate/node-red-fencegate': '*' } }));
    fs.writeFileSync(path.join(dir, 'settings.js'), "module.exports = { flowFile: 'flows.json', credentialSecret: 'test-secret', logging: { console: { level: 'warn' } } };\n");
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    proc = spawn(process.execPath, [require.resolve('node-red/red.js'), '-u', dir, '-p', String(port), '-s', path.join(dir, 'settings.js')],
      { stdio: ['ignore', 'pipe', 'pipe'] });
    proc.log = '';
    proc.stdout.on('data', (d) => { proc.log += d; });
    proc.stderr.on('data', (d) => { proc.log += d; });
    for (let i = 0; i < 200; i++) {
      try {
        if ((await fetch(`${base}/settings`)).ok) return;
      } catch (e) { /* not yet */ }
      await sleep(100);
    }
    throw new Error(`node-red did not start:\n${proc.log}`);
  });

  after(async function () {
    if (proc && proc.exitCode === null) {
      proc.kill('SIGTERM');
      await new Promise((r) => proc.once('exit', r));
    }
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('loads both nodes from the package', async function () {
    const res = await fetch(`${base}/nodes`, { headers: { accept: 'application/json' } });
    const sets = (await res.json()).filter((s) => s.module === '@fencegate/node-red-fencegate');
    assert.deepStrictEqual(sets.map((s) => [s.name, s.enabled, s.err]).sort(),
      [['fencegate-gateway', true, undefined], ['fencegate-out', true, undefined]], proc.log);
  });

  it('keeps the password and the signing key out of the flow file and the export', async function () {
    const flow = JSON.parse(fs.readFileSync(path.join(pkg, 'examples', 'fenced-pump.json'), 'utf8'));
    const password = `pw-${process.pid}-secret`;
    for (const n of flow) {
      if (n.type === 'fencegate-gateway') {
        Object.assign(n, { broker: `tcp://127.0.0.1:${await freePort()}`, username: 'u', signer: 'ctl-a' });
        n.credentials = { password, signingKey: KEY };
      }
    }
    const res = await fetch(`${base}/flows`, { method: 'POST', body: JSON.stringify(flow),
      headers: { 'content-type': 'application/json', 'node-red-deployment-type': 'full' } });
    assert.ok(res.ok, `deploy: HTTP ${res.status} ${await res.text()}`);
    const secrets = [password, 'MC4CAQAwBQYDK2VwBCIEIJ1hsZ3v'];
    const files = { flows: fs.readFileSync(path.join(dir, 'flows.json'), 'utf8'), credentials: fs.readFileSync(path.join(dir, 'flows_cred.json'), 'utf8') };
    const exported = await (await fetch(`${base}/flows`)).text();
    for (const s of secrets) {
      assert.ok(!files.flows.includes(s), 'a secret is in flows.json');
      assert.ok(!files.credentials.includes(s), 'a secret is in flows_cred.json unencrypted');
      assert.ok(!exported.includes(s), 'a secret is in the exported flows');
    }
    const cfg = flow.find((n) => n.type === 'fencegate-gateway');
    const creds = await (await fetch(`${base}/credentials/fencegate-gateway/${cfg.id}`)).json();
    assert.deepStrictEqual(creds, { has_password: true, has_signingKey: true });
  });
});
