'use strict';

// The wire format of fencegate's commands, answers and retained states, as
// docs/protocol.md gives it and the Go package wire writes it, byte for
// byte. Tokens and seqs are BigInts: they go up to 2^63-1, which a Number
// cannot hold exactly.

const exactJSON = require('./exact-json');

const DEFAULT_PREFIX = 'fencegate';
const MAX_TOKEN = (1n << 63n) - 1n;
const MAX_SEQ = MAX_TOKEN;
const MAX_TEXT = 128; // bytes of an id, holder or signer
const MAX_PULSE_MS = 600000;
const FULL_DUTY = 10000; // a duty of 100 %, in hundredths of a percent
const MAX_FREQUENCY = 1000000; // hertz a set-point command may ask a PWM output for
const MAX_PAYLOAD = 1024; // bytes of a command's payload the gateway takes (Go's wire.MaxPayload)
const NAME = /^[A-Za-z0-9_-]{1,64}$/;

const OUTCOMES = ['applied', 'duplicate', 'stale', 'rejected', 'failed'];

// A CommandError is a command refused before anything is published. why
// names what is wrong, in one word (token, seq, state, pulse_ms, reset, id,
// holder, signer, actuator).
class CommandError extends Error {
  constructor(why, message) {
    super(message);
    this.why = why;
  }
}

// A TopicError is a topic (or a level of one) refused before anything is
// sent: a broker would refuse it, or the gateway would not answer on it.
// why names what is at fault (client_id, username, reply: a reply topic
// asked for).
class TopicError extends Error {
  constructor(why, message) {
    super(message);
    this.why = why;
  }
}

const MAX_REPLY = 256; // bytes of a reply topic (Go's wire.MaxReply)
const OWN_LEAVES = ['set', 'result', 'state', 'input']; // <base>reply/<leaf> would be one of the gateway's own topics

// forbidden says which kind of code point cp is if a topic must not hold
// it, or ''.
function forbidden(cp) {
  if (cp <= 0x1f || (cp >= 0x7f && cp <= 0x9f)) return 'a control character';
  if (cp >= 0xd800 && cp <= 0xdfff) return 'a surrogate';
  if ((cp >= 0xfdd0 && cp <= 0xfdef) || (cp & 0xfffe) === 0xfffe) return 'a non-character';
  return '';
}

// topicTextProblem says what in s a broker refuses in a topic, or '': the
// code points U+0000-U+001F and U+007F-U+009F (control characters),
// U+D800-U+DFFF (a lone surrogate, which a JavaScript string can hold and
// UTF-8 cannot), U+FDD0-U+FDEF and U+xFFFE, U+xFFFF in every plane
// (non-characters), as Go's wire.CheckTopicText. Mosquitto closes the
// connection of a client that publishes on a topic holding one.
// shown is s as a JSON string for a message, with what topicTextProblem
// refuses escaped (JSON.stringify escapes a lone surrogate and U+0000 to
// U+001F itself).
function shown(s) {
  return JSON.stringify(String(s)).replace(/[\u007f-\u009f\ufdd0-\ufdef\ufffe\uffff]|[\ud800-\udbff][\udc00-\udfff]/g, (c) => {
    const cp = c.codePointAt(0);
    if (!forbidden(cp)) return c;
    return [...c.length === 2 ? [c.charCodeAt(0), c.charCodeAt(1)] : [cp]].map((u) => `\\u${u.toString(16).padStart(4, '0')}`).join('');
  });
}

function topicTextProblem(s) {
  let i = 0;
  for (const ch of String(s)) { // by code point: a pair is one, a lone surrogate one too
    i++;
    const cp = ch.codePointAt(0);
    const why = forbidden(cp);
    if (why) {
      return `character ${i} (U+${cp.toString(16).toUpperCase().padStart(4, '0')}) is ${why}, which MQTT brokers refuse in a topic (${shown(s)})`;
    }
  }
  return '';
}

