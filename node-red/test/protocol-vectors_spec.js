'use strict';

// The signing test vectors of docs/protocol.md ("Test vectors"), read from
// the document itself: the canonical bytes, the signature and the payload
// must come out byte for byte.

const assert = require('node:assert');
const fs = require('node:fs');
const path = require('node:path');
const wire = require('../lib/wire');
const sign = require('../lib/sign');

function vectors() {
  const doc = fs.readFileSync(path.join(__dirname, '..', '..', 'docs', 'protocol.md'), 'utf8');
  const section = doc.slice(doc.indexOf('### Test vectors'), doc.indexOf('## Answers'));
  const blocks = [...section.matchAll(/```text\n([\s\S]*?)```/g)].map((m) => m[1]);
  return blocks.map((b) => {
    const v = { canonical: '' };
    let inCanonical = false;
    for (const line of b.split('\n')) {
      const m = /^([a-z_]+):\s*(.*)$/.exec(line);
      if (m) {
        inCanonical = m[1] === 'canonical';
        v[m[1]] = /^\(empty\)$/.test(m[2]) ? '' : m[2];
      } else if (inCanonical && line.trim() !== '') {
        v.canonical += line.replace(/#.*$/, '').replace(/\s+/g, '');
      }
    }
    return v;
  });
}

describe('docs/protocol.md signing test vectors', function () {
  const vs = vectors();
  it('finds the five vectors', function () {
    assert.strictEqual(vs.length, 5);
  });
  for (const v of vs) {
    it(`${v.gateway}/${v.actuator} token ${v.token}`, function () {
      const key = sign.keyFromSeed(v.seed);
      assert.strictEqual(sign.publicKey(key), v.public_key);
      // A set-point's vector says state: duty, as its canonical bytes do;
      // the command carries the duty alone.
      const setpoint = v.duty !== undefined;
      assert.ok(!setpoint || v.state === 'duty', 'a set-point signs the state duty');
      const c = wire.normalize({ actuator: v.actuator, id: v.id, token: v.token, seq: v.seq, state: setpoint ? '' : v.state,
        duty: setpoint ? Number(v.duty) : undefined, holder: v.holder });
      assert.strictEqual(sign.canonical(v.gateway, c).toString('hex'), v.canonical);
      const signed = sign.sign(key, v.signer, v.gateway, c);
      assert.strictEqual(signed.sig, v.sig);
      assert.strictEqual(wire.encodeRequest(signed, ''), v.payload);
    });
  }
});
