"""Against real parts: a Mosquitto, an etcd and a gateway (sim board).

They are named by the environment, as the Go harness (conformance/) sets it:
FENCEGATE_TEST_BROKER, FENCEGATE_TEST_ETCD, FENCEGATE_TEST_GATEWAY (its
actuators pump, valve, fan and heater (scope climate), door (signed
commands only, controller ctl-a)) and FENCEGATE_TEST_KEY (ctl-a's private
key). Without FENCEGATE_TEST_BROKER these tests skip. Every id, holder and
client id has a random part, so that suites run side by side never cross.
"""

from __future__ import annotations

import base64
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path
from typing import Any, Dict, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from

from fencegate import (Answer, Client, Command, Etcd, Lease, LeaseLost, RejectedError, Signer, StaleError,  # noqa: E402
                       acquire, lock_name)
from fencegate.connection import Connection, Security  # noqa: E402
from fencegate.cli import EXIT_LEASE_LOST, EXIT_TIMEOUT  # noqa: E402

BROKER = os.environ.get("FENCEGATE_TEST_BROKER", "")
ETCD = os.environ.get("FENCEGATE_TEST_ETCD", "")
GATEWAY = os.environ.get("FENCEGATE_TEST_GATEWAY", "")
KEY = os.environ.get("FENCEGATE_TEST_KEY", "")
GATEWAY_BIN = os.environ.get("FENCEGATE_TEST_GATEWAY_BIN", "")
PYTHON_DIR = Path(__file__).resolve().parents[1]
RUN = secrets.token_hex(3)
#: How long a test waits for a lock: other suites may hold the scope for a while.
WAIT = 30.0


def holder(name: str) -> str:
    """A holder name unique to this run."""
    return f"py-{name}-{RUN}"


def b64(s: str) -> str:
    return base64.b64encode(s.encode()).decode()


class _Watcher:
    """Records what is published on some topics (e.g. a command topic)."""

    def __init__(self, topics: List[str]) -> None:
        self.messages: List[Tuple[str, bytes]] = []
        self._conn = Connection(BROKER, f"py-watch-{secrets.token_hex(4)}", Security(), topics,
                                lambda t, p, r: self.messages.append((t, p)), lambda: None, lambda: None)
        self._conn.open(10)

    def close(self) -> None:
        self._conn.close()


