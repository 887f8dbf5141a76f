"""fencegate's wire protocol: topics, commands, answers and states.

This module is the Python twin of the Go package ``wire`` (and of the
canonical encoding in package ``sign``); docs/protocol.md is the contract.
It does no I/O: it builds the bytes a controller publishes and reads the
bytes the gateway publishes.

- :func:`encode_request` writes a command byte for byte as the Go
  ``wire.EncodeRequest`` does: field order id, token, seq, pulse_ms, duty
  or state, reset, holder, signer, sig, reply; no spaces; strings escaped
  only where JSON must.
- :func:`canonical` builds the bytes a signature covers (version 1).
- :func:`check_command` refuses, before anything is published, a command
  the gateway would reject as malformed.
- :func:`parse_answer` and :func:`parse_state` read the gateway's answers
  and retained states; tokens and seqs stay exact Python ints.
- :func:`answers` says whether an answer answers a command, as the Go
  ``client.Answers`` does.
"""

from __future__ import annotations

import base64
import json
import re
import struct
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Any, Dict, Optional, Union

#: The first topic level when the gateway's configuration sets none.
DEFAULT_PREFIX = "fencegate"
#: The largest token and seq (2^63-1): etcd revisions fit.
MAX_TOKEN = (1 << 63) - 1
MAX_SEQ = (1 << 63) - 1
#: The longest pulse a command may ask for, in milliseconds (10 minutes).
MAX_PULSE_MS = 600_000
#: A set-point's finest step is 0.01 %: duties are hundredths of a percent.
FULL_DUTY = 10_000
#: The highest frequency a set-point command may ask a PWM output for, Hz.
MAX_FREQUENCY = 1_000_000
#: The longest id, holder or signer, in UTF-8 bytes.
MAX_TEXT = 128
#: The longest reply topic, in bytes.
MAX_REPLY = 256
#: The first bytes of the canonical encoding, version 1.
MAGIC = b"fencegate-command-v1"

STATUS_ONLINE = "online"
STATUS_OFFLINE = "offline"

#: The outcomes an answer can carry.
APPLIED = "applied"
DUPLICATE = "duplicate"
STALE = "stale"
REJECTED = "rejected"
FAILED = "failed"
OUTCOMES = (APPLIED, DUPLICATE, STALE, REJECTED, FAILED)

