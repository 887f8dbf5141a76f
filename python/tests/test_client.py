"""Client.send without a broker: resends, answer matching, what stops a send."""

from __future__ import annotations

import contextlib
import io
import json
import sys
import threading
import time
import unittest
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple
from unittest import mock

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fakes.py

from fencegate import Answer, Client, Command, Heartbeat, LeaseLost, Seq, StaleError, Timeout, UnknownActuator
from fencegate.cli import EXIT_LEASE_LOST, EXIT_REJECTED, EXIT_TIMEOUT, main
from fencegate.lease import Etcd, Lease
from fakes import RecordingConnection, answer_for, offline_client, scripted_gateway


class Sender:
    """Client.send in a thread."""

    def __init__(self, cl: Client, c: Command, timeout: float, lease: Optional[Lease] = None) -> None:
        self.answer: Optional[Answer] = None
        self.error: Optional[BaseException] = None
        self.t = threading.Thread(target=self._run, args=(cl, c, timeout, lease))
        self.t.start()

    def _run(self, cl: Client, c: Command, timeout: float, lease: Optional[Lease]) -> None:
        try:
            self.answer = cl.send(c, timeout=timeout, lease=lease)
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def join(self) -> None:
        self.t.join(10)


class TestResend(unittest.TestCase):
    def setUp(self) -> None:
        self.cl, self.conn = offline_client(resend=0.2)

    def payloads(self) -> List[bytes]:
        return [p for _, p in self.conn.published]

    def test_resends_unchanged_doubling(self) -> None:
        c = Command("pump", 7, 1, "on", id="r-1")
        s = Sender(self.cl, c, timeout=1.6)
        s.join()
        self.assertIsInstance(s.error, Timeout)
        # At 0, 0.2, 0.6 and 1.4 s: the wait doubles.
        self.assertEqual(len(self.payloads()), 4, self.payloads())
        self.assertEqual(len(set(self.payloads())), 1)
        self.assertIn("no answer from the gateway gw within 1.6s to command r-1", str(s.error))

    def test_answer_ends_it(self) -> None:
        c = Command("pump", 7, 1, "on", id="r-2")
        s = Sender(self.cl, c, timeout=5)
        self.assertTrue(self.conn.wait_published(1, 2))
        reply = self.cl.reply
        self.cl._message(reply, answer_for(Command("pump", 7, 0, "on", id="r-2")), False)  # another seq: not its answer
        self.cl._message(reply, answer_for(Command("valve", 7, 1, "on", id="r-2")), False)  # another actuator
        self.cl._message("fencegate/gw/pump/result", answer_for(c), False)  # not our reply topic
        time.sleep(0.05)
        self.assertIsNone(s.answer)
        self.cl._message(reply, answer_for(c, "duplicate"), False)
        s.join()
        self.assertIsNone(s.error)
        assert s.answer is not None
        self.assertEqual(s.answer.outcome, "duplicate")

    def test_stale(self) -> None:
        c = Command("pump", 7, 1, "on", id="r-3")
        s = Sender(self.cl, c, timeout=5)
        self.assertTrue(self.conn.wait_published(1, 2))
        self.cl._message(self.cl.reply, answer_for(c, "stale", fence={"token": 8, "seq": 0}, state="off"), False)
        s.join()
        self.assertIsInstance(s.error, StaleError)
        assert isinstance(s.error, StaleError)
        self.assertEqual((s.error.fence.token, s.error.state), (8, "off"))

    def test_resend_at_once_when_the_gateway_comes_online(self) -> None:
        cl, conn = offline_client(resend=30)
        status = cl.topics.status
        cl._message(status, b"offline", True)
        s = Sender(cl, Command("pump", 7, 1, "on", id="r-4"), timeout=5)
        self.assertTrue(conn.wait_published(1, 2))
        cl._message(status, b"online", True)  # a retained online is how it is, not a change
        time.sleep(0.2)
        self.assertEqual(len(conn.published), 1)
        cl._message(status, b"offline", False)
        cl._message(status, b"online", False)
        self.assertTrue(conn.wait_published(2, 2), "no resend when the gateway came online")
        cl._ready()  # this client subscribed again after a reconnect
        self.assertTrue(conn.wait_published(3, 2), "no resend after a reconnect")
        cl._message(cl.reply, answer_for(Command("pump", 7, 1, "on", id="r-4")), False)
        s.join()
        self.assertIsNone(s.error)

    def test_lost_lease(self) -> None:
        lease = Lease(Etcd("http://127.0.0.1:1"), "1", 10, "gw", "pump")
        lease.token = 7
        c = Command("pump", 7, 1, "on", id="r-5")
        s = Sender(self.cl, c, timeout=1.0, lease=lease)
        self.assertTrue(self.conn.wait_published(1, 2))
        lease._set_lost("revoked")
        s.join()
        self.assertIsInstance(s.error, Timeout)
        self.assertEqual(len(self.conn.published), 1, "published again after the lease was lost")
        self.assertIn("the lease was lost meanwhile", str(s.error))
        with self.assertRaises(LeaseLost):
            self.cl.send(Command("pump", 7, 2, "on"), lease=lease)
        self.assertEqual(len(self.conn.published), 1)

    def test_reconnect_during_the_publish_resends(self) -> None:
        cl, conn = offline_client(resend=30)
        conn.gateway = lambda t, p: cl._ready() if len(conn.published) == 1 else None  # reconnected meanwhile
        c = Command("pump", 7, 1, "on", id="r-6")
        s = Sender(cl, c, timeout=5)
        self.assertTrue(conn.wait_published(2, 2), "a reconnect during the publish did not resend at once")
        cl._message(cl.reply, answer_for(c), False)
        s.join()
        self.assertIsNone(s.error)

    def test_nothing_published_while_disconnected(self) -> None:
        cl, conn = offline_client(resend=0.1)
        lease = Lease(Etcd("http://127.0.0.1:1"), "1", 10, "gw", "pump")
        lease.token = 7
        conn.connected = False
        c = Command("pump", 7, 1, "on", id="r-7")
        s = Sender(cl, c, timeout=5, lease=lease)
        time.sleep(0.5)
        self.assertEqual(conn.published, [], "published while disconnected (paho would send it after the reconnect)")
        conn.connected = True
        cl._ready()  # the reconnect resends
        self.assertTrue(conn.wait_published(1, 2))
        cl._message(cl.reply, answer_for(c), False)
        s.join()
        self.assertIsNone(s.error)

        # Lost while disconnected: nothing is published at the reconnect either.
        conn.published.clear()
        conn.connected = False
        s = Sender(cl, Command("pump", 7, 2, "off", id="r-8"), timeout=5, lease=lease)
        time.sleep(0.3)
        lease._set_lost("revoked")
        conn.connected = True
        cl._ready()
        s.join()
        self.assertIsInstance(s.error, LeaseLost)
        self.assertEqual(conn.published, [])

    def test_ids(self) -> None:
        c, payload = self.cl.prepare(Command("pump", 7))
        c2, _ = self.cl.prepare(Command("pump", 7))
        self.assertNotEqual(c.id, c2.id)
        self.assertEqual(json.loads(payload)["reply"], "fencegate/gw/reply/unit")

    def test_unknown_actuator_at_once(self) -> None:
        """scope() says at once that the gateway has no such actuator once
        its retained states and status have come; without a retained
        status it waits (the states may still be coming)."""
        cl, _ = offline_client()
        cl._message("fencegate/gw/pump/state", b'{"actuator":"pump","scope":"pump","state":"off","fence":{"token":3,"seq":0}}', True)
        t = threading.Timer(0.2, lambda: cl._message("fencegate/gw/valve/state",
                                                     b'{"actuator":"valve","scope":"valve","fence":{"token":1,"seq":0}}', False))
        t.start()
        self.assertEqual(cl.scope("valve", timeout=5), "valve")  # a live state, before any retained status
        start = time.monotonic()
        with self.assertRaises(UnknownActuator):
            cl.scope("pmup", timeout=0.5)
        self.assertGreaterEqual(time.monotonic() - start, 0.5, "no retained status yet: it waits")
        cl._message("fencegate/gw/status", b"online", True)
        start = time.monotonic()
        with self.assertRaises(UnknownActuator) as cm:
            cl.scope("pmup", timeout=10)
        self.assertLess(time.monotonic() - start, 2)
        self.assertEqual(str(cm.exception), "no actuator 'pmup' on gateway 'gw'; its actuators are pump, valve")
        self.assertEqual((cm.exception.actuator, cm.exception.actuators), ("pmup", ["pump", "valve"]))
        cl._message("fencegate/gw/status", b"offline", False)
        with self.assertRaises(UnknownActuator) as cm:
            cl.scope("pmup", timeout=10)
        self.assertIn("its actuators are pump, valve (as it published them when it was last online: it is offline now)",
                      str(cm.exception))

    def test_timeout_says_the_gateway_is_offline(self) -> None:
        cl, conn = offline_client(resend=0.1)
        cl._message(cl.topics.status, b"offline", True)
        with self.assertRaises(Timeout) as cm:
            cl.send(Command("pump", 7, 1, "on", id="r-9"), timeout=0.5)
        self.assertGreaterEqual(len(conn.published), 2, "not resent while the gateway is offline")
        self.assertIn("no answer from the gateway gw within 0.5s to command r-9 (pump, token 7 seq 1): gateway gw is offline",
                      str(cm.exception))

    def test_states(self) -> None:
        cl: Client = self.cl
        t = threading.Timer(0.1, lambda: cl._message("fencegate/gw/fan/state",
                                                      b'{"actuator":"fan","scope":"climate","state":"on","fence":{"token":3,"seq":1}}', True))
        t.start()
        self.assertEqual(cl.scope("fan", timeout=2), "climate")
        self.assertEqual(cl.actuators(), ["fan"])
        with self.assertRaises(Exception) as cm:
            cl.scope("pmup", timeout=0.1)
        self.assertIn("no actuator 'pmup' on gateway 'gw'; its actuators are fan", str(cm.exception))