@unittest.skipUnless(BROKER and ETCD and GATEWAY, "set FENCEGATE_TEST_BROKER, FENCEGATE_TEST_ETCD and FENCEGATE_TEST_GATEWAY")
class TestGateway(unittest.TestCase):
    def client(self, **kw: object) -> Client:
        c = Client(BROKER, GATEWAY, client_id=f"py-test-{secrets.token_hex(4)}", **kw)  # type: ignore[arg-type]
        self.addCleanup(c.close)
        return c

    def test_outcomes(self) -> None:
        """applied, duplicate, stale (an older holder's token) and rejected."""
        c = self.client()
        scope = c.scope("pump")
        self.assertEqual(scope, "pump")
        me = holder("outcomes")
        with acquire(ETCD, GATEWAY, scope, ttl=5, wait=WAIT) as a:
            self.assertEqual(c.send(Command("pump", a.token, holder=me), lease=a).outcome, "applied")
            cmd = Command("pump", a.token, 1, "on", id=f"{me}-1", holder=me)
            first = c.send(cmd, lease=a)
            self.assertEqual((first.outcome, first.state, first.fence.pair()), ("applied", "on", (a.token, 1)))
            self.assertEqual(c.send(cmd, lease=a).outcome, "duplicate")
        with acquire(ETCD, GATEWAY, scope, ttl=5, wait=WAIT) as b:
            self.assertGreater(b.token, a.token)
            self.assertEqual(c.send(Command("pump", b.token, holder=me + "-b"), lease=b).outcome, "applied")
        with self.assertRaises(StaleError) as cm:
            c.send(Command("pump", a.token, 2, "off", holder=me))
        self.assertGreaterEqual(cm.exception.fence.token, b.token)
        self.assertIn(cm.exception.state, ("on", "off"))
        st = c.reread("pump", cm.exception.answer)
        self.assertGreaterEqual(st.fence.pair(), cm.exception.fence.pair())
        with self.assertRaises(RejectedError) as rj:
            c.send(Command("door", 1, state="on", holder=me))
        self.assertEqual(rj.exception.reason, "unsigned")

    @unittest.skipUnless(KEY, "set FENCEGATE_TEST_KEY (controller ctl-a's private key)")
    def test_signed(self) -> None:
        """Signed commands to door, which takes signed commands only."""
        c = self.client(signer=Signer("ctl-a", KEY))
        scope = c.scope("door")
        me = holder("signed")
        with acquire(ETCD, GATEWAY, scope, ttl=5, wait=WAIT) as l:
            self.assertEqual(c.send(Command("door", l.token, holder=me), lease=l).outcome, "applied")
            a = c.send(Command("door", l.token, 1, "on", holder=me), lease=l)
            self.assertEqual((a.outcome, a.state), ("applied", "on"))
        with self.assertRaises(RejectedError) as cm:  # a key that is not ctl-a's
            self.client(signer=Signer.from_seed("ctl-a", secrets.token_bytes(32))).send(
                Command("door", l.token, 2, "on", holder=me))
        self.assertEqual(cm.exception.reason, "bad-signature")

    def test_two_controllers_exclude_each_other(self) -> None:
        """The second waits until the first releases, then gets a higher token."""
        one, two = self.client(), self.client()
        scope = one.scope("valve")
        first = acquire(ETCD, GATEWAY, scope, ttl=5, wait=WAIT)
        self.addCleanup(first.release)
        self.assertEqual(one.send(Command("valve", first.token, holder=holder("one")), lease=first).outcome, "applied")
        got: List[Lease] = []
        granted: List[float] = []

        def second() -> None:
            got.append(acquire(ETCD, GATEWAY, two.scope("valve"), ttl=5, wait=WAIT))
            granted.append(time.monotonic())

        t = threading.Thread(target=second)
        t.start()
        time.sleep(1.5)
        self.assertEqual(got, [], "the second controller got the lock while the first held it")
        released = time.monotonic()
        first.release()
        t.join(WAIT + 5)
        self.assertEqual(len(got), 1, "the second controller did not get the lock after the first released it")
        l2 = got[0]
        self.addCleanup(l2.release)
        self.assertGreaterEqual(granted[0], released)
        self.assertGreater(l2.token, first.token)
        self.assertEqual(two.send(Command("valve", l2.token, holder=holder("two")), lease=l2).outcome, "applied")
        with self.assertRaises(StaleError):
            one.send(Command("valve", first.token, 1, "on", holder=holder("one")))
        l2.release()
        self.assertFalse(l2.held)

    @unittest.skipUnless(GATEWAY_BIN, "set FENCEGATE_TEST_GATEWAY_BIN (gateway send --etcd is the Go client)")
    def test_go_waits_for_python(self) -> None:
        """The lock is Go's lease package's: gateway send --etcd waits while a
        Python controller holds the scope, then gets a higher token."""
        c = self.client()
        scope = c.scope("valve")
        l = acquire(ETCD, GATEWAY, scope, ttl=5, wait=WAIT)
        self.addCleanup(l.release)
        go = subprocess.Popen([GATEWAY_BIN, "send", "--broker", BROKER, "--gateway", GATEWAY, "--etcd", ETCD,
                               "--actuator", "valve", "--holder", holder("go"), "--timeout", "30s", "fence"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(_kill, go)
        time.sleep(1.5)
        self.assertIsNone(go.poll(), "gateway send did not wait for the Python controller's lock")
        l.release()
        out, err = go.communicate(timeout=40)
        self.assertEqual(go.returncode, 0, err)
        answer = json.loads(out)
        self.assertEqual(answer["outcome"], "applied")
        self.assertGreater(answer["token"], l.token)

    def test_lost_lease_sends_nothing(self) -> None:
        """A lease revoked behind the client's back: send refuses, nothing is published."""
        c = self.client()
        scope = c.scope("fan")
        lost = threading.Event()
        l = acquire(ETCD, GATEWAY, scope, ttl=3, wait=WAIT, on_lost=lambda _: lost.set())
        self.addCleanup(l.release)
        watcher = _Watcher([c.topics.set("fan"), c.topics.set("heater")])
        self.addCleanup(watcher.close)
        Etcd(ETCD).call("lease/revoke", {"ID": l.id})
        self.assertTrue(l.lost.wait(5), "the lease's loss was not noticed within 5s (TTL 3s)")
        self.assertTrue(lost.is_set())
        me = holder("lost")
        with self.assertRaises(LeaseLost):
            c.send(Command("fan", l.token, 1, "on", holder=me), lease=l)
        time.sleep(0.3)
        self.assertEqual([m for m in watcher.messages if me.encode() in m[1]], [])

    def test_clean_close_leaves_no_lease(self) -> None:
        c = self.client()
        scope = c.scope("heater")
        etcd = Etcd(ETCD)
        with acquire(ETCD, GATEWAY, scope, ttl=10, wait=WAIT) as l:
            self.assertIn(l.id, self._leases(etcd))
            self.assertIn(l.key, self._lock_keys(etcd, scope))
        self.assertNotIn(l.id, self._leases(etcd))
        self.assertNotIn(l.key, self._lock_keys(etcd, scope))

    @staticmethod
    def _leases(etcd: Etcd) -> List[str]:
        return [str(x["ID"]) for x in etcd.call("lease/leases", {}).get("leases") or []]

    @staticmethod
    def _lock_keys(etcd: Etcd, scope: str) -> List[bytes]:
        prefix = (lock_name(GATEWAY, scope) + "/").encode()
        end = prefix[:-1] + bytes([prefix[-1] + 1])
        kvs = etcd.call("kv/range", {"key": base64.b64encode(prefix).decode(),
                                     "range_end": base64.b64encode(end).decode(), "keys_only": True}).get("kvs") or []
        return [base64.b64decode(kv["key"]) for kv in kvs]


@unittest.skipUnless(ETCD, "set FENCEGATE_TEST_ETCD")
class TestLeaseWaiting(unittest.TestCase):
    def test_waiting_lease_lost_queues_again(self) -> None:
        """The lease of a waiter's key is revoked (as etcd does when renewals
        cannot reach it for a TTL): acquire queues again behind a new key,
        and is granted once the holder lets go, above the holder's token."""
        gw, scope = f"py-gw-{RUN}", "requeue"
        etcd = Etcd(ETCD)
        prefix = (lock_name(gw, scope) + "/").encode()

        def keys() -> List[Dict[str, Any]]:
            end = prefix[:-1] + bytes([prefix[-1] + 1])
            return etcd.call("kv/range", {"key": base64.b64encode(prefix).decode(),
                                          "range_end": base64.b64encode(end).decode()}).get("kvs") or []

        def wait_keys(n: int, within: float) -> List[Dict[str, Any]]:
            end = time.monotonic() + within
            while len(ks := keys()) < n:
                self.assertLess(time.monotonic(), end, f"fewer than {n} lock keys after {within}s: {ks}")
                time.sleep(0.02)
            return ks

        a = acquire(etcd, gw, scope, ttl=3, wait=WAIT)
        self.addCleanup(a.release)
        got: List[Any] = []
        t = threading.Thread(target=lambda: got.append(_try(lambda: acquire(etcd, gw, scope, ttl=3, wait=WAIT))))
        t.start()
        waiting = [kv for kv in wait_keys(2, 10) if base64.b64decode(kv["key"]) != a.key]
        etcd.call("lease/revoke", {"ID": waiting[0]["lease"]})
        self.assertEqual(len(keys()), 1)
        requeued = [kv for kv in wait_keys(2, 3 + 3) if base64.b64decode(kv["key"]) != a.key]
        self.assertNotEqual(requeued[0]["lease"], waiting[0]["lease"])
        self.assertEqual(got, [], "the waiter returned while the holder holds")
        a.release()
        t.join(10)
        self.assertEqual(len(got), 1, "the waiter was not granted after the holder let go")
        self.assertIsInstance(got[0], Lease, got)
        self.addCleanup(got[0].release)
        self.assertGreater(got[0].token, a.token)
        self.assertEqual(got[0].id, requeued[0]["lease"])


def _try(f: Any) -> Any:
    """f(), or the exception it raised."""
    try:
        return f()
    except Exception as e:  # noqa: BLE001 - handed to the test
        return e


class _OwnGateway(unittest.TestCase):
    """Tests with a gateway of their own (actuator pump), to stop and start."""

    def start(self, config: Path, *flags: str) -> "subprocess.Popen[bytes]":
        p = subprocess.Popen([GATEWAY_BIN, "run", "--config", str(config), *flags], stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
        self.addCleanup(_kill, p)
        return p

    def config(self, d: str, gw_id: str) -> Path:
        """The configuration of gateway gw_id, its store in d."""
        config = Path(d, "gateway.yaml")
        config.write_text(f"id: {gw_id}\nmqtt:\n  broker: {BROKER}\nstore: {d}/fence.db\nboard: sim\nhttp: \"\"\n"
                          "actuators:\n  - {name: pump, pin: GPIO17}\n")
        return config


@unittest.skipUnless(BROKER and GATEWAY_BIN, "set FENCEGATE_TEST_BROKER and FENCEGATE_TEST_GATEWAY_BIN")
class TestGatewayRestart(_OwnGateway):
    """A gateway of this test's own, stopped and started again."""

    def test_command_sent_while_the_gateway_is_down(self) -> None:
        """Sent while the gateway is stopped, a command is answered once it is back."""
        with tempfile.TemporaryDirectory() as d:
            gw_id = f"py-gw-{RUN}"
            config = self.config(d, gw_id)
            gw = self.start(config, "--init")
            with Client(BROKER, gw_id) as c:
                c.wait_status("online", 20)
                gw.terminate()
                gw.wait(20)
                c.wait_status("offline", 10)
                got: List[Answer] = []
                t = threading.Thread(target=lambda: got.append(c.send(Command("pump", 1, 1, "on", holder=holder("restart")),
                                                                      timeout=30)))
                t.start()
                time.sleep(1.5)
                self.assertEqual(got, [])
                gw = self.start(config)
                t.join(35)
                self.assertEqual([a.outcome for a in got], ["applied"])
                gw.terminate()
                gw.wait(20)


@unittest.skipUnless(BROKER and ETCD and GATEWAY, "set FENCEGATE_TEST_BROKER, FENCEGATE_TEST_ETCD and FENCEGATE_TEST_GATEWAY")
class TestExample(unittest.TestCase):
    def test_runs_and_releases_on_sigint(self) -> None:
        """examples/python/controller.py switches the fan, and lets go of its lease at Ctrl-C."""
        p = subprocess.Popen([sys.executable, str(PYTHON_DIR.parent / "examples" / "python" / "controller.py"),
                              "--etcd", ETCD, "--broker", BROKER, "--gateway", GATEWAY, "--actuator", "fan",
                              "--period", "0.2", "--ttl", "10", "--name", holder("example")],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.addCleanup(_kill, p)
        assert p.stdout is not None
        lines: List[str] = []
        deadline = time.monotonic() + WAIT
        while sum("applied: " in line for line in lines) < 3 and time.monotonic() < deadline:
            line = p.stdout.readline()
            if not line:
                break
            lines.append(line)
        p.send_signal(signal.SIGINT)
        rest, _ = p.communicate(timeout=20)
        lines += rest.splitlines()
        self.assertEqual(p.returncode, 0, "".join(lines))
        granted = [line for line in lines if "granted token" in line]
        self.assertTrue(granted, lines)
        self.assertIn("applied: fence", "".join(lines))
        self.assertIn("stopped", lines[-1])
        token = int(granted[-1].rsplit(" ", 1)[1])
        etcd = Etcd(ETCD)
        prefix = (lock_name(GATEWAY, "climate") + "/").encode()
        end = prefix[:-1] + bytes([prefix[-1] + 1])
        kvs = etcd.call("kv/range", {"key": base64.b64encode(prefix).decode(),
                                     "range_end": base64.b64encode(end).decode()}).get("kvs") or []
        self.assertNotIn(token, [int(kv["create_revision"]) for kv in kvs], "the example left its lock behind")


def _driver(*args: str, gateway: str = "", token: str = "") -> "subprocess.Popen[str]":
    """python3 -m fencegate send to GATEWAY (or gateway), under a lease from ETCD (or under token)."""
    under = ["--token", token] if token else ["--etcd", ETCD]
    return subprocess.Popen([sys.executable, "-m", "fencegate", "send", "--broker", BROKER, "--gateway", gateway or GATEWAY,
                             *under, *args], cwd=PYTHON_DIR, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _events(out: str) -> List[Dict[str, object]]:
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def _kill(p: "subprocess.Popen[Any]") -> None:
    if p.poll() is None:
        p.kill()
        p.communicate()


def _stopped(pid: int) -> bool:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0] == "T"


@unittest.skipUnless(BROKER and ETCD and GATEWAY, "set FENCEGATE_TEST_BROKER, FENCEGATE_TEST_ETCD and FENCEGATE_TEST_GATEWAY")
class TestDriver(unittest.TestCase):
    """python3 -m fencegate send, as the conformance harness runs it."""

    def test_applied(self) -> None:
        me = holder("driver")
        p = _driver("--actuator", "heater", "--holder", me, "--id", f"{me}-1", "--ttl", "5", "--timeout", "30", "on")
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 0, err)
        ev = _events(out)
        self.assertEqual([e["event"] for e in ev], ["granted", "answer"])
        self.assertEqual(ev[0]["scope"], "climate")
        self.assertEqual(ev[1]["outcome"], "applied")
        self.assertEqual(ev[1]["fence"], {"token": ev[0]["token"], "seq": "0"})
        self.assertEqual(ev[1]["state"], "on")

    @unittest.skipUnless(Path("/proc/self/stat").exists(), "needs /proc to see the process stopped")
    def test_paused_after_grant_is_stale(self) -> None:
        """Stopped after its grant until its lease expired and another holder
        raised the fence, the driver's command is stale; it rereads."""
        me = holder("pause")
        p = _driver("--actuator", "pump", "--holder", me, "--id", f"{me}-1", "--ttl", "2", "--timeout", "30",
                    "--stop-after-grant", "on")
        self.addCleanup(_kill, p)
        deadline = time.monotonic() + 20
        while not _stopped(p.pid):
            self.assertIsNone(p.poll(), "the driver ended before it stopped itself")
            self.assertLess(time.monotonic(), deadline, "the driver did not stop itself after the grant")
            time.sleep(0.05)
        with Client(BROKER, GATEWAY) as c, acquire(ETCD, GATEWAY, "pump", ttl=5, wait=WAIT) as l:  # after its lease expired
            c.send(Command("pump", l.token, holder=holder("newer")), lease=l)
            newer = l.token
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, 3, err)
        ev = _events(out)
        self.assertEqual([e["event"] for e in ev], ["granted", "answer", "reread"])
        self.assertLess(int(ev[0]["token"]), newer)  # type: ignore[call-overload]
        self.assertEqual(ev[1]["outcome"], "stale")
        self.assertGreaterEqual(int(ev[1]["fence"]["token"]), newer)  # type: ignore[index]
        self.assertGreaterEqual(int(ev[2]["fence"]["token"]), newer)  # type: ignore[index]
        self.assertIn(ev[2]["state"], ("on", "off"))

    def wait_stopped(self, p: "subprocess.Popen[str]") -> None:
        deadline = time.monotonic() + 20
        while not _stopped(p.pid):
            self.assertIsNone(p.poll(), "the driver ended before it stopped itself")
            self.assertLess(time.monotonic(), deadline, "the driver did not stop itself after the grant")
            time.sleep(0.05)

    @unittest.skipUnless(Path("/proc/self/stat").exists(), "needs /proc to see the process stopped")
    def test_paused_under_lease_sends_nothing(self) -> None:
        """--stop-under-lease: stopped after its grant (TTL 2 s) while another
        holder takes the scope, the driver sends under its lease's guard when
        continued: the lease is lost, so it publishes nothing, says "lost"
        and exits 6."""
        me = holder("under-lease")
        watcher = _Watcher([f"fencegate/{GATEWAY}/valve/set"])
        self.addCleanup(watcher.close)
        p = _driver("--actuator", "valve", "--holder", me, "--id", f"{me}-1", "--ttl", "2", "--timeout", "30",
                    "--stop-under-lease", "on")
        self.addCleanup(_kill, p)
        self.wait_stopped(p)
        with Client(BROKER, GATEWAY) as c, acquire(ETCD, GATEWAY, "valve", ttl=5, wait=WAIT) as l:  # after its lease expired
            c.send(Command("valve", l.token, holder=holder("newer")), lease=l)
        os.kill(p.pid, signal.SIGCONT)
        out, err = p.communicate(timeout=30)
        self.assertEqual(p.returncode, EXIT_LEASE_LOST, err)
        ev = _events(out)
        self.assertEqual([e["event"] for e in ev], ["granted", "lost"], out)
        self.assertEqual(ev[1]["token"], ev[0]["token"])
        self.assertIn("etcd", str(ev[1]["reason"]))  # why: no keep-alive answered within the TTL, or the lease is gone
        self.assertIn("nothing was sent", err)
        time.sleep(0.5)
        self.assertEqual([m for m in watcher.messages if me.encode() in m[1]], [], "published under the lost lease")

    def test_unknown_actuator_at_once(self) -> None:
        """The gateway's retained states name its actuators: a name none of
        them has is said at once, exit 4, not after --timeout 30 s."""
        start = time.monotonic()
        p = _driver("--actuator", "pmup", "--holder", holder("pmup"), "--timeout", "30", "on")
        out, err = p.communicate(timeout=60)
        self.assertLess(time.monotonic() - start, 10, "waited for --timeout")
        self.assertEqual(p.returncode, 4, err)
        self.assertEqual(out, "")
        self.assertEqual(err, f"fencegate send: no actuator 'pmup' on gateway '{GATEWAY}'; its actuators are "
                              "door, fan, heater, pump, valve\n")


@unittest.skipUnless(BROKER and ETCD and GATEWAY_BIN, "set FENCEGATE_TEST_BROKER, FENCEGATE_TEST_ETCD and FENCEGATE_TEST_GATEWAY_BIN")
class TestDriverOwnGateway(_OwnGateway):
    """python3 -m fencegate send against a gateway of the test's own."""

    def test_fence_above_every_revision(self) -> None:
        """A fence no holder of this etcd raised (a token typed by hand,
        above every revision): stale, exit 3, the "above every revision"
        error, and no second lease."""
        with tempfile.TemporaryDirectory() as d:
            gw_id = f"py-ahead-{RUN}"
            self.start(self.config(d, gw_id), "--init")
            ahead = 1 << 62
            with Client(BROKER, gw_id) as c:
                c.wait_status("online", 20)
                self.assertEqual(c.send(Command("pump", ahead, holder=holder("by-hand"))).outcome, "applied")
            p = _driver("--actuator", "pump", "--holder", holder("ahead"), "--ttl", "5", "--timeout", "30", "on",
                        gateway=gw_id)
            out, err = p.communicate(timeout=60)
            self.assertEqual(p.returncode, 3, err)
            ev = _events(out)
            self.assertEqual([e["event"] for e in ev], ["granted", "answer", "reread"], out)
            self.assertEqual((ev[1]["outcome"], ev[1]["fence"]), ("stale", {"token": str(ahead), "seq": "0"}))
            self.assertIn(f"the gateway's fence token {ahead} is above every revision this etcd has issued", err)
            self.assertIn("retrying will not help", err)
            prefix = (lock_name(gw_id, "pump") + "/").encode()
            end = prefix[:-1] + bytes([prefix[-1] + 1])
            kvs = Etcd(ETCD).call("kv/range", {"key": base64.b64encode(prefix).decode(),
                                               "range_end": base64.b64encode(end).decode()}).get("kvs") or []
            self.assertEqual(kvs, [], "a lock left behind (acquired again?)")

    def test_gateway_offline(self) -> None:
        """To a gateway that is offline (stopped cleanly): resent until
        --timeout, then exit 6 (no answer) with a message that says it is offline."""
        with tempfile.TemporaryDirectory() as d:
            gw_id = f"py-offline-{RUN}"
            gw = self.start(self.config(d, gw_id), "--init")
            with Client(BROKER, gw_id) as c:
                c.wait_status("online", 20)
                gw.terminate()
                gw.wait(20)
                c.wait_status("offline", 10)
            me = holder("offline")
            watcher = _Watcher([f"fencegate/{gw_id}/pump/set"])
            self.addCleanup(watcher.close)
            p = _driver("--actuator", "pump", "--holder", me, "--timeout", "2.5", "on", gateway=gw_id, token="5")
            out, err = p.communicate(timeout=30)
            self.assertEqual(p.returncode, EXIT_TIMEOUT, err)
            self.assertEqual(out, "")
            self.assertIn(f"within 2.5s to command", err)
            self.assertIn(f"gateway {gw_id} is offline", err)
            self.assertGreaterEqual(len([m for m in watcher.messages if me.encode() in m[1]]), 2, "not resent (at 0 and 1 s)")


if __name__ == "__main__":
    unittest.main()