_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: A duty as a person writes it (``gateway send --duty``, the payload's
#: number): Go's fence.ParseDuty reads the same.
_DUTY_TEXT = re.compile(r"(0|[1-9][0-9]{0,2})(\.[0-9]{1,2})?")
#: The leaves of the gateway's own topics (<actuator>/set, ...): a reply
#: topic <base>reply/<leaf> would be one.
_OWN_LEAVES = ("set", "result", "state", "input")


class InvalidCommand(ValueError):
    """A command refused before it was published: the gateway would reject it.

    ``why`` names the field at fault (``token``, ``seq``, ``state``,
    ``pulse_ms``, ``duty``, ``reset``, ``id``, ``holder``, ``signer``, ``actuator``,
    ``reply``), for programs; the message says it for people.
    """

    def __init__(self, why: str, message: str) -> None:
        super().__init__(message)
        self.why = why


class InvalidTopic(ValueError):
    """A topic (or a level of one) refused before anything is sent: a
    broker would refuse it, or the gateway would not answer on it.

    ``why`` names what is at fault (``gateway``, ``prefix``,
    ``client_id``, ``username``, ``reply``: a reply topic asked for), for
    programs; the message says it for people. ``problem`` is the message
    without the advice on what to choose instead (for a program, such as
    the CLI, that gives its own).
    """

    def __init__(self, why: str, message: str, problem: str = "") -> None:
        super().__init__(message)
        self.why = why
        self.problem = problem or message


def _forbidden(cp: int) -> str:
    if cp <= 0x1F or 0x7F <= cp <= 0x9F:
        return "a control character"
    if 0xD800 <= cp <= 0xDFFF:
        return "a surrogate"
    if 0xFDD0 <= cp <= 0xFDEF or cp & 0xFFFE == 0xFFFE:
        return "a non-character"
    return ""


def topic_text_problem(s: str) -> str:
    """What in ``s`` a broker refuses in a topic, or ``""``: the code
    points U+0000-U+001F and U+007F-U+009F (control characters),
    U+D800-U+DFFF (surrogates: a lone one a Python string can hold, and
    UTF-8 cannot), U+FDD0-U+FDEF and U+xFFFE, U+xFFFF in every plane
    (non-characters), as Go's ``wire.CheckTopicText``. Mosquitto closes
    the connection of a client that publishes on a topic holding one.
    """
    for i, ch in enumerate(s):
        why = _forbidden(ord(ch))
        if why:
            return (f"character {i + 1} (U+{ord(ch):04X}) is {why}, which MQTT brokers refuse in a topic "
                    f"({ascii(s)})")
    return ""


@dataclass(frozen=True)
class Fence:
    """A (token, seq) pair: pairs compare token first, then seq."""

    token: int = 0
    seq: int = 0

    def pair(self) -> tuple[int, int]:
        """The pair as a tuple, for comparisons."""
        return (self.token, self.seq)

    def __str__(self) -> str:
        return f"{self.token}/{self.seq}"


@dataclass(frozen=True)
class Command:
    """A tokenized command to one actuator.

    ``state`` is ``"on"``, ``"off"`` or ``""`` (a fence-only command, which
    raises the scope's fence and drives nothing). ``pulse_ms`` (1 to
    600000) asks a pulse output for a pulse of that width; its state is
    then ``""`` or ``"on"``. ``duty`` (percent, 0 to 100 in steps of 0.01:
    an int, a float such as 42.5 or a ``Decimal``; not a string, which
    the gateway refuses too: :func:`parse_duty` reads one) sets a
    set-point output; it goes alone, without state (0 is off), and with
    ``frequency`` (hertz, 1 to 1000000) a PWM output runs at that frequency
    (0: its configured one).
    ``reset`` (fence-only) releases a tripped scope. ``id`` correlates the
    answer; a client gives one if it is empty.
    """

    actuator: str
    token: int
    seq: int = 0
    state: str = ""
    pulse_ms: int = 0
    reset: bool = False
    id: str = ""
    holder: str = ""
    duty: Union[int, float, Decimal, None] = None
    frequency: int = 0

    @property
    def fence(self) -> Fence:
        """The command's pair."""
        return Fence(self.token, self.seq)

    def asks(self) -> str:
        """The state the command asks for: a pulse asks for on, a duty
        on above 0 and off at 0."""
        if self.pulse_ms > 0:
            return "on"
        if self.duty is not None:
            return "on" if duty_hundredths(self.duty) > 0 else "off"
        return self.state


def duty_hundredths(d: Union[int, float, Decimal]) -> int:
    """A duty in hundredths of a percent, as it is recorded and signed.

    Raises :class:`InvalidCommand` (why ``duty``) for anything but a number
    (an int, a float or a ``Decimal``; not a bool, not a string) of
    percent from 0 to 100, finite, with at most two decimals: what the
    gateway refuses. A string is refused, as the gateway refuses a JSON
    string: ``"4_2"`` or ``" 42 "`` are no numbers on the wire, and
    reading them into one would send what the program did not write
    (:func:`parse_duty` reads a person's text strictly). The number -0
    is 0, and goes as 0.
    """
    if isinstance(d, str):
        raise InvalidCommand("duty", f"duty {d!r} is a string: give a number of percent (an int, a float or a Decimal), "
                             "as the gateway takes a JSON number only; parse_duty reads a duty from text")
    if isinstance(d, bool) or not isinstance(d, (int, float, Decimal)):
        raise InvalidCommand("duty", f"duty {d!r} is not a number of percent")
    try:
        v = Decimal(repr(d)) * 100 if isinstance(d, float) else Decimal(d) * 100
    except InvalidOperation:
        raise InvalidCommand("duty", f"duty {d!r} is not a number of percent") from None
    if not v.is_finite():
        raise InvalidCommand("duty", f"duty {d!r} is not a finite number of percent: want 0 to 100 with at most two decimals")
    if v != v.to_integral_value() or v < 0 or v > FULL_DUTY:
        raise InvalidCommand("duty", f"duty {d!r}: want a number of percent from 0 to 100 with at most two decimals")
    return int(v)


def parse_duty(text: str) -> Decimal:
    """A duty written as a person (or a payload) writes it: ``42``,
    ``42.5``, ``0.01``, at most three digits before the point and two
    after, no sign, space, exponent or ``_``, as Go's ``fence.ParseDuty``
    reads it. Raises :class:`InvalidCommand` (why ``duty``) otherwise.
    """
    if not isinstance(text, str) or not _DUTY_TEXT.fullmatch(text):
        raise InvalidCommand("duty", f"duty {text!r}: want a number of percent from 0 to 100 with at most two decimals, "
                             "written as 42 or 42.5")
    d = Decimal(text)
    duty_hundredths(d)
    return d


def format_duty(hundredths: int) -> str:
    """A duty as the payload writes it, as short as it can be: 42, 42.5, 42.25."""
    whole, frac = divmod(hundredths, 100)
    if frac == 0:
        return str(whole)
    if frac % 10 == 0:
        return f"{whole}.{frac // 10}"
    return f"{whole}.{frac:02d}"


@dataclass(frozen=True)
class Answer:
    """The gateway's answer to a command (docs/protocol.md, Answers).

    ``token`` and ``seq`` are the pair the command carried (0 for what a
    rejected command's payload did not show), ``fence`` the scope's fence
    after the decision, ``state`` the actuator's recorded state (``""`` if
    the answer has none). ``raw`` is the answer as parsed.
    """

    id: str
    actuator: str
    outcome: str
    reason: str = ""
    token: int = 0
    seq: int = 0
    fence: Fence = Fence()
    state: str = ""
    actual: str = ""
    error: str = ""
    pulse: Optional[Dict[str, Any]] = None
    blocking: Optional[Dict[str, Any]] = None
    #: A set-point output's recorded duty and, when it reads back at
    #: another, that one: hundredths of a percent (None for other outputs);
    #: a PWM output's frequency when a command set one (0: its configured).
    duty: Optional[int] = None
    actual_duty: Optional[int] = None
    frequency: int = 0
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    @property
    def ok(self) -> bool:
        """True for applied and duplicate: the command is done."""
        return self.outcome in (APPLIED, DUPLICATE)


@dataclass(frozen=True)
class ActuatorState:
    """An actuator's retained state (docs/protocol.md, Retained state)."""

    actuator: str
    scope: str = ""
    state: str = ""
    fence: Fence = Fence()
    holder: str = ""
    changed_at: Optional[str] = None
    why: str = ""
    pulse: Optional[Dict[str, Any]] = None
    #: A set-point output's duty while it is on, hundredths of a percent.
    duty: Optional[int] = None
    raw: Dict[str, Any] = field(default_factory=dict, compare=False, repr=False)


@dataclass(frozen=True)
class Topics:
    """The topics of one gateway: ``<prefix>/<gateway>/...``."""

    gateway: str
    prefix: str = DEFAULT_PREFIX

    @property
    def base(self) -> str:
        """What every topic of the gateway starts with."""
        return f"{self.prefix or DEFAULT_PREFIX}/{self.gateway}/"

    def set(self, actuator: str) -> str:
        """The command topic of an actuator."""
        return self.base + actuator + "/set"

    def state(self, actuator: str) -> str:
        """The retained state topic of an actuator."""
        return self.base + actuator + "/state"

    def result(self, actuator: str) -> str:
        """The shared result topic of an actuator."""
        return self.base + actuator + "/result"

    @property
    def state_filter(self) -> str:
        """The subscription filter of every actuator's state."""
        return self.base + "+/state"

    @property
    def status(self) -> str:
        """The gateway's retained status topic (online/offline)."""
        return self.base + "status"

    @property
    def reply_base(self) -> str:
        """What every reply topic of the gateway starts with."""
        return self.base + "reply/"

    def reply(self, client_id: str, username: str = "") -> str:
        """The reply topic ``<base>reply/[<username>/]<client id>``.

        The user name comes first: it is what a broker ACL knows a
        controller by, and the client id gives each connection its own.
        Raises :class:`InvalidTopic` (a ``ValueError``; why ``client_id``
        or ``username``) for a level the gateway would not answer on:
        one with ``+ # /``, or with what a broker refuses in a topic (see
        :func:`topic_text_problem`), or a topic it could not take.
        """
        shape = f"{self.reply_base}[<user name>/]<client id>"
        for why, what, level in (("username", "user name", username), ("client_id", "client id", client_id)):
            if any(c in level for c in "+#/"):
                raise InvalidTopic(why, f"{what} {level!r} cannot be a level of the reply topic ({shape}): it has + # or /; "
                                        f"choose another {what}, or pass reply=")
            problem = topic_text_problem(level)
            if problem:
                raise InvalidTopic(why, f"{what} {ascii(level)} cannot be a level of the reply topic ({shape}): {problem}; "
                                        f"choose a {what} of printable characters, or pass reply=")
        if not client_id:
            raise InvalidTopic("client_id", "a reply topic needs a client id")
        topic = self.reply_base + (f"{username}/{client_id}" if username else client_id)
        n = len(topic.encode("utf-8"))
        if n > MAX_REPLY:
            # Name the level that makes it long: the longer of the two (a
            # user name of 300 bytes is not the generated client id's fault).
            u, c = len(username.encode("utf-8")), len(client_id.encode("utf-8"))
            why, what, level, size = ("username", "user name", username, u) if u > c else ("client_id", "client id", client_id, c)
            room = MAX_REPLY - (n - size)  # what is left for this level beside the other
            fix = f"a {what} of at most {room} bytes" if room > 0 else "a shorter user name and client id"
            problem = (f"{what} {level[:16]!r}{'…' if len(level) > 16 else ''} is {size} bytes, which makes the reply topic "
                       f"({shape}) {n} bytes; the limit is {MAX_REPLY}: want {fix}")
            raise InvalidTopic(why, f"{problem}, or pass reply=", problem)
        try:
            self.check_reply(topic)
        except InvalidTopic as e:
            raise InvalidTopic("client_id", f"the reply topic of client id {client_id!r}: {e}; choose another client id, or pass reply=") from None
        return topic

    def check_reply(self, topic: str) -> None:
        """Raise :class:`InvalidTopic` (why ``reply``) if the gateway would
        not answer on ``topic``, as Go's ``wire.Topics.CheckReply``: it must
        lie under :attr:`reply_base` with a level after it, have no empty
        level, no wildcard, nothing a broker refuses in a topic, be at
        most 256 bytes, and be none of the gateway's own topics.
        """
        if not isinstance(topic, str) or topic == "":
            raise InvalidTopic("reply", "the reply topic is empty: name the topic your answers go to")
        problem = topic_text_problem(topic)
        if problem:
            raise InvalidTopic("reply", f"reply topic: {problem}; name a topic of printable characters")
        n = len(topic.encode("utf-8"))
        if n > MAX_REPLY:
            raise InvalidTopic("reply", f"reply topic is {n} bytes; the limit is {MAX_REPLY}")
        if "+" in topic or "#" in topic:
            raise InvalidTopic("reply", f"reply topic {topic!r} has a wildcard (+ #): answers go to one topic, named in full")
        rest = topic[len(self.reply_base):] if topic.startswith(self.reply_base) else ""
        if not rest:
            raise InvalidTopic("reply", f"reply topic {topic!r} is outside this gateway's reply topics: use {self.reply_base}<your client id>[/...]")
        if "//" in rest or rest.startswith("/") or rest.endswith("/"):
            raise InvalidTopic("reply", f"reply topic {topic!r} has an empty level")
        if rest in _OWN_LEAVES:
            raise InvalidTopic("reply", f"reply topic {topic!r} is one of the gateway's own topics; choose another level after {self.reply_base}")

    def actuator_of_state(self, topic: str) -> Optional[str]:
        """The actuator a state topic of this gateway names, else None."""
        if not topic.startswith(self.base) or not topic.endswith("/state"):
            return None
        name = topic[len(self.base):-len("/state")]
        return name if name and "/" not in name else None


def check_base(gateway: str, prefix: str = DEFAULT_PREFIX) -> None:
    """Raise :class:`InvalidTopic` (why ``gateway`` or ``prefix``) for a
    gateway id or topic prefix that cannot stand in the gateway's topics:
    a gateway id with ``+ # /``, a prefix with a wildcard or an empty
    level, or either with what a broker refuses in a topic.
    """
    if not isinstance(gateway, str) or not gateway or any(c in gateway for c in "+#/"):
        raise InvalidTopic("gateway", f"gateway id {gateway!r} cannot be a topic level: give the gateway's id (letters, digits, _ and -)")
    problem = topic_text_problem(gateway)
    if problem:
        raise InvalidTopic("gateway", f"gateway id {ascii(gateway)}: {problem}")
    check_prefix(prefix)


def check_prefix(prefix: str) -> None:
    """Raise :class:`InvalidTopic` (why ``prefix``) for a topic prefix that
    cannot begin the gateway's topics, as Go's ``wire.CheckPrefix`` (the
    rule of the configuration's ``mqtt.topic_prefix``): a wildcard, an
    empty level (a leading, trailing or double /), or what a broker
    refuses in a topic. The empty prefix is refused here: a client
    takes the default's (``fencegate``) for it.
    """
    if not isinstance(prefix, str) or "+" in prefix or "#" in prefix:
        raise InvalidTopic("prefix", f"topic prefix {prefix!r} has a wildcard (+ #)", "it has a wildcard (+ #)")
    if "//" in f"/{prefix}/":
        raise InvalidTopic("prefix", f"topic prefix {prefix!r} has an empty level (a leading, trailing or double /)",
                           "it has an empty level (a leading, trailing or double /)")
    problem = topic_text_problem(prefix)
    if problem:
        raise InvalidTopic("prefix", f"topic prefix {ascii(prefix)}: {problem}", problem)


def check_gateway_id(gateway: str) -> None:
    """Raise :class:`InvalidTopic` (why ``gateway``) for a gateway id that
    no gateway can have: the configuration's ``id`` is 1 to 64 letters,
    digits, - and _ (Go's config loader refuses any other), so a command
    to another id never reaches a gateway.
    """
    if not isinstance(gateway, str) or not _NAME.fullmatch(gateway):
        raise InvalidTopic("gateway", f"gateway id {gateway!r} is no gateway's: a gateway's id (its configuration's id:) "
                                      "is 1 to 64 letters, digits, - and _", "want 1 to 64 letters, digits, - and _ "
                                      "(the id: of the gateway's configuration)")


def json_string(s: str) -> str:
    """``s`` as a JSON string with the shortest escapes, as Go's wire does.

    Only ``"`` and ``\\``, the five short control escapes and other
    characters below U+0020 (as ``\\u00xx``, lowercase) are escaped;
    everything else stays raw UTF-8. ``json.dumps(ensure_ascii=False)``
    does exactly this.
    """
    return json.dumps(s, ensure_ascii=False)


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def check_name(actuator: str) -> None:
    """Refuse an actuator name that does not match ``[A-Za-z0-9_-]{1,64}``."""
    if not isinstance(actuator, str) or not _NAME.fullmatch(actuator):
        raise InvalidCommand("actuator", f"actuator {actuator!r} is not a name of 1 to 64 letters, digits, _ or -")


def check_command(c: Command, signer: str = "") -> None:
    """Raise :class:`InvalidCommand` if the gateway would reject ``c``.

    Checked before anything is published: a missing, zero or too large
    token, a seq above 2^63-1, a state other than on/off/none, a pulse out
    of 1..600000 ms or with state off, reset with a state or pulse, an id,
    holder or signer over 128 bytes, and an actuator name the gateway
    cannot have.
    """
    check_name(c.actuator)
    if not _is_int(c.token) or c.token <= 0:
        raise InvalidCommand("token", f"token {c.token!r}: a command needs a token from 1 to 2^63-1 (from a lease grant)")
    if c.token > MAX_TOKEN:
        raise InvalidCommand("token", f"token {c.token} is above 2^63-1")
    if not _is_int(c.seq) or c.seq < 0 or c.seq > MAX_SEQ:
        raise InvalidCommand("seq", f"seq {c.seq!r} is not an integer from 0 to 2^63-1")
    if c.state not in ("on", "off", ""):
        raise InvalidCommand("state", f"state {c.state!r} is not \"on\", \"off\" or none (fence-only)")
    if not _is_int(c.pulse_ms) or c.pulse_ms < 0 or c.pulse_ms > MAX_PULSE_MS:
        raise InvalidCommand("pulse_ms", f"pulse_ms {c.pulse_ms!r} is not from 1 to {MAX_PULSE_MS} (10 minutes)")
    if c.pulse_ms > 0 and c.state == "off":
        raise InvalidCommand("pulse_ms", 'pulse_ms with state "off": a pulse returns to rest by itself; send pulse_ms alone')
    if not isinstance(c.reset, bool):
        raise InvalidCommand("reset", f"reset {c.reset!r} is not a bool")
    if c.reset and (c.state or c.pulse_ms or c.duty is not None):
        raise InvalidCommand("reset", "reset goes with a fence-only command (no state, pulse_ms or duty)")
    if c.duty is not None:
        duty_hundredths(c.duty)
        if c.state or c.pulse_ms:
            raise InvalidCommand("duty", "duty goes alone: it sets a set-point output (0 is off), which takes neither state nor pulse_ms")
    if not _is_int(c.frequency) or c.frequency < 0 or c.frequency > MAX_FREQUENCY:
        raise InvalidCommand("frequency", f"frequency {c.frequency!r} is not an integer from 1 to {MAX_FREQUENCY} (hertz)")
    if c.frequency and c.duty is None:
        raise InvalidCommand("frequency", "frequency goes with duty: it is the frequency a PWM output runs a set-point at")
    for what, value in (("id", c.id), ("holder", c.holder), ("signer", signer)):
        if not isinstance(value, str):
            raise InvalidCommand(what, f"{what} {value!r} is not a string")
        try:
            n = len(value.encode("utf-8"))
        except UnicodeEncodeError:
            raise InvalidCommand(what, f"{what} {value!r} is not valid UTF-8 text (it holds a lone surrogate)") from None
        if n > MAX_TEXT:
            raise InvalidCommand(what, f"{what} is {n} bytes; the limit is {MAX_TEXT}")


def _text(s: str) -> bytes:
    b = s.encode("utf-8")
    return struct.pack(">I", len(b)) + b


def canonical(gateway: str, c: Command) -> bytes:
    """The bytes a signature of ``c`` for ``gateway`` covers (version 1).

    The magic, then gateway id, actuator, token, seq, state (``on`` for a
    pulse, ``duty`` for a set-point), id and holder; a pulse appends its
    width, a set-point its duty in hundredths of a percent and a reset the
    byte 1. Text is a 4-byte big-endian length and the UTF-8 bytes.
    """
    b = MAGIC + _text(gateway) + _text(c.actuator)
    b += struct.pack(">QQ", c.token, c.seq)
    state = "duty" if c.duty is not None else c.asks()
    b += _text(state) + _text(c.id) + _text(c.holder)
    if c.pulse_ms > 0:
        b += struct.pack(">Q", c.pulse_ms)
    if c.duty is not None:
        b += struct.pack(">Q", duty_hundredths(c.duty))
        if c.frequency:
            b += struct.pack(">Q", c.frequency)
    if c.reset:
        b += b"\x01"
    return b


def encode_sig(sig: bytes) -> str:
    """A signature as a command carries it: standard base64 with padding."""
    return base64.b64encode(sig).decode("ascii")


def encode_request(c: Command, reply: str = "", signer: str = "", sig: Optional[bytes] = None) -> bytes:
    """The payload of command ``c``, byte for byte as Go's wire.EncodeRequest.

    ``reply`` is the topic the answer goes to (``""``: the shared result
    topic); ``signer`` and ``sig`` sign it (both or neither).
    """
    if bool(signer) != (sig is not None):
        raise ValueError("signer and sig go together")
    parts = []
    if c.id:
        parts.append('"id":' + json_string(c.id))
    parts.append(f'"token":{c.token}')
    if c.seq:
        parts.append(f'"seq":{c.seq}')
    if c.pulse_ms > 0:
        parts.append(f'"pulse_ms":{c.pulse_ms}')
    elif c.duty is not None:
        parts.append('"duty":' + format_duty(duty_hundredths(c.duty)))
        if c.frequency:
            parts.append(f'"frequency":{c.frequency}')
    elif c.state:
        parts.append('"state":' + json_string(c.state))
    if c.reset:
        parts.append('"reset":true')
    if c.holder:
        parts.append('"holder":' + json_string(c.holder))
    if signer:
        parts.append('"signer":' + json_string(signer))
    if sig is not None:
        parts.append(f'"sig":"{encode_sig(sig)}"')
    if reply:
        parts.append('"reply":' + json_string(reply))
    return ("{" + ",".join(parts) + "}").encode("utf-8")


class WireError(ValueError):
    """An answer or state message that cannot be read."""


def _no_constant(s: str) -> Any:
    raise WireError(f"{s} is not JSON")


def _object(payload: bytes | str, what: str) -> Dict[str, Any]:
    if isinstance(payload, bytes):
        try:
            payload = payload.decode("utf-8")
        except UnicodeDecodeError as e:
            raise WireError(f"{what} is not UTF-8") from e
    try:
        # Python's ints are exact: a token of 2^63-1 stays what it is.
        # A duty has decimals: a fraction is read exactly, and an integer
        # field that holds one is refused by _uint.
        v = json.loads(payload, parse_float=Decimal, parse_constant=_no_constant)
    except json.JSONDecodeError as e:
        raise WireError(f"{what} is not JSON: {e}") from e
    if not isinstance(v, dict):
        raise WireError(f"{what} is not a JSON object")
    return v


def _str(d: Dict[str, Any], key: str, what: str) -> str:
    v = d.get(key, "")
    if v is None:
        return ""
    if not isinstance(v, str):
        raise WireError(f"{what}: {key} is not a string")
    return v


def _uint(d: Dict[str, Any], key: str, what: str) -> int:
    v = d.get(key, 0)
    if not _is_int(v) or v < 0 or v >= 1 << 64:
        raise WireError(f"{what}: {key} is not an unsigned integer")
    return int(v)


def _duty(d: Dict[str, Any], key: str, what: str) -> Optional[int]:
    v = d.get(key)
    if v is None:
        return None
    try:
        return duty_hundredths(v) if not isinstance(v, str) else _bad_duty(what, key)
    except InvalidCommand:
        return _bad_duty(what, key)


def _bad_duty(what: str, key: str) -> int:
    raise WireError(f"{what}: {key} is not a duty (a number of percent)")


def _fence(d: Dict[str, Any], what: str) -> Fence:
    f = d.get("fence") or {}
    if not isinstance(f, dict):
        raise WireError(f"{what}: fence is not an object")
    return Fence(_uint(f, "token", what), _uint(f, "seq", what))


def _state_word(d: Dict[str, Any], key: str, what: str) -> str:
    s = _str(d, key, what)
    if s not in ("", "on", "off"):
        raise WireError(f"{what}: {key} {s!r} is not on or off")
    return s


def parse_answer(payload: bytes | str) -> Answer:
    """Read an answer the gateway published; :class:`WireError` if it is none."""
    what = "answer"
    d = _object(payload, what)
    pulse, blocking = d.get("pulse"), d.get("blocking")
    return Answer(
        id=_str(d, "id", what),
        actuator=_str(d, "actuator", what),
        outcome=_str(d, "outcome", what),
        reason=_str(d, "reason", what),
        token=_uint(d, "token", what),
        seq=_uint(d, "seq", what),
        fence=_fence(d, what),
        state=_state_word(d, "state", what),
        actual=_str(d, "actual", what),
        error=_str(d, "error", what),
        pulse=pulse if isinstance(pulse, dict) else None,
        blocking=blocking if isinstance(blocking, dict) else None,
        duty=_duty(d, "duty", what),
        actual_duty=_duty(d, "actual_duty", what),
        frequency=_uint(d, "frequency", what),
        raw=d,
    )


def parse_state(payload: bytes | str) -> ActuatorState:
    """Read an actuator's retained state; :class:`WireError` if it is none."""
    what = "state"
    d = _object(payload, what)
    changed = d.get("changed_at")
    pulse = d.get("pulse")
    return ActuatorState(
        actuator=_str(d, "actuator", what),
        scope=_str(d, "scope", what),
        state=_state_word(d, "state", what),
        fence=_fence(d, what),
        holder=_str(d, "holder", what),
        changed_at=changed if isinstance(changed, str) else None,
        why=_str(d, "why", what),
        pulse=pulse if isinstance(pulse, dict) else None,
        duty=_duty(d, "duty", what),
        raw=d,
    )


def answers(c: Command, a: Answer) -> bool:
    """Whether ``a`` answers command ``c``.

    It must carry ``c``'s id, actuator, token and seq. A command rejected
    as invalid is answered with the token and seq the gateway read before
    the error, 0 for those it did not read: such an answer matches too.
    An answer that does not match is someone else's (or an earlier
    command's): ignore it.
    """
    if a.id != c.id or a.actuator != c.actuator:
        return False
    if (a.token, a.seq) == (c.token, c.seq):
        return True
    return (a.outcome == REJECTED and a.reason == "invalid"
            and a.token in (0, c.token) and a.seq in (0, c.seq))


def output_as_asked(c: Command, a: Answer) -> bool:
    """Whether an applied or duplicate answer ``a`` says the actuator is as ``c`` asked.

    A fence-only command asks for nothing, and a pulse is on and then back
    at rest (its answer says how it went in ``pulse``); any other command
    asked for a state, which the answer's ``state`` (and ``actual``, when
    present) must be. If not, the output changed after the command was
    applied (a later command, the boot rule at a restart, a failed drive):
    reread the state, and send a new command with a higher seq to set it.
    """
    if c.duty is not None:
        return a.duty == duty_hundredths(c.duty) and a.actual_duty is None and a.state == c.asks() and not a.actual
    if not c.state or c.pulse_ms > 0 or a.pulse is not None:
        return True
    return a.state == c.state and (not a.actual or a.actual == c.state)


#: What a controller does with an answer (the conformance suite's words).
DONE = "done"
REREAD = "reread"
REACQUIRE = "reacquire"
REPORT = "report"
RETRY_LATER = "retry-later"
IGNORE = "ignore"


def action(c: Command, a: Answer) -> str:
    """What a controller does with answer ``a`` to command ``c``.

    ``done`` (applied, duplicate), ``reread`` (applied or duplicate, but
    the output is not as asked: see :func:`output_as_asked`), ``reacquire`` (stale: stop acting under
    this token, reread, acquire again), ``report`` (rejected),
    ``retry-later`` (failed: retry with a higher seq), ``ignore`` (not an
    answer to ``c``, or an outcome this client does not know).
    """
    if not answers(c, a):
        return IGNORE
    if a.outcome in (APPLIED, DUPLICATE) and not output_as_asked(c, a):
        return REREAD
    return {APPLIED: DONE, DUPLICATE: DONE, STALE: REACQUIRE, REJECTED: REPORT, FAILED: RETRY_LATER}.get(a.outcome, IGNORE)