class TestCLI(unittest.TestCase):
    """python3 -m fencegate send --etcd, on a RecordingConnection and a lease the test plays."""

    def send(self, lost_at_grant: bool, *args: str) -> Tuple[int, str, RecordingConnection]:
        code, _, err, conn = self.run_send(lost_at_grant, *args)
        return code, err, conn

    def run_send(self, lost_at_grant: bool, *args: str, actuator: str = "pump") -> Tuple[int, str, str, RecordingConnection]:
        """main(send --etcd ...): its exit code, stdout, stderr and connection.
        self.acquired counts the leases it acquired."""
        conn = RecordingConnection()
        lease = Lease(Etcd("http://127.0.0.1:1"), "1", 10, "gw", "pump")
        lease.token = 7
        lease.release = lambda: None  # type: ignore[assignment]
        if lost_at_grant:
            lease._set_lost("expired while stopped")
        self.acquired = 0

        def acquire(*a: Any, **k: Any) -> Lease:
            self.acquired += 1
            return lease

        def connection(*a: Any) -> RecordingConnection:
            on_message, on_ready = a[4], a[5]

            def open_(timeout: float) -> None:  # the gateway's retained state and status come at once
                on_message("fencegate/gw/pump/state",
                           b'{"actuator":"pump","scope":"pump","state":"off","fence":{"token":3,"seq":0}}', True)
                on_message("fencegate/gw/status", b"online", True)
            conn.open = open_  # type: ignore[assignment]

            def gateway(topic: str, payload: bytes) -> None:
                # Lost at once, and the client reconnects: a resend would go out now.
                lease._set_lost("revoked")
                threading.Timer(0.05, on_ready).start()
            conn.gateway = gateway
            return conn

        out, err = io.StringIO(), io.StringIO()
        with mock.patch("fencegate.client.Connection", connection), mock.patch("fencegate.cli.acquire", acquire), \
                mock.patch("fencegate.cli.os.kill"), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["send", "--gateway", "gw", "--actuator", actuator, "--etcd", "http://127.0.0.1:1", "--timeout", "1",
                         *args, "on"])
        return code, out.getvalue(), err.getvalue(), conn

    def test_not_resent_after_the_lease_is_lost(self) -> None:
        code, err, conn = self.send(False)
        self.assertEqual(code, EXIT_TIMEOUT, err)
        self.assertEqual(len(conn.published), 1, "published again after the lease was lost")
        self.assertIn("the lease was lost meanwhile", err)

    def test_stop_after_grant_sends_without_the_lease(self) -> None:
        # The pause test: the gateway's fence, not the client, must refuse it.
        code, err, conn = self.send(True, "--stop-after-grant")
        self.assertEqual(code, EXIT_TIMEOUT, err)
        self.assertGreaterEqual(len(conn.published), 1, err)

    def test_lease_lost_before_the_send_sends_nothing(self) -> None:
        # Lost while stopped (--stop-under-lease), or before the send
        # without a stop: the event "lost", exit 8, nothing published.
        for args in (["--stop-under-lease"], []):
            with self.subTest(args=args):
                code, out, err, conn = self.run_send(True, *args)
                self.assertEqual(code, EXIT_LEASE_LOST, err)
                self.assertEqual(conn.published, [])
                self.assertEqual([json.loads(line) for line in out.splitlines()],
                                 [{"event": "granted", "token": "7", "scope": "pump"},
                                  {"event": "lost", "token": "7", "reason": "expired while stopped"}])
                self.assertIn("nothing was sent", err)

    def test_unknown_actuator_at_once(self) -> None:
        """The gateway's retained states name its actuators: a name among
        none of them is said at once (not after --timeout), with exit 4,
        before any lease is acquired."""
        start = time.monotonic()
        code, out, err, conn = self.run_send(False, "--timeout", "10", actuator="pmup")
        self.assertLess(time.monotonic() - start, 3, "waited for the timeout")
        self.assertEqual(code, EXIT_REJECTED, err)
        self.assertEqual(err, "fencegate send: no actuator 'pmup' on gateway 'gw'; its actuators are pump\n")
        self.assertEqual((out, self.acquired, conn.published), ("", 0, []))


