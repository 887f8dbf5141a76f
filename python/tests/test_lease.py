"""The lease's checks without etcd: etcd's answers are played by the test."""

from __future__ import annotations

import base64
import sys
import threading
import time
import unittest
from pathlib import Path
from typing import Any, Callable, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from

from fencegate import AheadError, EtcdError, Lease, LeaseLost, acquire, check_fence  # noqa: E402
from fencegate.lease import Etcd, _now  # noqa: E402


class FakeEtcd(Etcd):
    """Answers each path with a canned answer, and records the calls."""

    def __init__(self, answers: Dict[str, Dict[str, Any]]) -> None:
        super().__init__("http://etcd.invalid:2379")
        self.answers = answers
        self.calls: List[str] = []

    def call(self, path: str, body: Dict[str, Any], timeout: Optional[float] = -1.0) -> Dict[str, Any]:
        self.calls.append(path)
        a = self.answers.get(path)
        if a is None:
            raise EtcdError(f"no answer for {path}")
        return a


KEY = b"/fencegate/locks/gw/pump/694d7c1a2b3c4d5e"


def etcd(revision: int, kv_lease: str = "7", create: int = 40) -> FakeEtcd:
    kv = {"key": base64.b64encode(KEY).decode(), "create_revision": str(create), "lease": kv_lease}
    return FakeEtcd({"kv/range": {"header": {"revision": str(revision)}, "kvs": [kv]},
                     "lease/grant": {"ID": "7", "TTL": "10"}, "lock/lock": {"key": base64.b64encode(KEY).decode()},
                     "lock/unlock": {}, "lease/revoke": {}, "lease/keepalive": {"result": {"ID": "7", "TTL": "10"}}})


class TestLease(unittest.TestCase):
    def test_token_is_create_revision(self) -> None:
        e = etcd(50)
        with acquire(e, "gw", "pump", ttl=30) as l:
            self.assertEqual((l.token, l.key, l.id), (40, KEY, "7"))
        self.assertEqual(e.calls[-2:], ["lock/unlock", "lease/revoke"])

    def test_read_back_another_lease(self) -> None:
        e = etcd(50, kv_lease="8")
        with self.assertRaises(LeaseLost) as cm:
            acquire(e, "gw", "pump", ttl=30)
        self.assertIn("lock obtained after the lease was lost", str(cm.exception))
        self.assertIn("lease/revoke", e.calls)

    def test_check_fence(self) -> None:
        check_fence(etcd(50), 50)
        with self.assertRaises(AheadError) as cm:
            check_fence(etcd(50), 51)
        self.assertIn("fence token 51 is above every revision this etcd has issued (its current revision is 50)", str(cm.exception))

    def test_lease_check_fence(self) -> None:
        e = etcd(45)
        l = Lease(e, "7", 10, "gw", "pump")
        l.token, l.key = 40, KEY
        l.check_fence(39)  # below our token: nothing to say
        with self.assertRaises(AheadError) as cm:
            l.check_fence(40)  # at our token while we hold the lock: nobody newer raised it
        self.assertIn("at or above the token 40 that this etcd has just granted", str(cm.exception))
        e.answers["kv/range"]["kvs"] = []  # the lock is gone: a newer holder may have raised it
        l.check_fence(41)

    def test_names(self) -> None:
        for gw, scope in [("", "pump"), ("gw", ""), ("g/w", "pump")]:
            with self.subTest(gw=gw, scope=scope), self.assertRaises(ValueError):
                acquire(etcd(1), gw, scope)


def timed_out(path: str) -> EtcdError:
    err = EtcdError(f"{path}: timed out")
    err.timed_out = True  # type: ignore[attr-defined]
    return err


