'use strict';

// Signed commands (docs/protocol.md, "Signed commands"): Ed25519 over the
// canonical encoding of a command, version 1, with Node's built-in crypto.

const crypto = require('node:crypto');
const { asks } = require('./wire');

const MAGIC = Buffer.from('fencegate-command-v1', 'ascii');

function text(s) {
  const b = Buffer.from(s, 'utf8');
  const n = Buffer.alloc(4);
  n.writeUInt32BE(b.length);
  return [n, b];
}

function u64(v) {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(v));
  return b;
}

// canonical returns the bytes a signature covers for command c (as
// wire.normalize returns it) to gateway: magic, gateway, actuator, token,
// seq, state (on for a pulse, duty for a set-point), id, holder, then
// pulse_ms for a pulse, the duty in hundredths of a percent for a
// set-point and the byte 1 for a reset.
function canonical(gateway, c) {
  const state = c.duty !== undefined ? 'duty' : asks(c);
  const parts = [MAGIC, ...text(gateway), ...text(c.actuator), u64(c.token), u64(c.seq),
    ...text(state), ...text(c.id), ...text(c.holder)];
  if (c.pulseMs > 0n) parts.push(u64(c.pulseMs));
  if (c.duty !== undefined) parts.push(u64(c.duty));
  if (c.duty !== undefined && c.frequency) parts.push(u64(c.frequency));
  if (c.reset) parts.push(Buffer.from([1]));
  return Buffer.concat(parts);
}

const WANT = 'want the PATH.key that gateway keygen --out PATH writes (a PKCS#8 PEM "PRIVATE KEY")';

// privateKey reads a private key in the PEM text that gateway keygen writes
// (PATH.key). Line breaks may have been lost on the way (a pasted key):
// the base64 between the markers is all that counts. Its errors say what is
// wrong with the text, never what it holds.
function privateKey(pem) {
  const s = String(pem || '').trim();
  if (s === '') throw new Error(`the signing key is empty; ${WANT}`);
  const m = /-----BEGIN ([A-Z0-9 ]+)-----([\s\S]*?)-----END \1-----/.exec(s);
  if (!m) {
    if (/^ed25519:/.test(s)) throw new Error(`the signing key is a public key (PATH.pub); ${WANT}`);
    throw new Error(`the signing key is not PEM text; ${WANT}`);
  }
  if (m[1] !== 'PRIVATE KEY') throw new Error(`the signing key is a PEM "${m[1]}", not a "PRIVATE KEY" (PKCS#8); ${WANT}`);
  const der = Buffer.from(m[2].replace(/\s+/g, ''), 'base64');
  let key;
  try {
    key = crypto.createPrivateKey({ key: der, format: 'der', type: 'pkcs8' });
  } catch (e) {
    throw new Error(`the signing key is not a PKCS#8 private key; ${WANT}`);
  }
  if (key.asymmetricKeyType !== 'ed25519') {
    throw new Error(`the signing key is a ${key.asymmetricKeyType} key, not an Ed25519 key; ${WANT}`);
  }
  return key;
}

// PKCS#8 wrapping of a 32-byte Ed25519 seed (RFC 8410).
const PKCS8_ED25519 = Buffer.from('302e020100300506032b657004220420', 'hex');

// keyFromSeed returns the private key of a 32-byte seed (hex), as the test
// vectors give them.
function keyFromSeed(hex) {
  const seed = Buffer.from(hex, 'hex');
  if (seed.length !== 32) throw new Error(`an Ed25519 seed has 32 bytes, got ${seed.length}`);
  return crypto.createPrivateKey({ key: Buffer.concat([PKCS8_ED25519, seed]), format: 'der', type: 'pkcs8' });
}

// publicKey returns the public key of a private key as the gateway's
// configuration takes it: ed25519:<base64>.
function publicKey(key) {
  const der = crypto.createPublicKey(key).export({ format: 'der', type: 'spki' });
  return 'ed25519:' + der.subarray(der.length - 32).toString('base64');
}

// sign returns command c (normalized) signed by signer with key for
// gateway: c with signer and sig (standard base64 with padding).
function sign(key, signer, gateway, c) {
  const sig = crypto.sign(null, canonical(gateway, c), key);
  return { ...c, signer, sig: sig.toString('base64') };
}

module.exports = { canonical, privateKey, keyFromSeed, publicKey, sign };
