"""The controller's client: send tokenized commands, get typed answers.

:class:`Client` is the Python twin of the Go package ``client``: it
connects to the broker, subscribes (and waits for the SUBACK) to its own
reply topic, the gateway's retained states and its status, and then sends
commands and returns their answers. A stale answer is normal recovery, not
a transport error: :class:`~fencegate.errors.StaleError` carries the
gateway's current fence and state, so that the controller can reread and
decide.

An unanswered command is published again, unchanged (the same id, token,
seq and signature), after 1 s, the wait doubling up to 8 s, and at once
when the gateway comes online or this client has reconnected, until an
answer comes or the timeout ends. Nothing is published while the client is
disconnected (the reconnect resends), nor under a lease that is lost.
"""

from __future__ import annotations

import itertools
import os
import secrets
import threading
import time
from dataclasses import replace
from typing import Callable, Dict, List, Optional

from .connection import Connection, Security
from .errors import BrokerError, FailedError, FencegateError, OutputError, RejectedError, StaleError, Timeout, UnknownActuator
from .lease import Lease
from .signing import Signer
from .wire import (APPLIED, DEFAULT_PREFIX, DUPLICATE, FAILED, REJECTED, STALE, STATUS_OFFLINE, STATUS_ONLINE,
                   ActuatorState, Answer, Command, InvalidCommand, Topics, WireError, answers, check_base, output_as_asked,
                   check_command, encode_request, parse_answer, parse_state)

__all__ = ["Client", "prepare", "DEFAULT_RESEND", "MAX_RESEND", "MAX_PAYLOAD", "SETTLE"]

#: How long an unanswered command waits before it is published again, at first.
DEFAULT_RESEND = 1.0
#: The longest wait between two publishes of an unanswered command.
MAX_RESEND = 8.0
#: The largest command payload the gateway accepts, in bytes.
MAX_PAYLOAD = 1024
#: How long after the last retained message (a state or the status) the
#: gateway's retained states are taken as all there are, in seconds. The
#: broker sends them together right after the subscription.
SETTLE = 0.25


def prepare(gateway: str, c: Command, reply: str = "", signer: Optional[Signer] = None) -> bytes:
    """The payload of ``c`` for ``gateway``: checked, signed (with ``signer``), encoded.

    Raises :class:`~fencegate.wire.InvalidCommand`, before anything is
    published, for a command the gateway would reject as malformed.
    """
    name = signer.name if signer else ""
    check_command(c, name)
    sig = signer.sign(gateway, c) if signer else None
    payload = encode_request(c, reply, name, sig)
    if len(payload) > MAX_PAYLOAD:
        raise InvalidCommand("payload", f"the command is {len(payload)} bytes; the gateway takes at most {MAX_PAYLOAD}")
    return payload


class _Waiter:
    """A send waiting for the answer to its command."""

    def __init__(self, command: Command) -> None:
        self.command = command
        self.answer: Optional[Answer] = None


