"""The lease's checks without etcd: etcd's answers are played by the test."""

from __future__ import annotations

import base64
import sys
import unittest
from pathlib import Path
from typing import Any, Dict, List, Optional

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from

from fencegate import AheadError, EtcdError, Lease, LeaseLost, acquire, check_fence  # noqa: E402
from fencegate.lease import Etcd  # noqa: E402


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


if __name__ == "__main__":
    unittest.main()
