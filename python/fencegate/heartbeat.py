"""Heartbeats: fence-only commands that tell a scope's dead-man its holder lives."""

from __future__ import annotations

import threading
from typing import Callable, Optional

from .client import Client
from .errors import FencegateError, StaleError
from .lease import Lease
from .seq import Seq
from .wire import Command

__all__ = ["Heartbeat"]


class Heartbeat:
    """Sends a fence-only command to ``actuator`` every ``every`` s, in a thread.

    For a scope with a dead-man (``safe: after`` in the gateway's
    configuration): ``every`` well under it, say a third. The seq numbers
    come from ``seq``, shared with the holder's other commands. Each
    heartbeat waits up to ``timeout`` s (default 3 × every) for its answer.
    It stops at :meth:`stop`, when the lease is lost, or at the first
    heartbeat that is not applied (a stale one means another holder has the
    scope); ``error`` then holds why, and ``on_error`` is called with it. A
    heartbeat stale under the lease's own token is not an error: a command
    of the holder's own, with a later seq, arrived first.
    """

    def __init__(self, client: Client, lease: Lease, actuator: str, seq: Seq, every: float, holder: str = "",
                 timeout: Optional[float] = None,
                 on_error: Optional[Callable[[FencegateError], None]] = None) -> None:
        if every <= 0:
            raise ValueError("a heartbeat needs every > 0 (seconds)")
        self.client, self.lease, self.actuator, self.seq = client, lease, actuator, seq
        self.every, self.holder = every, holder
        self.timeout = timeout if timeout and timeout > 0 else 3 * every
        self.on_error = on_error
        self.error: Optional[FencegateError] = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="fencegate-heartbeat", daemon=True)

    def start(self) -> "Heartbeat":
        """Start sending; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop, and wait for a heartbeat in flight."""
        self._stop.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(self.timeout + 1)

    def _run(self) -> None:
        while not self._stop.is_set():
            s = self.seq.next()
            c = Command(self.actuator, self.lease.token, s, holder=self.holder,
                        id=f"{self.holder or self.client.client_id}-hb-{self.lease.token}-{s}")
            try:
                self.client.send(c, timeout=self.timeout, lease=self.lease)
            except FencegateError as e:
                if isinstance(e, StaleError) and e.fence.token == c.token:
                    # The holder's own command, with a later seq from the
                    # same Seq, arrived first: the scope is still ours.
                    self.seq.skip_to(e.fence.seq)
                    continue
                if self._stop.is_set():
                    return
                self.error = e
                if self.on_error is not None:
                    self.on_error(e)
                return
            if self._stop.wait(self.every):
                return
