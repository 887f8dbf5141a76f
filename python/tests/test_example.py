"""examples/python/controller.py's send, without a broker: the test plays the gateway."""

from __future__ import annotations

import importlib.util
import sys
import unittest
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fakes.py

from fencegate import Command, Seq  # noqa: E402
from fakes import scripted_gateway  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "example_controller", Path(__file__).resolve().parents[2] / "examples" / "python" / "controller.py")
assert _spec is not None and _spec.loader is not None
controller = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(controller)


class TestSend(unittest.TestCase):
    def overtaken(self, state: str) -> List[Dict[str, Any]]:
        """controller.send of a set-point (or a fence-only command, state "") under token 9 against a gateway whose fence a
        heartbeat of the holder's own raised to 9/5 just before c came: it
        answers the first command stale at 9/5, then applies what is above.
        Returns the commands published."""
        cl, lease, sent = scripted_gateway(
            lambda n, d: {"token": 9, "seq": 5} if n == 1 or d.get("seq", 0) <= 5 else None)
        seq = Seq()
        with self.assertLogs("controller", "WARNING") as logs:
            controller.send(cl, lease, seq, Command("pump", 9, seq.next() if state else 0, state, holder="h"))
        self.assertIn("stale under our own token (fence 9/5)", logs.output[0])
        return sent

    def test_set_point_overtaken_by_own_heartbeat_is_applied(self) -> None:
        sent = self.overtaken("on")
        self.assertEqual([(c["seq"], c.get("state"), c["id"]) for c in sent], [(1, "on", "h-9-1"), (6, "on", "h-9-6")])

    def test_fence_only_overtaken_is_done(self) -> None:
        sent = self.overtaken("")
        self.assertEqual([(c.get("seq", 0), c.get("state")) for c in sent], [(0, None)])


if __name__ == "__main__":
    unittest.main()