class Client:
    """A connected controller. Its methods are safe to call from several threads.

    ``broker`` is ``tcp://HOST:PORT`` or ``ssl://HOST:PORT`` (TLS, with the
    system's CAs unless ``ca_file``; ``cert_file`` and ``key_file`` for a
    broker that wants a client certificate). ``username`` logs in with
    ``password``, or the password in ``password_file``, or else
    ``$FENCEGATE_MQTT_PASSWORD``. ``signer`` signs every command (for a
    gateway that requires signed commands). ``resend`` is the first wait
    before an unanswered command is published again (None: never).

    Connecting raises :class:`~fencegate.errors.BrokerError` with one
    sentence saying why it failed. Use it as a context manager, or call
    :meth:`close`.
    """

    def __init__(self, broker: str, gateway: str, *, prefix: str = DEFAULT_PREFIX,
                 client_id: Optional[str] = None, username: Optional[str] = None,
                 password: Optional[str] = None, password_file: Optional[str] = None,
                 ca_file: Optional[str] = None, cert_file: Optional[str] = None, key_file: Optional[str] = None,
                 signer: Optional[Signer] = None, resend: Optional[float] = DEFAULT_RESEND,
                 reply: Optional[str] = None, connect_timeout: float = 10.0,
                 option_names: Optional[Dict[str, str]] = None) -> None:
        if not gateway:
            raise ValueError("a gateway id is required")
        check_base(gateway, prefix or DEFAULT_PREFIX)
        self.topics = Topics(gateway, prefix or DEFAULT_PREFIX)
        self.gateway = gateway
        self.client_id = client_id or f"fencegate-py-{os.getpid()}-{secrets.token_hex(4)}"
        security = Security.build(username, password, password_file, ca_file, cert_file, key_file, option_names)
        # Before anything is sent: a reply topic a broker refuses would
        # cost the gateway its connection when it answers there.
        if reply:
            self.topics.check_reply(reply)
            self.reply = reply
        else:
            self.reply = self.topics.reply(self.client_id, security.username)
        self.signer = signer
        self.resend = resend
        self._ids = itertools.count(1)
        self._cv = threading.Condition()
        self._states: Dict[str, ActuatorState] = {}
        self._status = ""
        # The retained status was delivered, and when the last retained
        # message came: once they are a while ago, the states are all in.
        self._status_retained = False
        self._last_retained = 0.0
        self._waiters: Dict[str, List[_Waiter]] = {}
        # Counts the moments a resend is worth it at once: the gateway came
        # online, or this client subscribed again after a reconnect.
        self._retry = 0
        self._closed = False
        subs = [self.reply, self.topics.state_filter, self.topics.status]
        self._conn = Connection(broker, self.client_id, security, subs, self._message, self._ready, self._lost)
        self._conn.open(connect_timeout)

    # -- life cycle

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Disconnect. Idempotent."""
        with self._cv:
            if self._closed:
                return
            self._closed = True
            self._cv.notify_all()
        self._conn.close()

    @property
    def connected(self) -> bool:
        """Whether the connection to the broker is up now."""
        return self._conn.connected

    # -- what the broker delivers (the network thread)

    def _ready(self) -> None:
        with self._cv:
            self._retry += 1  # answers published while we were away are lost: resend
            self._cv.notify_all()

    def _lost(self) -> None:
        with self._cv:
            self._cv.notify_all()

    def _message(self, topic: str, payload: bytes, retained: bool) -> None:
        if topic == self.topics.status:
            s = payload.decode("utf-8", "replace")
            with self._cv:
                # A retained status tells how the gateway is, not that it
                # changed: resending on it would publish every command twice.
                if s == STATUS_ONLINE and self._status != s and not retained:
                    self._retry += 1
                self._status = s
                if retained:
                    self._status_retained = True
                    self._last_retained = time.monotonic()
                self._cv.notify_all()
            return
        if topic == self.reply:
            try:
                a = parse_answer(payload)
            except WireError:
                return
            with self._cv:
                for w in self._waiters.get(a.id, []):
                    if w.answer is None and answers(w.command, a):
                        w.answer = a
                        self._cv.notify_all()
                        break
            return
        name = self.topics.actuator_of_state(topic)
        if name is not None:
            try:
                st = parse_state(payload)
            except WireError:
                return
            with self._cv:
                self._states[name] = st
                if retained:
                    self._last_retained = time.monotonic()
                self._cv.notify_all()

    # -- states and status

    @property
    def status(self) -> str:
        """The gateway's status as last published: ``online``, ``offline`` or ``""`` (none seen)."""
        with self._cv:
            return self._status

    def actuators(self) -> List[str]:
        """The actuators whose retained state this client has seen, sorted."""
        with self._cv:
            return sorted(self._states)

    def state(self, actuator: str) -> Optional[ActuatorState]:
        """The latest retained state seen for ``actuator``, or None."""
        with self._cv:
            return self._states.get(actuator)

    def wait_state(self, actuator: str, until: Optional[Callable[[ActuatorState], bool]] = None,
                   timeout: float = 10.0) -> ActuatorState:
        """Wait until ``actuator``'s retained state is there and satisfies ``until``.

        Raises :class:`~fencegate.errors.Timeout` if it does not within ``timeout`` s.
        """
        deadline = time.monotonic() + timeout
        with self._cv:
            while True:
                st = self._states.get(actuator)
                if st is not None and (until is None or until(st)):
                    return st
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    seen = f"; the last one seen has fence {st.fence} and state {st.state or 'none'}" if st else ""
                    raise Timeout(f"no state of {actuator} as wanted from gateway {self.gateway} within {timeout:g}s{seen}")
                self._cv.wait(left)

    def wait_status(self, want: str = STATUS_ONLINE, timeout: float = 10.0) -> None:
        """Wait until the gateway's status is ``want``."""
        deadline = time.monotonic() + timeout
        with self._cv:
            while self._status != want:
                left = deadline - time.monotonic()
                if left <= 0 or self._closed:
                    raise Timeout(f"gateway {self.gateway}'s status is {self._status or 'unknown'!r}, not {want!r}, after {timeout:g}s")
                self._cv.wait(left)

    def unknown(self, actuator: str) -> str:
        """Says that the gateway has no actuator of that name, and which it has."""
        names = self.actuators()
        if not names:
            return (f"no actuator {actuator!r} on gateway {self.gateway!r}, which has published the state of none "
                    "(has it been online?)")
        said = f"no actuator {actuator!r} on gateway {self.gateway!r}; its actuators are {', '.join(names)}"
        if self.status == STATUS_OFFLINE:
            said += " (as it published them when it was last online: it is offline now)"
        return said

    def scope(self, actuator: str, timeout: float = 10.0) -> str:
        """The fence scope of ``actuator``, from its retained state.

        Lock this name in the lease service, never the actuator's: actuators
        that share a scope share one fence, so they share one lease.

        Raises :class:`~fencegate.errors.UnknownActuator` at once (within
        :data:`SETTLE` s of the last retained message) when the gateway's
        retained states have come, its status with them, and none is the
        actuator's; waits up to ``timeout`` s for a state while there are
        none (a gateway that has never been online).
        """
        deadline = time.monotonic() + timeout
        with self._cv:
            while (st := self._states.get(actuator)) is None:
                now = time.monotonic()
                settled = self._last_retained + SETTLE - now if self._status_retained and self._states else timeout
                if settled <= 0:
                    raise UnknownActuator(self.unknown(actuator), actuator, sorted(self._states))
                left = deadline - now
                if left <= 0 or self._closed:
                    if self._states:
                        raise UnknownActuator(self.unknown(actuator), actuator, sorted(self._states))
                    raise FencegateError(f"no state for actuator {actuator!r} from gateway {self.gateway!r} within {timeout:g}s "
                                         "(is the name right, and has the gateway been online?)")
                self._cv.wait(min(left, settled))
        if not st.scope:
            raise FencegateError(f"gateway {self.gateway!r} does not say which fence scope {actuator!r} belongs to "
                                 "(a gateway older than this client); upgrade the gateway")
        return st.scope

    # -- commands

    def new_id(self) -> str:
        """A command id unique to this client."""
        return f"{self.client_id}-{next(self._ids)}"

    def prepare(self, command: Command) -> tuple[Command, bytes]:
        """The command (with an id) and its payload, as :meth:`send` publishes it.

        Raises :class:`~fencegate.wire.InvalidCommand` for a command the
        gateway would reject: nothing is published.
        """
        c = command if command.id else replace(command, id=self.new_id())
        return c, prepare(self.gateway, c, self.reply, self.signer)

    def send(self, command: Command, timeout: float = 10.0, lease: Optional[Lease] = None) -> Answer:
        """Publish ``command`` (QoS 1) and wait for its answer.

        Returns the answer for applied and duplicate (but raises
        :class:`~fencegate.errors.OutputError` if the answer says the
        actuator is not in the state asked). Raises
        :class:`~fencegate.errors.StaleError`, ``RejectedError`` or
        ``FailedError`` (each with the answer) for those outcomes,
        :class:`~fencegate.errors.Timeout` if no answer came within
        ``timeout`` s, :class:`~fencegate.wire.InvalidCommand` for a command
        refused before sending. With ``lease``, nothing is sent unless the
        lease is held and the command carries its token
        (:class:`~fencegate.errors.LeaseLost`); once it is lost, the
        command is not published again. Nothing is published while the
        client is disconnected: the reconnect publishes the command again.
        """
        if lease is not None:
            lease.check()
            if command.token != lease.token:
                raise InvalidCommand("token", f"token {command.token} is not the lease's ({lease.token})")
        c, payload = self.prepare(command)
        topic = self.topics.set(c.actuator)
        w = _Waiter(c)
        with self._cv:
            if self._closed:
                raise BrokerError("the client is closed")
            self._waiters.setdefault(c.id, []).append(w)
        try:
            return self.outcome(c, self._resending(w, topic, payload, timeout, lease))
        finally:
            with self._cv:
                ws = self._waiters.get(c.id, [])
                if w in ws:
                    ws.remove(w)
                if not ws:
                    self._waiters.pop(c.id, None)

    def _resending(self, w: _Waiter, topic: str, payload: bytes, timeout: float, lease: Optional[Lease]) -> Answer:
        deadline = time.monotonic() + timeout
        interval = self.resend if self.resend is not None else timeout
        publishes = 0
        while True:
            with self._cv:
                # Before the publish: a reconnect or a gateway coming online
                # from here on, even during the publish, resends at once.
                retry = self._retry
            if lease is not None and not lease.held:
                if publishes == 0:
                    lease.check()  # raises LeaseLost: nothing was published
            elif self._conn.connected:
                # Never while disconnected, and each connection is a paho
                # client of its own (connection.py): paho would keep an
                # unacknowledged copy and send it after the reconnect,
                # lease or no lease. The reconnect resends instead, if the
                # lease is still held.
                self._conn.publish(topic, payload)
                publishes += 1
            with self._cv:
                next_at = min(time.monotonic() + interval, deadline)
                while w.answer is None and self._retry == retry and not self._closed:
                    left = next_at - time.monotonic()
                    if left <= 0:
                        break
                    self._cv.wait(left)
                if w.answer is not None:
                    return w.answer
                if self._closed:
                    raise BrokerError("the client was closed while it waited for an answer")
                retried = self._retry != retry
            if time.monotonic() >= deadline:
                raise Timeout(self._unanswered(w.command, timeout, lease))
            if self.resend is None:
                interval = deadline - time.monotonic()
            elif retried:
                interval = self.resend
            else:
                interval = min(2 * interval, MAX_RESEND)

    def _unanswered(self, c: Command, timeout: float, lease: Optional[Lease]) -> str:
        msg = f"no answer from the gateway {self.gateway} within {timeout:g}s to command {c.id} ({c.actuator}, token {c.token} seq {c.seq})"
        if lease is not None and not lease.held:
            return msg + "; the lease was lost meanwhile, so the command was not published again"
        if not self.connected:
            return msg + f": not connected to the broker {self._conn.broker}"
        st = self.status
        if st == STATUS_ONLINE:
            # Mosquitto acknowledges a forbidden publish and drops it, and
            # delivers nothing on a forbidden subscription, without a word.
            return (msg + f", which is online, on reply topic {self.reply}: if the broker has an ACL, it must let the gateway "
                    f"write {self.topics.reply_base}# and this controller read its reply topic (docs/security.md, Broker ACLs)")
        if st == STATUS_OFFLINE:
            return (msg + f": gateway {self.gateway} is offline (its status says so). After a crash the broker keeps what "
                    "was published for it, and it is decided when the gateway is back online; after a clean stop it is "
                    "not kept: reread the state once the gateway is online")
        return msg + (f" (its status is {st})" if st else " (it has published no status: is the gateway id right, and is it running?)")

    @staticmethod
    def outcome(c: Command, a: Answer) -> Answer:
        """What :meth:`send` makes of answer ``a`` to ``c``: ``a`` for applied
        and duplicate (an :class:`~fencegate.errors.OutputError` if the
        output is not as ``c`` asked), else the outcome's error."""
        if a.outcome in (APPLIED, DUPLICATE):
            if not output_as_asked(c, a):
                raise OutputError(a, c.state)
            return a
        if a.outcome == STALE:
            raise StaleError(a)
        if a.outcome == REJECTED:
            raise RejectedError(a)
        if a.outcome == FAILED:
            raise FailedError(a)
        raise FencegateError(f"unknown outcome {a.outcome!r} in the answer to {a.id}")

    def reread(self, actuator: str, after: Answer, timeout: float = 10.0) -> ActuatorState:
        """The actuator's retained state at least as new as the fence ``after`` reports.

        After a stale answer: the state the gateway records now.
        """
        return self.wait_state(actuator, lambda s: s.fence.pair() >= after.fence.pair(), timeout)

