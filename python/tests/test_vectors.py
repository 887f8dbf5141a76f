"""The conformance vectors (conformance/*.json at the repository's root):
encodings, canonical bytes and signatures byte for byte, commands refused
before sending, and what each answer means."""

from __future__ import annotations

import base64
import json
import sys
import unittest
from decimal import Decimal
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from
sys.path.insert(0, str(Path(__file__).resolve().parent))  # fakes.py

from fencegate.client import Client, prepare
from fencegate.errors import FailedError, OutputError, RejectedError, StaleError
from fencegate.signing import Signer
from fencegate.wire import (Command, InvalidCommand, InvalidTopic, Topics, action, answers, canonical, encode_request,
                            format_duty, parse_answer, parse_duty, parse_state)
from fakes import offline_client

CONFORMANCE = Path(__file__).resolve().parents[2] / "conformance"


def load(name: str) -> Dict[str, Any]:
    with open(CONFORMANCE / name, encoding="utf-8") as f:
        d: Dict[str, Any] = json.load(f)
    return d


def given(g: Dict[str, str]) -> List[Any]:
    """A duty_given as a Python program could hand it over: a str, a bool,
    or a number, as a float and as a Decimal."""
    if g["type"] == "string":
        return [g["value"]]
    if g["type"] == "bool":
        return [g["value"] == "true"]
    return [float(g["value"]), Decimal(g["value"])]


def command_of(d: Dict[str, Any], duty_form: int = 0) -> Command:
    """A vector's command: token, seq and pulse_ms are decimal strings there,
    and duty the number the payload writes (a Decimal here), or as given
    (duty_given; duty_form picks which of its Python forms)."""
    duty: Any = Decimal(d["duty"]) if "duty" in d else None
    if "duty_given" in d:
        forms = given(d["duty_given"])
        duty = forms[min(duty_form, len(forms) - 1)]
    return Command(actuator=d.get("actuator", ""), token=int(d.get("token", "0")), seq=int(d.get("seq", "0")),
                   state=d.get("state", ""), pulse_ms=int(d.get("pulse_ms", "0")), reset=bool(d.get("reset", False)),
                   id=d.get("id", ""), holder=d.get("holder", ""), duty=duty,
                   frequency=int(d.get("frequency", "0")))


@unittest.skipUnless((CONFORMANCE / "commands.json").exists(), "no conformance/commands.json (not in the repository)")
class TestCommands(unittest.TestCase):
    def test_cases(self) -> None:
        cases = load("commands.json")["cases"]
        self.assertGreater(len(cases), 0)
        for v in cases:
            with self.subTest(v["name"]):
                c = command_of(v["command"])
                signer = None
                if "signing" in v:
                    s = v["signing"]
                    signer = Signer.from_seed(s["signer"], bytes.fromhex(s["seed"]))
                    self.assertEqual(signer.public_key(), s["public_key"])
                topics = Topics(v["gateway"], v["prefix"])
                self.assertEqual(topics.set(c.actuator), v["topic"])
                self.assertEqual(canonical(v["gateway"], c).hex(), v["canonical"])
                if signer is not None:
                    self.assertEqual(base64.b64encode(signer.sign(v["gateway"], c)).decode(), v["sig"])
                else:
                    self.assertEqual(v.get("sig", ""), "")
                # The payload exactly as the client publishes it.
                payload = prepare(v["gateway"], c, v.get("reply", ""), signer)
                self.assertEqual(payload, v["payload"].encode("utf-8"))
                if "duty_given" in v["command"]:
                    # Every Python form of the number given goes the same.
                    self.assertEqual(prepare(v["gateway"], command_of(v["command"], 1), v.get("reply", ""), signer), payload)

    def test_refused(self) -> None:
        refused = load("commands.json")["refused"]
        self.assertGreater(len(refused), 0)
        for v in refused:
            for form in (0, 1):
                with self.subTest(v["name"], form=form):
                    c = command_of(v["command"], form)
                    with self.assertRaises(InvalidCommand) as cm:
                        prepare("gw", c, "fencegate/gw/reply/x")
                    self.assertEqual(cm.exception.why, v["why"], str(cm.exception))

    def test_refused_are_not_published(self) -> None:
        """Client.send checks before it publishes: a client whose connection
        would fail the test if it were used refuses every refused command."""
        cl, conn = offline_client()
        for v in load("commands.json")["refused"]:
            with self.subTest(v["name"]):
                with self.assertRaises(InvalidCommand):
                    cl.send(command_of(v["command"]), timeout=0.1)
        self.assertEqual(conn.published, [])


