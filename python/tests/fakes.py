"""A Client without a broker: its connection records what it would publish,
and the test plays the broker's part by handing messages to the client."""

from __future__ import annotations

import json
import threading
from typing import Any, Callable, Dict, List, Optional, Tuple
from unittest import mock

from fencegate.client import Client
from fencegate.lease import Etcd, Lease
from fencegate.wire import Command


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


def answer_for(c: Command, outcome: str = "applied", **kw: Any) -> bytes:
    """The gateway's answer to c: applied at c's own pair unless told otherwise."""
    d: Dict[str, Any] = {"id": c.id, "actuator": c.actuator, "outcome": outcome, "token": c.token, "seq": c.seq,
                         "fence": {"token": c.token, "seq": c.seq}, "state": c.state or "off"}
    d.update(kw)
    return json.dumps(d).encode()


def scripted_gateway(stale_at: Callable[[int, Dict[str, Any]], Optional[Dict[str, int]]]) -> Tuple[Client, Lease, List[Dict[str, Any]]]:
    """An offline client, a lease of token 9 on pump, and the commands it
    publishes, answered by a gateway that answers the n-th (from 1),
    published as d, stale at the fence stale_at(n, d) returns, or applied
    if it returns None."""
    cl, conn = offline_client()
    lease = Lease(Etcd("http://127.0.0.1:1"), "1", 10, "gw", "pump")
    lease.token = 9
    sent: List[Dict[str, Any]] = []

    def gateway(topic: str, payload: bytes) -> None:
        d = json.loads(payload)
        sent.append(d)
        cmd = Command("pump", d["token"], d.get("seq", 0), d.get("state", ""), id=d["id"])
        fence = stale_at(len(sent), d)
        cl._message(d["reply"], answer_for(cmd, "stale", fence=fence) if fence else answer_for(cmd), False)

    conn.gateway = gateway
    return cl, lease, sent