class TestHeartbeat(unittest.TestCase):
    @staticmethod
    def beat(seq: Seq, fences: Dict[int, Dict[str, int]], errors: Optional[List[BaseException]] = None) -> Tuple[Heartbeat, List[Dict[str, Any]]]:
        """Heartbeats of lease token 9 against a gateway that answers the
        n-th command (from 1) stale at fences[n], applied if absent, and
        stale at fence 10/0 from the 4th on; returns once they stopped."""
        cl, lease, sent = scripted_gateway(
            lambda n, _: fences.get(n, {"token": 10, "seq": 0} if n >= 4 else None))
        hb = Heartbeat(cl, lease, "pump", seq, every=0.05, holder="h",
                       on_error=errors.append if errors is not None else None).start()
        hb._thread.join(5)
        hb.stop()
        return hb, sent

    def test_fence_only_until_stale(self) -> None:
        seq = Seq()
        self.assertEqual(seq.next(), 1)  # a command of the holder's own, between heartbeats
        errors: List[BaseException] = []
        hb, sent = self.beat(seq, {}, errors)  # someone newer raises the fence at the 4th
        self.assertIsInstance(hb.error, StaleError)
        self.assertEqual(errors, [hb.error])
        self.assertEqual([c["seq"] for c in sent], [2, 3, 4, 5])
        self.assertTrue(all("state" not in c and c["token"] == 9 and c["holder"] == "h" for c in sent), sent)
        self.assertEqual(seq.last, 5)

    def test_overtaken_by_own_command(self) -> None:
        # The holder's own command with seq 7 arrived before the first heartbeat.
        hb, sent = self.beat(Seq(), {1: {"token": 9, "seq": 7}})
        self.assertIsInstance(hb.error, StaleError)
        self.assertEqual(hb.error.fence.token, 10)
        self.assertEqual([c["seq"] for c in sent], [1, 8, 9, 10])


if __name__ == "__main__":
    unittest.main()