@unittest.skipUnless((CONFORMANCE / "commands.json").exists(), "no conformance/commands.json (not in the repository)")
class TestReplyTopics(unittest.TestCase):
    def test_reply_topics(self) -> None:
        cases = load("commands.json")["reply_topics"]
        self.assertGreater(len(cases), 0)
        for v in cases:
            with self.subTest(v["name"]):
                topics = Topics(v["gateway"], v["prefix"])

                def make() -> str:
                    if v.get("asked"):
                        topics.check_reply(v["asked"])
                        return str(v["asked"])
                    return topics.reply(v["client_id"], v.get("username", ""))

                if v.get("refused"):
                    with self.assertRaises(InvalidTopic) as cm:
                        make()
                    self.assertEqual(cm.exception.why, v["why"], str(cm.exception))
                    self.assertTrue(str(cm.exception).isprintable(), repr(str(cm.exception)))
                else:
                    self.assertEqual(make(), v["reply"])

    def test_long_user_name_is_blamed(self) -> None:
        """A reply topic too long: the level that makes it so is named, the
        user name when it is the longer, not the client id."""
        t = Topics("gw")
        for client_id, username, why in [("ctl-1", "u" * 300, "username"), ("c" * 300, "ops", "client_id"),
                                         ("c" * 240, "", "client_id")]:
            with self.subTest(why=why, username=len(username)):
                with self.assertRaises(InvalidTopic) as cm:
                    t.reply(client_id, username)
                self.assertEqual(cm.exception.why, why, str(cm.exception))
                what = "user name" if why == "username" else "client id"
                self.assertTrue(str(cm.exception).startswith(f"{what} "), str(cm.exception))
                self.assertIn(f"want a {what} of at most", str(cm.exception))
        with self.assertRaises(InvalidTopic) as cm:
            Client("tcp://127.0.0.1:1", "gw", username="u" * 300, password="p", connect_timeout=0.1)
        self.assertEqual(cm.exception.why, "username")

    def test_client_refuses_before_connecting(self) -> None:
        """Client() checks the reply topic before it makes a connection:
        the broker's address is one nothing listens on, and the error is
        the topic's, not the broker's."""
        for v in load("commands.json")["reply_topics"]:
            if not v.get("refused"):
                continue
            with self.subTest(v["name"]):
                with self.assertRaises(InvalidTopic) as cm:
                    Client("tcp://127.0.0.1:1", v["gateway"], prefix=v["prefix"], client_id=v["client_id"],
                           username=v.get("username") or None, password="p" if v.get("username") else None,
                           reply=v.get("asked") or None, connect_timeout=0.1)
                self.assertEqual(cm.exception.why, v["why"])


@unittest.skipUnless((CONFORMANCE / "answers.json").exists(), "no conformance/answers.json (not in the repository)")
class TestAnswers(unittest.TestCase):
    def test_cases(self) -> None:
        cases = load("answers.json")["cases"]
        self.assertGreater(len(cases), 0)
        for v in cases:
            with self.subTest(v["name"]):
                c = command_of(v["command"])
                a = parse_answer(v["answer"].encode("utf-8"))
                self.assertEqual(answers(c, a), v["matches"])
                self.assertEqual(a.outcome, v["outcome"])
                self.assertEqual(a.reason, v.get("reason", ""))
                self.assertEqual({"token": str(a.fence.token), "seq": str(a.fence.seq)}, v["fence"])
                self.assertEqual(a.state, v.get("state", ""))
                self.assertEqual(format_duty(a.duty) if a.duty is not None else "", v.get("duty", ""))
                self.assertEqual(action(c, a), v["action"])
                if v["matches"]:
                    self.assertEqual(_client_action(c, a), v["action"])


