"""A broker that restarts: the client connects again, subscribes again, and
publishes its unanswered command again at once. A Mosquitto of its own
(skipped without mosquitto on PATH); the gateway's part is played here."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from
sys.path.insert(0, str(Path(__file__).resolve().parent))  # test_broker_login.py

from fencegate import Answer, Client, Command, FencegateError, Timeout  # noqa: E402
from fencegate.connection import Connection, Security  # noqa: E402
from fencegate.lease import Etcd, Lease  # noqa: E402
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


@unittest.skipUnless(MOSQUITTO, "needs mosquitto")
class TestNoReplayAfterLeaseDeadline(unittest.TestCase):
    """The attack on the lease: a command published (lease held) to a
    broker that is frozen, so no PUBACK; the lease's deadline passes; the
    broker is killed and started again. paho must not publish its
    unacknowledged copy again on the reconnect, under a lease that is lost.
    """

    def test_no_publish_after_the_deadline(self) -> None:
        conf = ["allow_anonymous true"]
        with tempfile.TemporaryDirectory() as tmp:
            d = Path(tmp)
            broker = Broker(d, conf)
            url = f"tcp://127.0.0.1:{broker.port}"
            # No timed resend: only paho's replay or the reconnect's resend could publish again.
            cl = Client(url, "gw", resend=60)
            publishes: List[float] = []
            publish = cl._conn.publish

            def counted(topic: str, payload: bytes) -> bool:
                publishes.append(time.monotonic())
                return publish(topic, payload)

            cl._conn.publish = counted  # type: ignore[method-assign]
            # A lease whose keep-alives go nowhere (the thread is not even
            # started): held until granted + 3 s, then lost, for sure.
            lease = Lease(Etcd("http://127.0.0.1:1"), "1", 3, "gw", "pump")
            lease.token = 5
            got: Dict[str, Any] = {}
            seen: List[float] = []
            sub: Optional[Connection] = None

            def send() -> None:
                try:
                    got["answer"] = cl.send(Command("pump", 5, 1, "on"), timeout=14, lease=lease)
                except FencegateError as e:
                    got["error"] = e

            t = threading.Thread(target=send)
            try:
                os.kill(broker.proc.pid, signal.SIGSTOP)  # frozen: takes the publish into its socket, never acknowledges it
                t.start()
                end = time.monotonic() + 5
                while not publishes and time.monotonic() < end:
                    time.sleep(0.02)
                self.assertEqual(len(publishes), 1, "the command was not published under the held lease")
                while lease.held:
                    time.sleep(0.02)
                deadline = time.monotonic()
                broker.proc.kill()
                broker.proc.wait(5)
                if broker.proc.stderr:
                    broker.proc.stderr.close()
                end = time.monotonic() + 5
                while cl.connected and time.monotonic() < end:
                    time.sleep(0.02)
                self.assertFalse(cl.connected, "the client did not notice the broker was gone")
                # Let a reconnect fail first (the port is closed), so that
                # the watcher is subscribed before the client is back.
                time.sleep(1.5)
                broker = Broker(d, conf, port=broker.port)
                sub = Connection(url, "watcher", Security(), ["fencegate/gw/+/set"],
                                 lambda _t, _p, _r: seen.append(time.monotonic()), lambda: None, lambda: None)
                sub.open(5)
                self.assertFalse(cl.connected, "the client came back before the watcher: the test proves nothing")
                end = time.monotonic() + 15
                while not cl.connected and time.monotonic() < end:
                    time.sleep(0.02)
                self.assertTrue(cl.connected, "the client did not connect again")
                time.sleep(1.0)  # anything published on the reconnect has arrived by now
                self.assertEqual(seen, [], f"{len(seen)} copies of the command published after the lease's deadline")
                self.assertEqual([p for p in publishes if p >= deadline], [], "published again after the deadline")
                t.join(20)
                self.assertFalse(t.is_alive())
                e = got.get("error")
                self.assertIsInstance(e, Timeout)
                self.assertIn("the lease was lost meanwhile, so the command was not published again", str(e))
                self.assertEqual(seen, [], "published after the deadline")
            finally:
                cl.close()
                if sub is not None:
                    sub.close()
                if broker.proc.poll() is None:
                    os.kill(broker.proc.pid, signal.SIGCONT)
                broker.stop()
                t.join(5)


if __name__ == "__main__":
    unittest.main()