class ScriptedEtcd(Etcd):
    """Plays etcd with a function per path: (body, timeout) -> answer, or
    raises. Records (path, body, the time it was called)."""

    def __init__(self, script: Dict[str, Callable[[Dict[str, Any], Optional[float]], Dict[str, Any]]]) -> None:
        super().__init__("http://etcd.invalid:2379")
        self.script = script
        self.calls: List[tuple[str, Dict[str, Any], float]] = []
        self.lock = threading.Lock()

    def call(self, path: str, body: Dict[str, Any], timeout: Optional[float] = -1.0) -> Dict[str, Any]:
        with self.lock:
            self.calls.append((path, body, _now()))
        f = self.script.get(path)
        if f is None:
            raise EtcdError(f"no answer for {path}")
        return f(body, self.timeout if timeout is not None and timeout < 0 else timeout)

    def times(self, path: str) -> List[float]:
        with self.lock:
            return [t for p, _, t in self.calls if p == path]


def blocks(body: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
    """A request nobody answers (a partition): it times out."""
    time.sleep(timeout if timeout is not None else 3600)
    raise timed_out("blocked")


def held_until(lease: Lease, within: float) -> float:
    """When ``lease.held`` turned False, polling; fails after ``within`` s."""
    end = time.monotonic() + within
    while time.monotonic() < end:
        if not lease.held:
            return _now()
        time.sleep(0.005)
    raise AssertionError(f"the lease was still held after {within}s")


class TestDeadline(unittest.TestCase):
    """The lease is held until the send time of the last keep-alive that etcd
    answered, plus the TTL: etcd may let it expire then."""

    def test_from_the_last_answered_keepalive_sent(self) -> None:
        answered: List[float] = []

        def keepalive(body: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
            if answered:
                return blocks(body, timeout)
            answered.append(_now())
            time.sleep(0.4)  # a slow answer: etcd renewed when the request came, not when we hear
            return {"result": {"ID": "7", "TTL": "1"}}

        for polled in (True, False):
            with self.subTest(polled=polled):
                answered.clear()
                e = ScriptedEtcd({"lease/keepalive": keepalive, "lease/revoke": lambda b, t: {}})
                l = Lease(e, "7", 1, "gw", "pump", granted_at=_now())
                l._thread.start()
                try:
                    if polled:
                        gone = held_until(l, 3)
                    else:
                        self.assertTrue(l.lost.wait(3), "lost not set")
                        gone = _now()
                    self.assertEqual(len(answered), 1)
                    # The deadline is that keep-alive's send time plus the
                    # TTL, exactly: the lease sent it before etcd saw it, and
                    # a TTL after its answer would be 0.4 s later. Read from
                    # the lease, so a busy machine cannot make this flaky.
                    self.assertLessEqual(l._deadline, answered[0] + 1)
                    self.assertGreater(l._deadline, answered[0] + 1 - 0.2)
                    # Not before that deadline, and near it (not a TTL after
                    # its answer, nor after a keep-alive failed); the margin
                    # is for a busy machine's scheduling only.
                    self.assertGreaterEqual(gone, l._deadline)
                    self.assertLess(gone, answered[0] + 1 + 0.3)
                    with self.assertRaises(LeaseLost):
                        l.check()
                    self.assertIn("no keep-alive", l.lost_reason)
                finally:
                    l.release()

    def test_from_the_grant_sent(self) -> None:
        granted = []

        def grant(body: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
            granted.append(_now())
            time.sleep(0.3)
            return {"ID": "7", "TTL": "1"}

        e = etcd(50)
        s = ScriptedEtcd({"lease/grant": grant, "lease/keepalive": blocks,
                          **{p: (lambda a: lambda b, t: a)(e.answers[p]) for p in ("lock/lock", "kv/range", "lock/unlock", "lease/revoke")}})
        with acquire(s, "gw", "pump", ttl=1) as l:
            self.assertTrue(l.held)
            # From the grant's send time (exact), not its answer (0.3 s later).
            self.assertLessEqual(l._deadline, granted[0] + 1)
            self.assertGreater(l._deadline, granted[0] + 1 - 0.2)
            gone = held_until(l, 3)
        self.assertGreaterEqual(gone, l._deadline)
        self.assertLess(gone, granted[0] + 1 + 0.25)  # a busy machine's scheduling only


class TestWaitingLeaseLost(unittest.TestCase):
    """A lease lost while it waits for the lock: acquire does not wait on for
    ever, but queues again under a new lease, or says why it cannot."""

    def script(self, keepalive: Callable[[Dict[str, Any], Optional[float]], Dict[str, Any]],
               grants: List[Dict[str, Any] | EtcdError], lock_at: int) -> ScriptedEtcd:
        """grants: the answers (or EtcdErrors) to each grant; the lock is
        granted to the lock_at-th lease (from 1), and never to the others."""
        e = etcd(50)
        leases: List[str] = []

        def grant(body: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
            a = grants[len(leases)]
            if isinstance(a, Exception):
                raise a
            leases.append(a["ID"])
            return a

        def lock(body: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
            if len(leases) == lock_at and body["lease"] == leases[-1]:
                return e.answers["lock/lock"]
            return blocks(body, timeout)

        def kv_range(body: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
            if body.get("count_only"):
                return {}  # the key of a lock request given up on: deleted
            a = dict(e.answers["kv/range"])
            a["kvs"] = [dict(a["kvs"][0], lease=leases[-1])]
            return a

        return ScriptedEtcd({"lease/grant": grant, "lease/keepalive": keepalive, "lock/lock": lock, "kv/range": kv_range,
                             "lock/unlock": lambda b, t: {}, "lease/revoke": lambda b, t: {}})

    def acquire(self, e: ScriptedEtcd, within: float) -> Dict[str, Any]:
        got: Dict[str, Any] = {"on_lost": []}

        def run() -> None:
            try:
                got["lease"] = acquire(e, "gw", "pump", ttl=1, on_lost=got["on_lost"].append)
            except BaseException as err:  # noqa: BLE001 - handed to the test
                got["error"] = err

        t = threading.Thread(target=run, daemon=True)
        t.start()
        t.join(within)
        self.assertFalse(t.is_alive(), f"acquire still waits after {within}s")
        return got

    def test_revoked_queues_again(self) -> None:
        def keepalive(body: Dict[str, Any], timeout: Optional[float]) -> Dict[str, Any]:
            return {"result": {"ID": body["ID"], "TTL": "0" if body["ID"] == "7" else "1"}}  # etcd revoked lease 7

        e = self.script(keepalive, [{"ID": "7", "TTL": "1"}, {"ID": "8", "TTL": "1"}], lock_at=2)
        got = self.acquire(e, 5)
        self.assertNotIn("error", got)
        l: Lease = got["lease"]
        try:
            self.assertEqual((l.id, l.token), ("8", 40))
            self.assertIn(("lease/revoke", {"ID": "7"}), [(p, b) for p, b, _ in e.calls])
            self.assertEqual(got["on_lost"], [], "on_lost called for a lease acquire did not return")
        finally:
            l.release()

    def test_partition_gives_up(self) -> None:
        # etcd answers nothing more after the grant: the waiting lease runs
        # out, and no new one can be granted.
        e = self.script(blocks, [{"ID": "7", "TTL": "1"}, timed_out("lease/grant")], lock_at=0)
        got = self.acquire(e, 10)
        self.assertIsInstance(got.get("error"), LeaseLost, got)
        self.assertIn("lost while waiting for the lock of /fencegate/locks/gw/pump", str(got["error"]))

    def test_wait_bounds_it(self) -> None:
        e = self.script(lambda b, t: {"result": {"ID": "7", "TTL": "1"}}, [{"ID": "7", "TTL": "1"}], lock_at=0)
        start = time.monotonic()
        with self.assertRaises(EtcdError) as cm:
            acquire(e, "gw", "pump", ttl=1, wait=2.5)
        self.assertLess(time.monotonic() - start, 3.5)
        self.assertIn("not granted within 2.5s", str(cm.exception))
        self.assertGreaterEqual(len(e.times("lock/lock")), 3, "the lock is asked again every TTL")


if __name__ == "__main__":
    unittest.main()
