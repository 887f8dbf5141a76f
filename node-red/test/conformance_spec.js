'use strict';

// The conformance vectors every client is held to (conformance/ at the
// repository's root): each command's topic, canonical bytes, signature and
// payload byte for byte; each refused command refused before anything is
// published; each answer matched (or not) to its command and mapped to what
// the fenced output does.

const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const exactJSON = require('../lib/exact-json');
const wire = require('../lib/wire');
const sign = require('../lib/sign');
const { GatewayConnection } = require('../lib/connection');

const dir = path.join(__dirname, '..', '..', 'conformance');
const read = (name) => JSON.parse(fs.readFileSync(path.join(dir, name), 'utf8'));

// given is a duty_given as a flow could hand it over: a string, a
// boolean, or a Number (NaN, Infinity and -0 included).
function given(g) {
  if (g.type === 'string') return g.value;
  if (g.type === 'bool') return g.value === 'true';
  return Number(g.value);
}

// commandOf is a vector's command as a flow gives it: duty is the
// number the payload writes (a decimal string in the file), or as given.
function commandOf(v) {
  const c = { ...v };
  delete c.duty_given;
  if (v.duty !== undefined) c.duty = Number(v.duty);
  if (v.duty_given) c.duty = given(v.duty_given);
  return c;
}

describe('conformance/commands.json', function () {
  const { cases, refused } = read('commands.json');

  for (const v of cases) {
    it(v.name, function () {
      const c = wire.normalize(commandOf(v.command));
      assert.strictEqual(wire.topics(v.prefix, v.gateway).set(c.actuator), v.topic, 'topic');
      assert.strictEqual(sign.canonical(v.gateway, c).toString('hex'), v.canonical, 'canonical');
      let sent = c;
      if (v.signing) {
        const key = sign.keyFromSeed(v.signing.seed);
        assert.strictEqual(sign.publicKey(key), v.signing.public_key, 'public key');
        sent = sign.sign(key, v.signing.signer, v.gateway, c);
      }
      assert.strictEqual(sent.sig, v.sig || '', 'sig');
      assert.strictEqual(wire.encodeRequest(sent, v.reply || ''), v.payload, 'payload');
    });
  }

  it('the fenced output sends the same payload through its connection', function () {
    const v = cases.find((x) => x.signing && x.command.id);
    const conn = new GatewayConnection({
      broker: 'tcp://127.0.0.1:1883', prefix: v.prefix, gateway: v.gateway,
      signer: v.signing.signer, signingKey: sign.keyFromSeed(v.signing.seed),
    });
    const published = [];
    conn.ready = true;
    conn.client = { publish: (topic, payload) => published.push([topic, payload]) };
    conn.send(conn.prepare(commandOf(v.command)), { timeoutMs: 50 }).catch(() => {});
    assert.deepStrictEqual(published[0][0], v.topic);
    assert.strictEqual(published[0][1], v.payload.replace(/}$/, `,"reply":${JSON.stringify(conn.reply)}}`));
  });

  for (const v of refused) {
    it(`refuses ${v.name} (${v.why}) before publishing anything`, function () {
      const conn = new GatewayConnection({ broker: 'tcp://127.0.0.1:1883', gateway: 'g' });
      const published = [];
      conn.ready = true;
      conn.client = { publish: (...a) => published.push(a) };
      assert.throws(() => conn.send(conn.prepare(commandOf(v.command)), { timeoutMs: 50 }), (e) => e instanceof wire.CommandError && e.why === v.why);
      assert.deepStrictEqual(published, []);
    });
  }
});

describe('conformance/commands.json reply_topics', function () {
  const { reply_topics: cases } = read('commands.json');
  it('has cases', function () {
    assert.ok(cases.length > 0);
  });
  for (const v of cases) {
    it(`${v.refused ? 'refuses' : 'makes'} ${v.name}`, function () {
      const topics = wire.topics(v.prefix, v.gateway);
      // A reply topic asked for is checked as the connection would; one
      // made of the client id and user name is made by the connection.
      const make = () => {
        if (v.asked) {
          topics.checkReply(v.asked);
          return v.asked;
        }
        return new GatewayConnection({ broker: 'tcp://127.0.0.1:1883', prefix: v.prefix, gateway: v.gateway, clientId: v.client_id, username: v.username }).reply;
      };
      if (v.refused) {
        assert.throws(make, (e) => {
          assert.ok(e instanceof wire.TopicError, e.stack);
          assert.strictEqual(e.why, v.why, e.message);
          assert.doesNotMatch(e.message, /[\u0000-\u001f\u007f-\u009f\ud800-\udfff]/u, 'the message holds the character raw');
          return true;
        });
      } else {
        assert.strictEqual(make(), v.reply);
      }
    });
  }
});

describe('conformance/answers.json', function () {
  const { cases } = read('answers.json');
  for (const v of cases) {
    it(v.name, function () {
      const a = wire.parseAnswer(v.answer);
      assert.ok(a, 'the answer parses');
      const got = wire.decide(wire.normalize(commandOf(v.command)), a);
      const want = { matches: v.matches, outcome: v.outcome, reason: v.reason || '', fence: v.fence, state: v.state || '', action: v.action };
      if (v.duty !== undefined) want.duty = v.duty;
      assert.deepStrictEqual(got, want);
    });
  }
});

describe('exact JSON', function () {
  it('reads integers above 2^53 exactly', function () {
    const o = exactJSON.parse('{"token":9223372036854775807,"seq":9007199254740993,"f":1.5,"s":"9223372036854775807"}');
    assert.strictEqual(o.token, 9223372036854775807n);
    assert.strictEqual(o.seq, 9007199254740993n);
    assert.strictEqual(o.f, 1.5);
    assert.strictEqual(o.s, '9223372036854775807');
  });
  it('refuses what is not JSON', function () {
    for (const bad of ['', '{', '{"a":1}x', '{"a":01}', '[1,]', '{"a":"\u0001"}']) {
      assert.throws(() => exactJSON.parse(bad), exactJSON.JSONError, bad);
    }
  });
});
