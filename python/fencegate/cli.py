"""``python3 -m fencegate send``: send one fenced command, as a tool and as the conformance driver.

It connects, learns the actuator's fence scope, acquires the scope's lease
in etcd (waiting for the lock up to --timeout), sends one command under its
token and writes what happens as JSON lines on stdout, flushed at once::

    {"event":"granted","token":"N","scope":"S"}
    {"event":"answer","outcome":"...","reason":"...","fence":{"token":"N","seq":"M"},"state":"on"}
    {"event":"reread","state":"off","fence":{"token":"N","seq":"M"}}      (after a stale answer)
    {"event":"lost","token":"N","reason":"..."}      (the lease was lost before the command was sent)

then releases its lease and exits, with the codes of Go's gateway send: 0
applied or duplicate, 3 stale, 4 rejected (or an actuator the gateway does
not have, said before any lease is taken), 5 failed, 6 no answer within
--timeout (also while the gateway is offline), 7 applied or duplicate but
the output is not as asked (a later command, a failed drive; a line on
stderr says so), 8 the lease was lost before the command was sent: nothing
was sent, 64 bad usage, 1 anything else (one line on stderr saying what
and why).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import signal
import socket
import sys
from typing import Any, Dict, NoReturn, Optional, Sequence

from .client import Client
from .errors import (EtcdError, FailedError, FencegateError, LeaseLost, OutputError, RejectedError, StaleError, Timeout,
                     UnknownActuator, redact_url)
from .connection import broker_problem
from .lease import Etcd, Lease, acquire
from .signing import Signer
from .wire import (MAX_SEQ, MAX_TOKEN, Answer, Command, Fence, InvalidCommand, InvalidTopic, check_gateway_id, check_prefix,
                   format_duty, parse_duty)

__all__ = ["main", "EXIT_OK", "EXIT_STALE", "EXIT_REJECTED", "EXIT_FAILED", "EXIT_TIMEOUT", "EXIT_OUTPUT", "EXIT_LEASE_LOST",
           "EXIT_OTHER", "EXIT_USAGE"]

EXIT_OK = 0
EXIT_OTHER = 1
EXIT_STALE = 3
EXIT_REJECTED = 4
EXIT_FAILED = 5
#: No answer within --timeout.
EXIT_TIMEOUT = 6
#: Applied or duplicate, but the output is not as the command asked.
EXIT_OUTPUT = 7
#: The lease was lost before the command was sent: nothing was sent.
EXIT_LEASE_LOST = 8
EXIT_USAGE = 64

_SEND_ABOUT = """\
Sends one tokenized command to a fencegate gateway and prints what happens
as JSON lines on stdout: "granted" (the lease and its token), "answer" (the
gateway's answer) and, after a stale answer, "reread" (the actuator's state
as the gateway records it now); "lost" (its token and why) when the lease
was lost before the command was sent.