def _client_action(c: Command, a: Any) -> str:
    """What Client.send does with an answer that matches, in the suite's words."""
    try:
        Client.outcome(c, a)
    except OutputError as e:
        assert e.answer is a
        return "reread"
    except StaleError as e:
        assert e.answer is a and e.fence == a.fence
        return "reacquire"
    except RejectedError as e:
        assert e.answer is a and e.reason == a.reason
        return "report"
    except FailedError as e:
        assert e.answer is a
        return "retry-later"
    return "done"


class TestWire(unittest.TestCase):
    """What the vectors do not spell out."""

    def test_escapes_as_go(self) -> None:
        c = Command("pump", 1, id="\u2028<&>\x7f\u00e9\x00", holder='"\\')
        self.assertEqual(encode_request(c), '{"id":"\u2028<&>\x7f\u00e9\\u0000","token":1,"holder":"\\"\\\\"}'.encode())

    def test_big_numbers_exact(self) -> None:
        a = parse_answer(b'{"id":"x","actuator":"pump","outcome":"applied","token":9223372036854775807,'
                         b'"seq":9223372036854775806,"fence":{"token":9223372036854775807,"seq":9223372036854775806},"state":"on"}')
        self.assertEqual(a.fence.token, 2**63 - 1)
        self.assertEqual(a.fence.seq, 2**63 - 2)

    def test_state(self) -> None:
        s = parse_state(b'{"actuator":"fan","scope":"climate","state":"off","fence":{"token":10,"seq":0},'
                        b'"holder":"boot","changed_at":null}')
        self.assertEqual((s.actuator, s.scope, s.state, s.fence.pair(), s.holder, s.changed_at),
                         ("fan", "climate", "off", (10, 0), "boot", None))

    def test_refuses_more(self) -> None:
        for c, why in [(Command("pump", True), "token"), (Command("pump", 1, -1), "seq"),
                       (Command("pump", 1, holder="\udcff"), "holder"), (Command("pump", 1, state="none"), "state"),
                       (Command("a" * 65, 1), "actuator"), (Command("pump", 1, pulse_ms=-5), "pulse_ms")]:
            with self.subTest(c=c):
                with self.assertRaises(InvalidCommand) as cm:
                    prepare("gw", c)
                self.assertEqual(cm.exception.why, why)

    def test_reply_topic(self) -> None:
        t = Topics("greenhouse-1")
        self.assertEqual(t.reply("c1", "ctl"), "fencegate/greenhouse-1/reply/ctl/c1")
        with self.assertRaises(ValueError):
            t.reply("a/b")

    def test_duty_numbers(self) -> None:
        """A duty is a number, as the gateway takes it: an int, a float or a
        Decimal; -0 is 0; a string, a bool or NaN is refused."""
        for d, want in [(42, b'"duty":42'), (42.5, b'"duty":42.5'), (Decimal("42.50"), b'"duty":42.5'), (-0.0, b'"duty":0'),
                        (Decimal("-0"), b'"duty":0'), (0.01, b'"duty":0.01'), (100, b'"duty":100'), (1e1, b'"duty":10')]:
            with self.subTest(d=d):
                self.assertIn(want, prepare("gw", Command("fan", 1, duty=d)))
        for bad in ["42", "4_2", "", True, False, float("nan"), float("-inf"), Decimal("sNaN"), 0.1 + 0.2, -0.01, None and 1, [42]]:
            if bad is None:
                continue
            with self.subTest(d=bad):
                with self.assertRaises(InvalidCommand) as cm:
                    prepare("gw", Command("fan", 1, duty=bad))
                self.assertEqual(cm.exception.why, "duty")

    def test_parse_duty(self) -> None:
        """gateway send --duty's text, read as Go's fence.ParseDuty reads it."""
        for text, want in [("42", Decimal(42)), ("42.5", Decimal("42.5")), ("0.01", Decimal("0.01")), ("100.00", Decimal(100))]:
            self.assertEqual(parse_duty(text), want)
        for text in ["4_2", " 42 ", "-0", "+1", "1e1", "042", "42.", ".5", "100.01", "0.001", "NaN", "Infinity", "٤٢"]:
            with self.subTest(text=text):
                with self.assertRaises(InvalidCommand):
                    parse_duty(text)


if __name__ == "__main__":
    unittest.main()
