"""A Client without a broker: its connection records what it would publish,
and the test plays the broker's part by handing messages to the client."""

from __future__ import annotations

import threading
from typing import Any, Callable, List, Optional, Tuple
from unittest import mock

from fencegate.client import Client


class RecordingConnection:
    """Stands in for fencegate.connection.Connection."""

    broker = "tcp://test.invalid:1883"

    def __init__(self) -> None:
        self.published: List[Tuple[str, bytes]] = []
        self.connected = True
        self.changed = threading.Condition()
        #: Called with each publish: the test's gateway, which may answer.
        self.gateway: Optional[Callable[[str, bytes], None]] = None

    def open(self, timeout: float) -> None:
        pass

    def publish(self, topic: str, payload: bytes) -> bool:
        with self.changed:
            self.published.append((topic, payload))
            self.changed.notify_all()
        if self.gateway is not None:
            self.gateway(topic, payload)
        return self.connected

    def wait_published(self, n: int, timeout: float) -> bool:
        """Wait until at least n messages were published."""
        with self.changed:
            return self.changed.wait_for(lambda: len(self.published) >= n, timeout)

    def close(self) -> None:
        pass


def offline_client(**kw: Any) -> Tuple[Client, RecordingConnection]:
    """A Client on a RecordingConnection, and the connection."""
    conn = RecordingConnection()
    with mock.patch("fencegate.client.Connection", lambda *a, **k: conn):
        return Client("tcp://test.invalid:1883", "gw", client_id="unit", **kw), conn