function topics(prefix, gateway) {
  const base = `${prefix || DEFAULT_PREFIX}/${gateway}`;
  const replyBase = `${base}/reply/`;
  // checkReply throws a TopicError (why reply) if the gateway would not
  // answer on topic, as Go's wire.Topics.CheckReply: it must lie under
  // replyBase with a level after it, have no empty level, no wildcard,
  // nothing a broker refuses in a topic, be at most 256 bytes, and be none
  // of the gateway's own topics.
  const checkReply = (topic) => {
    if (typeof topic !== 'string' || topic === '') throw new TopicError('reply', 'the reply topic is empty: name the topic your answers go to');
    const problem = topicTextProblem(topic);
    if (problem) throw new TopicError('reply', `reply topic: ${problem}; name a topic of printable characters`);
    if (bytes(topic) > MAX_REPLY) throw new TopicError('reply', `reply topic is ${bytes(topic)} bytes; the limit is ${MAX_REPLY}`);
    if (/[+#]/.test(topic)) throw new TopicError('reply', `reply topic ${JSON.stringify(topic)} has a wildcard (+ #): answers go to one topic, named in full`);
    const rest = topic.startsWith(replyBase) ? topic.slice(replyBase.length) : '';
    if (rest === '') throw new TopicError('reply', `reply topic ${JSON.stringify(topic)} is outside this gateway's reply topics: use ${replyBase}<your client id>[/...]`);
    if (rest.includes('//') || rest.startsWith('/') || rest.endsWith('/')) throw new TopicError('reply', `reply topic ${JSON.stringify(topic)} has an empty level`);
    if (OWN_LEAVES.includes(rest)) throw new TopicError('reply', `reply topic ${JSON.stringify(topic)} is one of the gateway's own topics; choose another level after ${replyBase}`);
  };
  return {
    set: (actuator) => `${base}/${actuator}/set`,
    stateFilter: `${base}/+/state`,
    status: `${base}/status`,
    replyBase,
    checkReply,
    // reply returns <prefix>/<gateway>/reply/[<username>/]<clientId>, or
    // throws a TopicError (why username or client_id) for a level the
    // gateway would not answer on: one with + # or /, or with what a
    // broker refuses in a topic, or a topic checkReply refuses.
    reply(username, clientId) {
      const shape = `${replyBase}[<user name>/]<client id>`;
      for (const [why, what, v] of [['username', 'user name', username || ''], ['client_id', 'client id', clientId || '']]) {
        if (/[+#/]/.test(v)) {
          throw new TopicError(why, `${what} ${JSON.stringify(v)} cannot be a level of the reply topic (${shape}): it has + # or /; choose another ${what}`);
        }
        const problem = topicTextProblem(v);
        if (problem) throw new TopicError(why, `${what} cannot be a level of the reply topic (${shape}): ${problem}; choose a ${what} of printable characters`);
      }
      if (!clientId) throw new TopicError('client_id', 'a reply topic needs a client id');
      const topic = `${replyBase}${username ? username + '/' : ''}${clientId}`;
      try {
        checkReply(topic);
      } catch (e) {
        throw new TopicError('client_id', `the reply topic of client id ${JSON.stringify(clientId)}: ${e.message}; choose another client id`);
      }
      return topic;
    },
    // stateActuator returns the actuator of a state topic, or undefined.
    stateActuator(topic) {
      if (!topic.startsWith(base + '/') || !topic.endsWith('/state')) return undefined;
      const a = topic.slice(base.length + 1, -'/state'.length);
      return NAME.test(a) ? a : undefined;
    },
  };
}

// toBig reads a token, seq or pulse width given as a BigInt, a safe integer
// Number or a decimal string; it returns undefined for anything else.
function toBig(v) {
  if (typeof v === 'bigint') return v;
  if (typeof v === 'number' && Number.isSafeInteger(v)) return BigInt(v);
  if (typeof v === 'string' && /^(0|[1-9][0-9]*)$/.test(v)) return BigInt(v);
  return undefined;
}

// wellFormed replaces lone surrogates by U+FFFD, as Go does with invalid
// UTF-8 and as Buffer.from does (String.prototype.toWellFormed, which Node
// 18 lacks): the payload and the signed bytes then say the same.
function wellFormed(s) {
  return s.replace(/[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g, '\uFFFD');
}

function bytes(s) {
  return Buffer.byteLength(s, 'utf8');
}

// normalize returns the command c with its fields in their canonical form
// (BigInt token, seq and pulse_ms; strings well formed, as Go's UTF-8 would
// make them), or throws a CommandError for a command that must not be sent.
function normalize(c) {
  const text = (v) => (v === undefined || v === null ? '' : wellFormed(String(v)));
  const out = {
    actuator: text(c.actuator),
    id: text(c.id),
    holder: text(c.holder),
    signer: text(c.signer),
    sig: c.sig || '',
    state: text(c.state),
    reset: c.reset === true,
  };
  if (!NAME.test(out.actuator)) {
    throw new CommandError('actuator', `actuator ${JSON.stringify(out.actuator)} is not a name of 1 to 64 letters, digits, _ or -`);
  }
  const token = c.token === undefined || c.token === null || c.token === '' ? undefined : toBig(c.token);
  if (token === undefined && (c.token === undefined || c.token === null || c.token === '')) {
    throw new CommandError('token', 'no token: a command needs the fencing token of a held lease (1 to 2^63-1)');
  }
  if (token === undefined || token < 1n || token > MAX_TOKEN) {
    throw new CommandError('token', `token must be an integer from 1 to 2^63-1, got ${String(c.token)}`);
  }
  out.token = token;
  const seq = c.seq === undefined || c.seq === null || c.seq === '' ? 0n : toBig(c.seq);
  if (seq === undefined || seq > MAX_SEQ) {
    throw new CommandError('seq', `seq must be an integer from 0 to 2^63-1, got ${String(c.seq)}`);
  }
  out.seq = seq;
  if (out.state !== '' && out.state !== 'on' && out.state !== 'off') {
    throw new CommandError('state', `state must be "on", "off" or none (a fence-only command), got ${JSON.stringify(out.state)}`);
  }
  out.pulseMs = 0n;
  if (c.pulse_ms !== undefined && c.pulse_ms !== null && c.pulse_ms !== '' && c.pulse_ms !== 0 && c.pulse_ms !== 0n && c.pulse_ms !== '0') {
    const p = toBig(c.pulse_ms);
    if (p === undefined || p < 1n || p > BigInt(MAX_PULSE_MS)) {
      throw new CommandError('pulse_ms', `pulse_ms must be an integer from 1 to ${MAX_PULSE_MS} (10 minutes), got ${String(c.pulse_ms)}`);
    }
    if (out.state === 'off') {
      throw new CommandError('pulse_ms', 'pulse_ms with state "off": a pulse returns to rest by itself; send pulse_ms alone');
    }
    out.pulseMs = p;
  } else if (c.pulse_ms === 0 || c.pulse_ms === 0n || c.pulse_ms === '0') {
    throw new CommandError('pulse_ms', `pulse_ms must be an integer from 1 to ${MAX_PULSE_MS} (10 minutes), got 0`);
  }
  out.duty = c.duty === undefined || c.duty === null ? undefined : dutyHundredths(c.duty);
  if (out.reset && (out.state !== '' || out.pulseMs > 0n || out.duty !== undefined)) {
    throw new CommandError('reset', 'reset goes with a fence-only command (no state, pulse_ms or duty): it releases a tripped scope and drives nothing');
  }
  if (out.duty !== undefined && (out.state !== '' || out.pulseMs > 0n)) {
    throw new CommandError('duty', 'duty goes alone: it sets a set-point output (0 is off), which takes neither state nor pulse_ms');
  }
  out.frequency = 0;
  if (c.frequency !== undefined && c.frequency !== null && c.frequency !== '' && c.frequency !== 0 && c.frequency !== 0n && c.frequency !== '0') {
    const f = toBig(c.frequency);
    if (f === undefined || f < 1n || f > BigInt(MAX_FREQUENCY)) {
      throw new CommandError('frequency', `frequency must be an integer from 1 to ${MAX_FREQUENCY} (hertz), got ${String(c.frequency)}`);
    }
    if (out.duty === undefined) {
      throw new CommandError('frequency', 'frequency goes with duty: it is the frequency a PWM output runs a set-point at');
    }
    out.frequency = Number(f);
  }
  for (const f of ['id', 'holder', 'signer']) {
    if (bytes(out[f]) > MAX_TEXT) {
      throw new CommandError(f, `${f} is ${bytes(out[f])} bytes; the limit is ${MAX_TEXT}`);
    }
  }
  return out;
}

// dutyHundredths reads a set-point (percent, 0 to 100 in steps of 0.01)
// given as a Number or a BigInt, exactly, in hundredths of a percent; it
// throws a CommandError for anything else. A string is refused, as the
// gateway refuses a JSON string: "4_2" or " 42 " are no numbers on the
// wire, and reading them into one would send what the flow did not
// write. -0 is 0, and goes as 0; NaN and Infinity are refused.
function dutyHundredths(v) {
  if (typeof v === 'string') {
    throw new CommandError('duty', `duty must be a number of percent from 0 to 100, not the string ${JSON.stringify(v)}: convert it to a number first, as the gateway takes a JSON number only`);
  }
  const s = (typeof v === 'number' && Number.isFinite(v)) || typeof v === 'bigint' ? String(v) : '';
  const m = /^(0|[1-9][0-9]{0,2})(?:\.([0-9]{1,2}))?$/.exec(s);
  const h = m ? Number(m[1]) * 100 + Number((m[2] || '').padEnd(2, '0')) : NaN;
  if (!(h >= 0 && h <= FULL_DUTY)) {
    const shown = typeof v === 'bigint' || (typeof v === 'number' && !Number.isFinite(v)) ? String(v) : JSON.stringify(v === undefined ? null : v);
    throw new CommandError('duty', `duty must be a finite number of percent from 0 to 100 with at most two decimals, got ${shown}`);
  }
  return h;
}

// formatDuty writes a duty (hundredths) as the payload does: 42, 42.5, 42.25.
function formatDuty(h) {
  const w = Math.floor(h / 100);
  const f = h % 100;
  if (f === 0) return `${w}`;
  return f % 10 === 0 ? `${w}.${f / 10}` : `${w}.${String(f).padStart(2, '0')}`;
}

// asks is the state a command asks for: a pulse asks for on, a duty on
// above 0 and off at 0.
function asks(c) {
  if (c.pulseMs > 0n) return 'on';
  if (c.duty !== undefined) return c.duty > 0 ? 'on' : 'off';
  return c.state;
}

// encodeRequest returns the payload of command c (normalized) naming reply
// as its answer's topic, exactly as Go's wire.EncodeRequest writes it:
// JSON.stringify escapes strings as it does (only where JSON must).
function encodeRequest(c, reply) {
  let s = '{';
  if (c.id !== '') s += `"id":${JSON.stringify(c.id)},`;
  s += `"token":${c.token}`;
  if (c.seq !== 0n) s += `,"seq":${c.seq}`;
  if (c.pulseMs > 0n) s += `,"pulse_ms":${c.pulseMs}`;
  else if (c.duty !== undefined) s += `,"duty":${formatDuty(c.duty)}` + (c.frequency ? `,"frequency":${c.frequency}` : '');
  else if (c.state !== '') s += `,"state":${JSON.stringify(c.state)}`;
  if (c.reset) s += ',"reset":true';
  if (c.holder !== '') s += `,"holder":${JSON.stringify(c.holder)}`;
  if (c.signer !== '') s += `,"signer":${JSON.stringify(c.signer)}`;
  if (c.sig !== '') s += `,"sig":${JSON.stringify(c.sig)}`;
  if (reply) s += `,"reply":${JSON.stringify(wellFormed(String(reply)))}`;
  return s + '}';
}

// encodeChecked is encodeRequest for a command about to be published: it
// throws a CommandError for a payload over MAX_PAYLOAD bytes, which the
// gateway would reject unread (as Go's wire.EncodeChecked and Python's
// prepare refuse it).
function encodeChecked(c, reply) {
  const payload = encodeRequest(c, reply);
  const n = Buffer.byteLength(payload, 'utf8');
  if (n > MAX_PAYLOAD) {
    throw new CommandError('payload', `the command is ${n} bytes; the gateway takes at most ${MAX_PAYLOAD} (shorten msg.commandId, the holder or the signer)`);
  }
  return payload;
}

function isPair(f) {
  return f !== null && typeof f === 'object' && typeof f.token === 'bigint' && typeof f.seq === 'bigint';
}

const ZERO = Object.freeze({ token: 0n, seq: 0n });

// parseAnswer reads an answer payload; it returns null for one that is not
// an answer (not JSON, not an object, fields of the wrong type), which a
// controller ignores as Go's client does.
function parseAnswer(payload) {
  let o;
  try {
    o = exactJSON.parse(payload);
  } catch (e) {
    return null;
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o)) return null;
  const str = (k) => (o[k] === undefined || o[k] === null ? '' : typeof o[k] === 'string' ? o[k] : null);
  const big = (v) => (v === undefined || v === null ? 0n : typeof v === 'bigint' && v >= 0n ? v : null);
  const a = {
    id: str('id'),
    actuator: str('actuator'),
    outcome: str('outcome'),
    reason: str('reason'),
    token: big(o.token),
    seq: big(o.seq),
    state: str('state'),
    actual: str('actual'),
    error: str('error'),
  };
  if (Object.values(a).includes(null)) return null;
  if (o.fence === undefined || o.fence === null) a.fence = ZERO;
  else if (typeof o.fence === 'object') {
    a.fence = { token: big(o.fence.token), seq: big(o.fence.seq) };
    if (a.fence.token === null || a.fence.seq === null) return null;
  } else return null;
  if (a.state !== '' && a.state !== 'on' && a.state !== 'off') return null;
  if (o.pulse && typeof o.pulse === 'object') a.pulse = o.pulse;
  if (o.blocking && typeof o.blocking === 'object') a.blocking = o.blocking;
  if (typeof o.frequency === 'bigint' && o.frequency > 0n) a.frequency = Number(o.frequency);
  for (const [k, to] of [['duty', 'duty'], ['actual_duty', 'actualDuty']]) {
    if (o[k] === undefined || o[k] === null) continue;
    try {
      a[to] = dutyHundredths(o[k]);
    } catch (e) {
      return null;
    }
  }
  return a;
}

// parseState reads a retained state message; null if it is not one.
function parseState(payload) {
  let o;
  try {
    o = exactJSON.parse(payload);
  } catch (e) {
    return null;
  }
  if (o === null || typeof o !== 'object' || Array.isArray(o) || typeof o.actuator !== 'string') return null;
  const fence = o.fence && typeof o.fence === 'object' ? o.fence : {};
  const big = (v) => (typeof v === 'bigint' && v >= 0n ? v : 0n);
  const s = {
    actuator: o.actuator,
    scope: typeof o.scope === 'string' ? o.scope : '',
    state: o.state === 'on' || o.state === 'off' ? o.state : '',
    fence: { token: big(fence.token), seq: big(fence.seq) },
    holder: typeof o.holder === 'string' ? o.holder : '',
  };
  if (typeof o.changed_at === 'string') s.changedAt = o.changed_at;
  if (typeof o.why === 'string') s.why = o.why;
  if (o.pulse && typeof o.pulse === 'object') s.pulse = o.pulse;
  if (o.duty !== undefined && o.duty !== null) {
    try {
      s.duty = dutyHundredths(o.duty);
    } catch (e) {
      return null;
    }
  }
  return s;
}

// answers reports whether answer a answers command c (normalized): the
// same id, actuator, token and seq, as Go's client.Answers decides. A
// command rejected as invalid is answered with the token and seq the
// gateway read before the error, 0 for those it did not read.
function answers(c, a) {
  if (!a || a.id !== c.id || a.actuator !== c.actuator) return false;
  if (a.token === c.token && a.seq === c.seq) return true;
  return a.outcome === 'rejected' && a.reason === 'invalid' &&
    (a.token === 0n || a.token === c.token) && (a.seq === 0n || a.seq === c.seq);
}

// ACTIONS is what a controller does on each outcome: done (success; but
// reread if the output is not as asked, see decide),
// reacquire (stale: stop acting under the token, reread, acquire again),
// report (rejected: the command is wrong; resending gives the same answer),
// retry-later (failed: again later with a higher seq).
const ACTIONS = { applied: 'done', duplicate: 'done', stale: 'reacquire', rejected: 'report', failed: 'retry-later' };

function action(outcome) {
  return ACTIONS[outcome] || 'report';
}

// decide maps answer a (parseAnswer's) to command c (normalized) as a
// controller reads it: whether it answers c, its outcome, reason, fence
// (decimal strings) and state, and what the controller does (ACTIONS;
// ignore for an answer to another command).
function decide(c, a) {
  const matches = answers(c, a);
  let act = matches ? action(a.outcome) : 'ignore';
  if (act === 'done' && !outputAsAsked(c, a)) act = 'reread';
  const d = { matches, outcome: a.outcome, reason: a.reason, fence: pairString(a.fence), state: a.state, action: act };
  if (a.duty !== undefined) d.duty = formatDuty(a.duty);
  return d;
}

// outputAsAsked says whether an applied or duplicate answer a leaves the
// actuator as command c asked (as Go's client checks it): its recorded
// state, and the state its output reads back if the answer says, are the
// state c asked for. A fence-only command asks for none; a pulse is on,
// then back at rest, so its answer tells how it went, not a state to keep.
function outputAsAsked(c, a) {
  if (c.duty !== undefined) {
    return a.duty === c.duty && a.actualDuty === undefined && a.state === asks(c) && a.actual === '';
  }
  if (c.state === '' || c.pulseMs > 0n || a.pulse) return true;
  return a.state === c.state && (a.actual === '' || a.actual === c.state);
}

// pairString writes a fence as msg.fence carries it: decimal strings.
function pairString(f) {
  return { token: String(f.token), seq: String(f.seq) };
}

// comparePairs returns -1, 0 or 1 as pair a is below, equal to or above b.
function comparePairs(a, b) {
  if (a.token !== b.token) return a.token < b.token ? -1 : 1;
  if (a.seq !== b.seq) return a.seq < b.seq ? -1 : 1;
  return 0;
}

module.exports = {
  DEFAULT_PREFIX, MAX_TOKEN, MAX_SEQ, MAX_TEXT, MAX_PULSE_MS, MAX_PAYLOAD, MAX_REPLY, NAME, OUTCOMES, FULL_DUTY,
  CommandError, TopicError, topicTextProblem, topics, toBig, normalize, asks, dutyHundredths, formatDuty, encodeRequest, encodeChecked, parseAnswer, parseState,
  answers, action, decide, outputAsAsked, pairString, comparePairs,
};
