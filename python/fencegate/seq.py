"""Seq numbers under one token, for a holder's commands and heartbeats alike."""

from __future__ import annotations

import threading

__all__ = ["Seq"]


class Seq:
    """Hands out strictly increasing seq numbers under one token.

    Share one between a holder's commands and its heartbeats: two commands
    under one token never share a pair. ``Seq()`` starts at 1 (seq 0 is the
    fence-only command that raises the fence after a grant); ``Seq(after=n)``
    continues above n, e.g. above a fence of one's own token.
    """

    def __init__(self, after: int = 0) -> None:
        self._n = after
        self._lock = threading.Lock()

    def next(self) -> int:
        """The next seq."""
        with self._lock:
            self._n += 1
            return self._n

    def skip_to(self, n: int) -> None:
        """Hand out numbers above ``n`` from now on (e.g. above a fence of
        one's own token that a later command of one's own set)."""
        with self._lock:
            self._n = max(self._n, n)

    @property
    def last(self) -> int:
        """The last seq handed out (``after`` if none)."""
        with self._lock:
            return self._n