With --etcd the token comes from an etcd lock on the actuator's fence scope,
which the gateway publishes (the lock key's create_revision); a lease lost
before the command was sent sends nothing (the event "lost", exit 8); once
the lease is lost, the command is not sent again, and the lock is released
before the program exits. An actuator the gateway does not have (its
retained states name those it has) is said at once, before any lease. With
--token N the command goes under a token you give. "fence" sends a
fence-only command: it raises the scope's fence and drives nothing. With
--key and --signer the command is signed, as a gateway that requires signed
commands wants.

Exit codes (as gateway send's): 0 applied or duplicate, 3 stale, 4 rejected
(or no such actuator), 5 failed, 6 no answer within --timeout (also while
the gateway is offline), 7 applied or duplicate but the output is not as
asked, 8 the lease was lost before the command was sent: nothing was sent,
64 bad usage, 1 anything else (broker or etcd unreachable)."""


class _UsageError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    """argparse with exit status 64 (EX_USAGE) for bad usage, not 2."""

    def error(self, message: str) -> NoReturn:
        """Print the usage and the problem, and exit 64."""
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: {message}\n")


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python3 -m fencegate", description="fencegate's Python controller tools.")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    s = sub.add_parser("send", help="send one fenced command and print the answer",
                       description=_SEND_ABOUT, formatter_class=argparse.RawDescriptionHelpFormatter)
    s.add_argument("state", choices=["on", "off", "fence", "duty"], metavar="on|off|fence|duty",
                   help="what to send (duty: a set-point output's --duty)")
    g = s.add_argument_group("the gateway")
    g.add_argument("--broker", default="tcp://127.0.0.1:1883",
                   help="MQTT broker URL: tcp://HOST:PORT, or ssl://HOST:PORT for TLS (default %(default)s)")
    g.add_argument("--gateway", required=True, metavar="ID", help="the gateway's id (required)")
    g.add_argument("--actuator", required=True, metavar="NAME", help="the actuator (required)")
    g.add_argument("--prefix", default="fencegate", help="topic prefix (default %(default)s)")
    t = s.add_argument_group("the token")
    t.add_argument("--etcd", metavar="URL", help="take the token from an etcd lock on the actuator's scope (etcd's client URL)")
    t.add_argument("--ttl", type=int, default=10, metavar="SECONDS", help="with --etcd: the lease's time to live (default %(default)s)")
    t.add_argument("--token", default=None, metavar="N", help="send under this token instead (1 to 2^63-1)")
    t.add_argument("--stop-after-grant", action="store_true",
                   help="with --etcd: stop this process (SIGSTOP) after the grant and before the command is built; "
                        "when continued (SIGCONT), send at once, without checking the lease (for the pause test)")
    t.add_argument("--stop-under-lease", action="store_true",
                   help="with --etcd: stop as --stop-after-grant does, but when continued send under the lease, as a "
                        "controller does: if it was lost meanwhile, send nothing and exit 8")
    c = s.add_argument_group("the command")
    c.add_argument("--id", default="", help="the command's id (default: generated)")
    c.add_argument("--duty", default=None, metavar="PERCENT",
                   help="with duty: the set-point, percent from 0 to 100 in steps of 0.01 (0 is off)")
    c.add_argument("--holder", default="", metavar="NAME", help="holder name for the audit trail (default: fencegate-py@HOST)")
    c.add_argument("--seq", default="0", metavar="N", help="seq under the token (default %(default)s)")
    c.add_argument("--timeout", type=float, default=30.0, metavar="SECONDS",
                   help="how long to wait for the scope, the lock and the answer, each (default %(default)s)")
    c.add_argument("--key", metavar="PATH.key", help="sign with this controller's private key (gateway keygen's PATH.key); with --signer")
    c.add_argument("--signer", metavar="NAME", help="the controller's name in the gateway's configuration (controllers: name); with --key")
    b = s.add_argument_group("the broker's login")
    b.add_argument("--username", help="MQTT user name (the password comes from --password-file, or $FENCEGATE_MQTT_PASSWORD)")
    b.add_argument("--password-file", metavar="PATH", help="file that holds the MQTT password, alone on one line")
    b.add_argument("--tls-ca", metavar="PATH", help="TLS: the CA certificates (PEM) the broker's certificate must be signed by")
    b.add_argument("--tls-cert", metavar="PATH", help="TLS: this controller's certificate (PEM), with --tls-key")
    b.add_argument("--tls-key", metavar="PATH", help="TLS: the private key of --tls-cert (PEM)")
    return p


_NAMES = {"broker": "--broker", "ca_file": "--tls-ca", "cert_file": "--tls-cert", "key_file": "--tls-key",
          "username": "--username", "password_file": "--password-file"}


def _emit(event: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event, ensure_ascii=False, separators=(",", ":")) + "\n")
    sys.stdout.flush()


def _fence(f: Fence) -> Dict[str, str]:
    return {"token": str(f.token), "seq": str(f.seq)}


def _answer_event(a: Answer) -> Dict[str, Any]:
    e: Dict[str, Any] = {"event": "answer", "outcome": a.outcome, "reason": a.reason, "fence": _fence(a.fence), "state": a.state}
    if a.duty is not None:
        e["duty"] = format_duty(a.duty)
    return e


#: The flag that sets what an InvalidTopic's why names.
_TOPIC_FLAGS = {"gateway": "--gateway", "prefix": "--prefix", "username": "--username"}


def _whole(flag: str, s: str, lo: int, hi: int) -> int:
    """``s`` as Go's flags take a number (strconv.ParseUint, base 10): ASCII
    digits only, no sign, space or underscore, from ``lo`` to ``hi``."""
    n = int(s) if s.isascii() and s.isdigit() else -1
    if n < lo or n > hi:
        top = "2^63-1" if hi == (1 << 63) - 1 else str(hi)
        raise _UsageError(f"invalid value {s!r} for {flag}: want a whole number from {lo} to {top}")
    return n


def _check(a: argparse.Namespace) -> None:
    # The rules of the gateway's configuration: a gateway has no other id,
    # and no prefix another (Go's config loader and gateway send alike).
    try:
        check_gateway_id(a.gateway)
    except InvalidTopic as e:
        raise _UsageError(f"--gateway {a.gateway!r}: {e.problem}") from None
    try:
        if a.prefix:  # "" is the default's
            check_prefix(a.prefix)
    except InvalidTopic as e:
        raise _UsageError(f"--prefix {a.prefix!r}: {e.problem}; want the gateway's mqtt.topic_prefix "
                          "(levels of printable characters, default fencegate)") from None
    if a.token is not None:
        a.token = _whole("--token", a.token, 1, MAX_TOKEN)
    a.seq = _whole("--seq", a.seq, 0, MAX_SEQ)
    if (a.token is not None) == bool(a.etcd):
        raise _UsageError("give either --etcd URL or --token N (1 to 2^63-1)")
    for flag, given in (("--stop-after-grant", a.stop_after_grant), ("--stop-under-lease", a.stop_under_lease)):
        if given and not a.etcd:
            raise _UsageError(f"{flag} goes with --etcd")
    if a.stop_after_grant and a.stop_under_lease:
        raise _UsageError("give --stop-after-grant (send without the lease's guard) or --stop-under-lease (send under it), not both")
    if a.ttl <= 0:
        raise _UsageError(f"--ttl {a.ttl} must be a positive number of seconds")
    if not math.isfinite(a.timeout) or a.timeout <= 0:
        raise _UsageError(f"--timeout {a.timeout:g}: want a positive number of seconds")
    why = broker_problem(a.broker)
    if why:
        raise _UsageError(f"--broker {redact_url(a.broker)!r}: {why}")
    if a.etcd:
        try:
            Etcd(a.etcd)
        except EtcdError as e:
            raise _UsageError(f"--etcd {redact_url(a.etcd)!r}: {str(e).split(': ', 1)[-1]}") from None
    if bool(a.key) != bool(a.signer):
        raise _UsageError("give both --key and --signer, or neither")


def _terminate(_sig: int, _frame: object) -> None:
    raise KeyboardInterrupt  # release the lease on the way out, as at Ctrl-C


def _send(a: argparse.Namespace) -> int:
    signal.signal(signal.SIGTERM, _terminate)
    signer = Signer(a.signer, a.key) if a.key else None
    holder = a.holder or f"fencegate-py@{socket.gethostname()}"
    lease: Optional[Lease] = None
    with Client(a.broker, a.gateway, prefix=a.prefix, username=a.username, password_file=a.password_file,
                ca_file=a.tls_ca, cert_file=a.tls_cert, key_file=a.tls_key, signer=signer,
                option_names=_NAMES) as client:
        try:
            token = a.token
            if a.etcd:
                # The lease is the scope's, as the gateway says: actuators
                # that share a scope share one lease and one fence.
                try:
                    scope = client.scope(a.actuator, a.timeout)
                except UnknownActuator as e:
                    print(f"fencegate send: {e}", file=sys.stderr)
                    return EXIT_REJECTED
                lease = acquire(a.etcd, a.gateway, scope, ttl=a.ttl, wait=a.timeout)
                token = lease.token
                _emit({"event": "granted", "token": str(token), "scope": scope})
                if a.stop_after_grant or a.stop_under_lease:
                    os.kill(os.getpid(), signal.SIGSTOP)
            if (a.state == "duty") != (a.duty is not None):
                raise InvalidCommand("duty", "duty and --duty go together: send duty --duty PERCENT to a set-point output")
            state = "" if a.state in ("fence", "duty") else a.state
            cmd = Command(a.actuator, token, a.seq, state, id=a.id, holder=holder,
                          duty=parse_duty(a.duty) if a.duty is not None else None)
            # Under the lease: nothing is sent once it is lost. Except with
            # --stop-after-grant, whose command must reach the gateway even
            # if the lease ran out meanwhile, to show that the fence, not
            # the client, refuses it.
            try:
                answer = client.send(cmd, timeout=a.timeout, lease=None if a.stop_after_grant else lease)
            except LeaseLost as e:
                # Raised before the first publish only: nothing was sent.
                why = lease.lost_reason if lease is not None and lease.lost_reason else str(e)
                _emit({"event": "lost", "token": str(token), "reason": why})
                print(f"fencegate send: {e}; nothing was sent", file=sys.stderr)
                return EXIT_LEASE_LOST
            except StaleError as e:
                _emit(_answer_event(e.answer))
                if lease is not None:
                    try:
                        # A fence that no newer holder of this etcd can
                        # have raised: say so, acquiring again cannot help.
                        lease.check_fence(e.fence.token)
                    except FencegateError as ahead:
                        print(f"fencegate send: {ahead}", file=sys.stderr)
                try:
                    st = client.reread(a.actuator, e.answer, a.timeout)
                    _emit({"event": "reread", "state": st.state, "fence": _fence(st.fence)})
                except FencegateError as re:
                    print(f"fencegate send: stale, and the reread failed: {re}", file=sys.stderr)
                return EXIT_STALE
            except RejectedError as e:
                _emit(_answer_event(e.answer))
                if e.reason == "unknown-actuator":
                    print(f"fencegate send: {client.unknown(a.actuator)}", file=sys.stderr)
                else:
                    print(f"fencegate send: {e}", file=sys.stderr)
                return EXIT_REJECTED
            except FailedError as e:
                _emit(_answer_event(e.answer))
                print(f"fencegate send: {e}", file=sys.stderr)
                return EXIT_FAILED
            except OutputError as e:
                # Applied or duplicate: the gateway took it. Say that the
                # output is otherwise now, for the person who reads this.
                _emit(_answer_event(e.answer))
                print(f"fencegate send: {e}", file=sys.stderr)
                return EXIT_OUTPUT
            except Timeout as e:
                print(f"fencegate send: {e}", file=sys.stderr)
                return EXIT_TIMEOUT
            _emit(_answer_event(answer))
            return EXIT_OK
        finally:
            if lease is not None:
                try:
                    lease.release()
                except FencegateError as e:
                    print(f"fencegate send: release the lease: {e}", file=sys.stderr)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """Run the CLI; returns the exit code."""
    p = _parser()
    args = p.parse_args(list(sys.argv[1:] if argv is None else argv))
    if args.command is None:
        p.print_help(sys.stderr)
        return EXIT_USAGE
    try:
        _check(args)
        return _send(args)
    except _UsageError as e:
        print(f"fencegate send: {e}", file=sys.stderr)
        return EXIT_USAGE
    except InvalidTopic as e:
        # A topic level the flags make (the reply topic's user name), refused
        # before anything was sent.
        flag = _TOPIC_FLAGS.get(e.why, "")
        print(f"fencegate send: {flag + ': ' if flag else ''}{e.problem}", file=sys.stderr)
        return EXIT_USAGE
    except InvalidCommand as e:
        print(f"fencegate send: refused before sending: {e}", file=sys.stderr)
        return EXIT_USAGE
    except (FencegateError, ValueError) as e:
        print(f"fencegate send: {e}", file=sys.stderr)
        return EXIT_OTHER
    except KeyboardInterrupt:
        print("fencegate send: interrupted", file=sys.stderr)
        return EXIT_OTHER

