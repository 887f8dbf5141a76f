'use strict';

// JSON parsing that keeps integers exact. The gateway writes tokens and
// seqs as JSON numbers up to 2^63-1, and JSON.parse would round every one
// above 2^53 to a nearby Number: a fence of 9223372036854775807 would read
// as 9223372036854775808, and two different pairs could compare equal.
// Here every number without a fraction or exponent becomes a BigInt; any
// other number a Number. Strings, objects, arrays, booleans and null are as
// JSON.parse gives them (a key that appears twice keeps its last value).

class JSONError extends Error {}

function parse(text) {
  if (typeof text !== 'string') {
    text = Buffer.isBuffer(text) ? text.toString('utf8') : String(text);
  }
  const p = { s: text, i: 0 };
  skip(p);
  const v = value(p, 0);
  skip(p);
  if (p.i !== p.s.length) fail(p, 'data after the JSON value');
  return v;
}

const MAX_DEPTH = 64; // answers and states nest two or three levels

function fail(p, what) {
  throw new JSONError(`not JSON: ${what} at offset ${p.i}`);
}

function skip(p) {
  const s = p.s;
  while (p.i < s.length) {
    const c = s.charCodeAt(p.i);
    if (c === 0x20 || c === 0x0a || c === 0x0d || c === 0x09) p.i++;
    else break;
  }
}

function value(p, depth) {
  if (depth > MAX_DEPTH) fail(p, 'nesting too deep');
  const c = p.s[p.i];
  if (c === '{') return object(p, depth);
  if (c === '[') return array(p, depth);
  if (c === '"') return string(p);
  if (c === '-' || (c >= '0' && c <= '9')) return number(p);
  for (const [word, v] of [['true', true], ['false', false], ['null', null]]) {
    if (p.s.startsWith(word, p.i)) {
      p.i += word.length;
      return v;
    }
  }
  return fail(p, c === undefined ? 'unexpected end' : `unexpected ${JSON.stringify(c)}`);
}

function object(p, depth) {
  const o = {};
  p.i++;
  skip(p);
  if (p.s[p.i] === '}') {
    p.i++;
    return o;
  }
  for (;;) {
    skip(p);
    if (p.s[p.i] !== '"') fail(p, 'want a string key');
    const k = string(p);
    skip(p);
    if (p.s[p.i] !== ':') fail(p, "want ':'");
    p.i++;
    skip(p);
    Object.defineProperty(o, k, { value: value(p, depth + 1), enumerable: true, writable: true, configurable: true });
    skip(p);
    if (p.s[p.i] === ',') {
      p.i++;
      continue;
    }
    if (p.s[p.i] === '}') {
      p.i++;
      return o;
    }
    fail(p, "want ',' or '}'");
  }
}

function array(p, depth) {
  const a = [];
  p.i++;
  skip(p);
  if (p.s[p.i] === ']') {
    p.i++;
    return a;
  }
  for (;;) {
    skip(p);
    a.push(value(p, depth + 1));
    skip(p);
    if (p.s[p.i] === ',') {
      p.i++;
      continue;
    }
    if (p.s[p.i] === ']') {
      p.i++;
      return a;
    }
    fail(p, "want ',' or ']'");
  }
}

const NUMBER = /-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

function number(p) {
  NUMBER.lastIndex = p.i;
  const m = NUMBER.exec(p.s);
  if (!m) fail(p, 'bad number');
  p.i += m[0].length;
  if (m[2] === undefined && m[3] === undefined) return BigInt(m[0]);
  return Number(m[0]);
}

function string(p) {
  // Find the closing quote, then let JSON.parse unescape: it is exact for
  // strings and checks the escapes.
  const s = p.s;
  let j = p.i + 1;
  for (;;) {
    if (j >= s.length) fail(p, 'unterminated string');
    const c = s.charCodeAt(j);
    if (c === 0x22) break;
    if (c === 0x5c) j += 2;
    else if (c < 0x20) fail(p, 'control character in a string');
    else j++;
  }
  let v;
  try {
    v = JSON.parse(s.slice(p.i, j + 1));
  } catch (e) {
    fail(p, 'bad string escape');
  }
  p.i = j + 1;
  return v;
}

module.exports = { parse, JSONError };
