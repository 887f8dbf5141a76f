"""A broker that restarts: the client connects again, subscribes again, and
publishes its unanswered command again at once. A Mosquitto of its own
(skipped without mosquitto on PATH); the gateway's part is played here."""

from __future__ import annotations

import json
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Any, Dict, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from
sys.path.insert(0, str(Path(__file__).resolve().parent))  # test_broker_login.py

from fencegate import Answer, Client, Command, FencegateError  # noqa: E402
from fencegate.connection import Connection, Security  # noqa: E402
from test_broker_login import MOSQUITTO, Broker  # noqa: E402


class FakeGateway:
    """Answers every command applied, on its reply topic, while ``answering``."""

    def __init__(self, url: str) -> None:
        self.answering = False
        self.commands = 0
        self.conn = Connection(url, "fake-gateway", Security(), ["fencegate/gw/+/set"], self._command,
                               lambda: None, lambda: None)
        self.conn.open(10)

    def _command(self, topic: str, payload: bytes, retained: bool) -> None:
        self.commands += 1
        if not self.answering:
            return
        c: Dict[str, Any] = json.loads(payload)
        pair = {"token": c["token"], "seq": c.get("seq", 0)}
        answer = {"id": c.get("id", ""), "actuator": topic.split("/")[2], "outcome": "applied", **pair,
                  "fence": pair, "state": c.get("state", "off")}
        self.conn.publish(c["reply"], json.dumps(answer).encode())


@unittest.skipUnless(MOSQUITTO, "needs mosquitto")
class TestBrokerRestart(unittest.TestCase):
    def test_resend_after_reconnect(self) -> None:
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            broker = Broker(d, ["allow_anonymous true"])
            url = f"tcp://127.0.0.1:{broker.port}"
            gw = FakeGateway(url)
            # No timed resend within this test: only the reconnect may resend.
            cl = Client(url, "gw", resend=60)
            got: Dict[str, Any] = {}

            def send() -> None:
                try:
                    got["answer"] = cl.send(Command("pump", 5, 1, "on"), timeout=20)
                except FencegateError as e:
                    got["error"] = e

            t = threading.Thread(target=send)
            try:
                t.start()
                deadline = time.monotonic() + 5
                while gw.commands == 0 and time.monotonic() < deadline:
                    time.sleep(0.02)
                self.assertEqual(gw.commands, 1)
                gw.conn.close()
                broker.stop()
                while cl.connected and time.monotonic() < deadline + 5:
                    time.sleep(0.02)
                self.assertFalse(cl.connected, "the client did not notice the broker was gone")
                broker = Broker(d, ["allow_anonymous true"], port=broker.port)
                # The gateway is back before the client, which waits a
                # second before it connects again.
                gw = FakeGateway(url)
                gw.answering = True
                t.join(30)
                self.assertNotIn("error", got)
                a: Optional[Answer] = got.get("answer")
                self.assertIsNotNone(a, "no answer after the broker came back")
                assert a is not None
                self.assertEqual(a.outcome, "applied")
                self.assertEqual(gw.commands, 1, "not published again once after the reconnect")
                self.assertTrue(cl.connected)
            finally:
                cl.close()
                gw.conn.close()
                broker.stop()
                t.join(5)


if __name__ == "__main__":
    unittest.main()
