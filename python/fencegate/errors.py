"""The errors of the fencegate client.

Outcomes first: a stale, rejected or failed answer is raised as
:class:`StaleError`, :class:`RejectedError` or :class:`FailedError`, each
carrying the gateway's :class:`~fencegate.wire.Answer`, and an applied or
duplicate one that says the output is not as asked as :class:`OutputError`;
no answer in time is a :class:`Timeout`, and a name the gateway has no
actuator of an :class:`UnknownActuator`. Then the faults of the parts around: the broker
(:class:`BrokerError`), etcd (:class:`EtcdError`), a lease that is gone
(:class:`LeaseLost`), a key file (:class:`KeyFileError`). Every one of them
is a :class:`FencegateError`, whose message says what and why in words a
person can act on: print it, no traceback needed.
"""

from __future__ import annotations

from typing import List, Optional

from .wire import Answer, Fence, InvalidCommand

__all__ = [
    "FencegateError", "AnswerError", "StaleError", "OutputError", "RejectedError", "FailedError",
    "Timeout", "UnknownActuator", "BrokerError", "EtcdError", "AheadError", "LeaseLost", "KeyFileError", "InvalidCommand", "redact_url",
]


def redact_url(url: str) -> str:
    """``url`` as a message may show it: ``scheme://host:port``, without the
    user info (``user:password@``), path or query; each URL of a comma list.

    Messages end up in logs and terminals, where a password must not.
    """
    def one(u: str) -> str:
        scheme, sep, rest = u.strip().partition("://")
        if not sep:
            scheme, rest = "", scheme
        authority = rest
        for end in "/?#":
            authority = authority.split(end, 1)[0]
        return scheme + sep + authority.rpartition("@")[2]
    return ",".join(one(u) for u in url.split(","))


class FencegateError(Exception):
    """Base of this package's errors (except :class:`InvalidCommand`, a ValueError)."""


class AnswerError(FencegateError):
    """An answer that is not a success; ``answer`` is the gateway's answer."""

    def __init__(self, answer: Answer, message: str) -> None:
        super().__init__(message)
        self.answer = answer

    @property
    def fence(self) -> Fence:
        """The scope's fence the answer reports."""
        return self.answer.fence

    @property
    def state(self) -> str:
        """The actuator's recorded state the answer reports (``""``: none)."""
        return self.answer.state

    @property
    def reason(self) -> str:
        """The answer's reason (for rejected answers)."""
        return self.answer.reason


class StaleError(AnswerError):
    """A stale answer: the command's pair is not above the scope's fence.

    Normal recovery, not a fault: if the fence's token is above yours,
    another holder has the scope. Stop acting under this token, reread
    the state, acquire the lease again; never resend with the same token.
    """

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer, f"stale: {answer.error or 'the command is not above the fence'} "
                                 f"(fence {answer.fence}, {answer.actuator} is {answer.state or 'unknown'})")


class OutputError(AnswerError):
    """An applied or duplicate answer that says the actuator is not as the command asked.

    The gateway took the command (its fence holds), but the output is
    otherwise now: a later command undid it, the boot rule switched it off
    at a restart, or its drive failed (``answer.actual``). Reread the
    state and, to set it, send a new command with a higher seq.
    """

    def __init__(self, answer: Answer, asked: str) -> None:
        now = answer.state or "unknown"
        if answer.actual:
            now = f"recorded {answer.state or 'unknown'} but reads back {answer.actual}"
        super().__init__(answer, f"{answer.outcome}, but {answer.actuator} is {now} now, not {asked} as asked: the output "
                                 "changed after the command was applied (a later command, the boot rule at a restart, or a "
                                 "failed drive); reread the state, and send a new command with a higher seq to set it")
        self.asked = asked


class RejectedError(AnswerError):
    """A rejected answer: nothing changed; ``reason`` says why, for programs."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer, f"rejected ({answer.reason or 'no reason'}): {answer.error}")


class FailedError(AnswerError):
    """A failed answer: the gateway could not record or drive; retry later with a higher seq."""

    def __init__(self, answer: Answer) -> None:
        super().__init__(answer, f"failed: {answer.error}")


class Timeout(FencegateError):
    """No answer came in time, although the command was published again and again.

    It may or may not have been decided: reread the state, and send the
    same id, token and seq again (a duplicate is answered, never driven
    twice). ``answer`` is None: there is none.
    """

    answer: Optional[Answer] = None


class UnknownActuator(FencegateError):
    """The gateway has no actuator of that name: its retained states name
    the ones it has (``actuators``). Nothing was sent; correct the name."""

    def __init__(self, message: str, actuator: str, actuators: List[str]) -> None:
        super().__init__(message)
        self.actuator, self.actuators = actuator, actuators


class BrokerError(FencegateError):
    """The broker could not be reached, refused the login, or its TLS failed."""


class EtcdError(FencegateError):
    """etcd could not be reached or refused a request."""


class AheadError(FencegateError):
    """The gateway's fence was not raised by a holder of this etcd.

    Its token is above every revision etcd has issued (or, while this
    holder still holds its lock, at or above its own token): typed by hand,
    from another lease service, or etcd was reset or restored from an older
    backup. No token from this etcd can pass it until its revision does;
    acquiring again will not help (docs/controllers.md, "Restoring etcd").
    """

    def __init__(self, fence: int, revision: int, held: int = 0) -> None:
        what = f"is above every revision this etcd has issued (its current revision is {revision})"
        if held and revision >= fence:
            what = (f"is at or above the token {held} that this etcd has just granted to the lock this holder still holds, "
                    f"so no newer holder of this etcd raised it (this etcd handed out token {held} again)")
        super().__init__(f"the gateway's fence token {fence} {what}: the fence's tokens did not come from this etcd: "
                         "they were typed by hand, or came from another lease service, or etcd was reset or restored from "
                         "an older backup. No token from this etcd can pass the fence until its revision does; retrying "
                         "will not help (docs/controllers.md, \"Restoring etcd\")")
        self.fence, self.revision, self.held = fence, revision, held


class LeaseLost(FencegateError):
    """The lease is gone (expired or revoked): nothing may be sent under its token."""


class KeyFileError(FencegateError):
    """A signing key file that cannot be used."""
