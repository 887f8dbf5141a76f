'use strict';

// The documented install, run as the docs write it (issue 34): the sh
// blocks that install the package, in node-red/README.md (Install) and in
// docs/controllers.md (In Node-RED), run by bash, command for command, from
// the root of a copy of the repository whose node-red/ has no node_modules
// (a fresh clone has none: an npm ci in the checkout must not hide a
// dependency the install leaves out), with a HOME of their own. Then
// Node-RED is started as the docs start it (this package's node-red, on a
// free port), and its admin API must list both nodes, loaded from that user
// directory, with nothing but the package's own files; and a Deploy must
// write the user directory's flows, never the repository's example.
//
// The only change to the docs' text: /tmp/nr, the user directory of
// docs/controllers.md, is a directory of this test's own (the docs test,
// in docs/, runs it as it is, in a /tmp of its own). Needs the npm
// registry, not the services: without it, it skips (and fails under
// CI=true).

const assert = require('node:assert');
const { spawn, execFileSync } = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { freePort, sleep } = require('./env');

const repo = path.join(__dirname, '..', '..');
const MODULE = '@fencegate/node-red-fencegate';

// section returns the text of the section of file (in repo) under heading,
// up to the next heading of its level or above (outside code blocks, whose
// expected output lines start with # too).
function section(file, heading) {
  const lines = fs.readFileSync(path.join(repo, file), 'utf8').split('\n');
  const start = lines.indexOf(heading);
  assert.ok(start >= 0, `${file} has no section ${heading}`);
  const level = heading.match(/^#+/)[0].length;
  let code = false;
  let end = start + 1;
  for (; end < lines.length; end++) {
    if (lines[end].startsWith('```')) code = !code;
    const h = !code && lines[end].match(/^(#+) /);
    if (h && h[1].length <= level) break;
  }
  return lines.slice(start + 1, end).join('\n');
}

// shBlocks returns the sh code blocks of text.
function shBlocks(text) {
  return [...text.matchAll(/^```sh\n([\s\S]*?)^```$/gm)].map((m) => m[1]);
}

// files returns the files below dir, as relative paths, sorted.
function files(dir) {
  return fs.readdirSync(dir, { recursive: true, withFileTypes: true }).filter((e) => e.isFile())
    .map((e) => path.relative(dir, path.join(e.parentPath || e.path, e.name))).sort();
}

describe('the documented install, from a checkout without node_modules', function () {
  this.timeout(180000);
  let tmp;
  let home;
  let checkout;
  let example;
  const procs = [];

  // The blocks that install the package, and the commands that start
  // Node-RED, of the two docs.
  const docs = [
    { file: 'node-red/README.md', heading: '## Install' },
    { file: 'docs/controllers.md', heading: '## In Node-RED' },
  ];

  // The docs' user directories, as this test has them.
  const here = (text) => text.replaceAll('/tmp/nr', path.join(tmp, 'nr'));

  // environment returns this process's environment for the docs' reader:
  // HOME this test's, none of the variables npm test sets for its script
  // (npm_*), and npm's cache the user's, so that a run downloads little (it
  // holds packages, not an installed tree).
  function environment() {
    const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !/^npm_/i.test(k)));
    env.npm_config_cache = process.env.npm_config_cache || path.join(os.homedir(), '.npm');
    return { ...env, HOME: home };
  }

  // run runs script with bash in the copy's root, as the docs' reader does.
  function run(script) {
    const env = environment();
    return new Promise((resolve) => {
      const p = spawn('bash', ['-e', '-c', script], { cwd: checkout, env, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      p.stdout.on('data', (d) => { out += d; });
      p.stderr.on('data', (d) => { out += d; });
      p.on('exit', (code) => resolve({ code, out }));
    });
  }

  before(async function () {
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'fencegate-install-'));
    home = path.join(tmp, 'home');
    fs.mkdirSync(home);
    checkout = path.join(tmp, 'fencegate');
    const src = path.join(repo, 'node-red');
    fs.cpSync(src, path.join(checkout, 'node-red'), { recursive: true, filter: (p) => p !== path.join(src, 'node_modules') });
    example = fs.readFileSync(path.join(checkout, 'node-red', 'examples', 'fenced-pump.json'));
    // Without the registry npm install tries for minutes before it fails.
    const ping = await run('timeout 30 npm ping');
    if (ping.code !== 0) {
      if (process.env.CI === 'true') throw new Error(`npm ping: the npm registry cannot be reached:\n${ping.out}`);
      this.skip();
    }
  });

  after(async function () {
    for (const p of procs) {
      if (p.exitCode === null && p.signalCode === null) {
        p.kill('SIGTERM');
        await new Promise((r) => p.once('exit', r));
      }
    }
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  // startNodeRED runs this package's node-red with args (the docs', the
  // port replaced by a free one) and returns its base URL and process once
  // its admin API answers.
  async function startNodeRED(args) {
    const port = await freePort();
    const a = [...args];
    const i = a.indexOf('--port');
    if (i >= 0) a.splice(i, 2);
    const p = spawn(process.execPath, [require.resolve('node-red/red.js'), '--port', String(port), ...a],
      { cwd: checkout, env: environment(), stdio: ['ignore', 'pipe', 'pipe'] });
    procs.push(p);
    p.log = '';
    p.stdout.on('data', (d) => { p.log += d; });
    p.stderr.on('data', (d) => { p.log += d; });
    const base = `http://127.0.0.1:${port}`;
    for (let n = 0; n < 300 && p.exitCode === null; n++) {
      try {
        if ((await fetch(`${base}/settings`)).ok && /Started flows|Stopped flows|Waiting for missing types/.test(p.log)) return { base, p };
      } catch (e) { /* not yet */ }
      await sleep(100);
    }
    throw new Error(`node-red ${a.join(' ')} did not start:\n${p.log}`);
  }

  // args returns a node-red command's arguments, as bash expands them in
  // the copy's root, with this test's HOME.
  async function args(command) {
    const r = await run(`set -- ${command.replace(/^node-red\s+/, '')}; printf '%s\\0' "$@"`);
    assert.strictEqual(r.code, 0, r.out);
    return r.out.split('\0').slice(0, -1);
  }

  for (const { file, heading } of docs) {
    it(`${file}, ${heading.replace(/^#+ /, '')}: installs the package with its dependency; Node-RED loads both nodes from the user directory`, async function () {
      const blocks = shBlocks(section(file, heading));
      const installs = blocks.filter((b) => /^npm install /m.test(b));
      assert.ok(installs.length > 0, `${file}: no install command under ${heading}`);
      const starts = blocks.filter((b) => /^node-red /.test(b)).map((b) => b.trim());
      for (const block of new Set(installs)) {
        const r = await run(here(block));
        assert.strictEqual(r.code, 0, `${block}\n${r.out}`);
        const dir = (await args(`node-red ${here(block.match(/^npm install .*--prefix (\S+)/m)[1])}`))[0];
        const installed = path.join(dir, 'node_modules', ...MODULE.split('/'));
        assert.ok(fs.lstatSync(installed).isDirectory(), `${installed} is a link into the checkout, not the package`);
        const src = path.join(checkout, 'node-red');
        const shipped = ['LICENSE', 'README.md', 'examples/fenced-pump.json', 'package.json',
          ...['lib', 'nodes'].flatMap((d) => files(path.join(src, d)).map((f) => `${d}/${f}`))].sort();
        assert.deepStrictEqual(files(installed), shipped, 'the package has what its nodes need, and no tests');
        assert.ok(fs.existsSync(path.join(dir, 'node_modules', 'mqtt', 'package.json')), 'MQTT.js is installed beside it');

        // Node-RED as the docs start it with this user directory, if they
        // do; else as Node-RED starts with it. The example flow's broker
        // and etcd would be this machine's: a free port each instead, in
        // the user directory's copy (the flow need only load).
        let start = ['--userDir', dir];
        for (const s of starts) {
          const a = await args(here(s));
          if (a[a.indexOf('--userDir') + 1] === dir) start = a;
        }
        const flows = path.join(dir, 'flows.json');
        const copied = fs.existsSync(flows);
        if (copied) {
          const f = JSON.parse(fs.readFileSync(flows, 'utf8'));
          for (const n of f.filter((x) => x.type === 'fencegate-gateway')) {
            Object.assign(n, { broker: `tcp://127.0.0.1:${await freePort()}`, etcd: `http://127.0.0.1:${await freePort()}` });
          }
          fs.writeFileSync(flows, JSON.stringify(f));
        }
        const { base, p } = await startNodeRED(start);
        const res = await fetch(`${base}/nodes/${MODULE}`, { headers: { accept: 'application/json' } });
        assert.ok(res.ok, `GET /nodes/${MODULE}: HTTP ${res.status}\n${p.log}`);
        const m = await res.json();
        assert.strictEqual(m.path, fs.realpathSync(installed), 'loaded from the user directory');
        assert.deepStrictEqual(m.nodes.map((s) => [s.name, s.enabled, s.err]).sort(),
          [['fencegate-gateway', true, undefined], ['fencegate-out', true, undefined]], p.log);
        assert.doesNotMatch(p.log, /Cannot find module/);

        // A Deploy: Node-RED writes its flows file, and a backup beside it.
        const now = await (await fetch(`${base}/flows`)).json();
        const deploy = await fetch(`${base}/flows`, { method: 'POST', body: JSON.stringify(now),
          headers: { 'content-type': 'application/json', 'node-red-deployment-type': 'full' } });
        assert.ok(deploy.ok, `deploy: HTTP ${deploy.status} ${await deploy.text()}`);
        assert.deepStrictEqual(fs.readdirSync(path.join(src, 'examples')), ['fenced-pump.json'], 'a file beside the example (a backup, credentials)');
        assert.ok(fs.readFileSync(path.join(src, 'examples', 'fenced-pump.json')).equals(example), 'the Deploy rewrote the repository\'s example');
        if (copied) assert.ok(fs.existsSync(path.join(dir, '.flows.json.backup')), 'the Deploy wrote the copy in the user directory');
        p.kill('SIGTERM');
        await new Promise((r) => p.once('exit', r));
      }
    });
  }
});
