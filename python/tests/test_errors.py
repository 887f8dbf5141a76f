"""Faults said in one sentence, never a traceback: nothing listens at the
broker's or etcd's address; bad usage of the CLI. No infrastructure needed
(port 1 on 127.0.0.1 is assumed closed)."""

from __future__ import annotations

import contextlib
import io
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path
from typing import Callable, List, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from

from fencegate import BrokerError, Client, EtcdError, KeyFileError, Signer, acquire  # noqa: E402
from fencegate.cli import EXIT_OTHER, EXIT_USAGE, main  # noqa: E402
from fencegate.connection import Security  # noqa: E402
from fencegate.errors import redact_url  # noqa: E402

PYTHON_DIR = Path(__file__).resolve().parents[1]


def cli(*args: str) -> "subprocess.CompletedProcess[str]":
    return subprocess.run([sys.executable, "-m", "fencegate", *args], cwd=PYTHON_DIR, capture_output=True,
                          text=True, timeout=60)


class TestUnreachable(unittest.TestCase):
    def test_broker(self) -> None:
        with self.assertRaises(BrokerError) as cm:
            Client("tcp://127.0.0.1:1", "gw")
        self.assertEqual(str(cm.exception), "connect tcp://127.0.0.1:1: connection refused: nothing listens at "
                                            "127.0.0.1:1 (is the broker running? is the port right?)")

    def test_broker_url(self) -> None:
        for url in ["127.0.0.1:1883", "http://127.0.0.1:1883", "tcp://127.0.0.1:99999"]:
            with self.subTest(url=url), self.assertRaises(BrokerError) as cm:
                Client(url, "gw")
            self.assertIn("broker URL", str(cm.exception))

    def test_etcd(self) -> None:
        with self.assertRaises(EtcdError) as cm:
            acquire("http://127.0.0.1:1", "gw", "pump")
        self.assertEqual(str(cm.exception), "etcd http://127.0.0.1:1: connection refused: nothing listens at "
                                            "127.0.0.1:1 (is etcd running? is the URL right?)")

    def test_cli(self) -> None:
        for args, want in [(["--broker", "tcp://127.0.0.1:1", "--token", "1"], "connection refused: nothing listens at 127.0.0.1:1"),
                           (["--broker", "tcp://127.0.0.1:1", "--etcd", "http://127.0.0.1:1"], "connection refused")]:
            with self.subTest(args=args):
                r = cli("send", "--gateway", "gw", "--actuator", "pump", *args, "on")
                self.assertEqual(r.returncode, EXIT_OTHER, r.stderr)
                self.assertIn(want, r.stderr)
                self.assertNotIn("Traceback", r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1, r.stderr)
                self.assertEqual(r.stdout, "")


def run_main(*args: str) -> Tuple[int, str, str]:
    """cli.main in this process (quicker than a python3 each): exit code, stdout, stderr."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(args))
        except SystemExit as e:  # argparse's --help and usage errors
            code = int(e.code or 0)
    return code, out.getvalue(), err.getvalue()


class TestSecrets(unittest.TestCase):
    """A password in a URL or a Security never shows in a message or a repr."""

    def test_redact_url(self) -> None:
        for url, want in [("http://root:s3cret@127.0.0.1:2379", "http://127.0.0.1:2379"),
                          ("tcp://u:s3cret@[::1]:1883/x?password=s3cret", "tcp://[::1]:1883"),
                          ("http://a:1,https://root:s3cret@b:2", "http://a:1,https://b:2"),
                          ("root:s3cret@127.0.0.1:1", "127.0.0.1:1"), ("tcp://host:1883", "tcp://host:1883")]:
            with self.subTest(url=url):
                self.assertEqual(redact_url(url), want)

    def test_messages(self) -> None:
        cases: List[Tuple[str, Callable[[], object], str]] = [
                ("etcd", lambda: acquire("http://root:s3cret@127.0.0.1:1", "gw", "pump"), "http://127.0.0.1:1"),
                ("etcd URL", lambda: acquire("root:s3cret@127.0.0.1:1", "gw", "pump"), "127.0.0.1:1"),
                ("broker", lambda: Client("tcp://u:s3cret@127.0.0.1:1", "gw"), "connect tcp://127.0.0.1:1: connection refused"),
                ("broker port", lambda: Client("tcp://u:s3cret@127.0.0.1:99999", "gw"), "tcp://127.0.0.1:99999"),
                ("broker scheme", lambda: Client("foo://u:s3cret@x", "gw"), "foo://x")]
        for what, call, want in cases:
            with self.subTest(what=what), self.assertRaises((EtcdError, BrokerError)) as cm:
                call()
            self.assertIn(want, str(cm.exception))
            self.assertNotIn("s3cret", str(cm.exception))
        code, out, err = run_main("send", "--gateway", "gw", "--actuator", "pump", "--broker", "tcp://u:s3cret@127.0.0.1:1",
                                  "--token", "1", "on")
        self.assertEqual(code, EXIT_OTHER, err)
        self.assertNotIn("s3cret", out + err)

    def test_security_repr(self) -> None:
        s = Security.build("u", "s3cret", None, None, None, None)
        self.assertEqual(s.password, "s3cret")
        self.assertNotIn("s3cret", repr(s))


class TestUsage(unittest.TestCase):
    def test_help_never_acts(self) -> None:
        r = cli("send", "--help")  # once through python3 -m fencegate
        self.assertEqual((r.returncode, r.stderr), (0, ""))
        self.assertIn("usage: python3 -m fencegate send", r.stdout)
        for args in (["--help"], ["send", "-h", "--gateway", "gw", "--actuator", "pump",
                                   "--broker", "tcp://127.0.0.1:1", "--token", "1", "on"]):
            with self.subTest(args=args):
                code, out, err = run_main(*args)
                self.assertEqual((code, err), (0, ""))
                self.assertIn("usage:", out)

    def test_bad_usage_exits_64(self) -> None:
        bad: List[List[str]] = [
            [],
            ["frobnicate"],
            ["send", "on"],
            ["send", "--gateway", "gw", "--actuator", "pump", "toggle"],
            ["send", "--gateway", "gw", "--actuator", "pump", "on"],  # neither --etcd nor --token
            ["send", "--gateway", "gw", "--actuator", "pump", "--token", "1", "--etcd", "http://x:1", "on"],
            ["send", "--gateway", "gw", "--actuator", "pump", "--token", "9223372036854775808", "on"],
            ["send", "--gateway", "gw", "--actuator", "pump", "--token", "1", "--key", "k.key", "on"],
            ["send", "--gateway", "gw", "--actuator", "pump", "--token", "1", "--stop-after-grant", "on"],
            ["send", "--gateway", "gw", "--actuator", "pump", "--token", "x", "on"],
        ]
        for args in bad:
            with self.subTest(args=args):
                code, out, err = run_main(*args)
                self.assertEqual(code, EXIT_USAGE, err)
                self.assertNotIn("Traceback", err)
                self.assertEqual(out, "")


    def test_numbers_as_go_takes_them(self) -> None:
        """--token and --seq: decimal ASCII digits only (Go's ParseUint),
        in range; exit 64 naming the flag and the range."""
        base = ["send", "--gateway", "gw", "--actuator", "pump", "--broker", "tcp://127.0.0.1:1"]
        tok = "for --token: want a whole number from 1 to 2^63-1"
        seq = "for --seq: want a whole number from 0 to 2^63-1"
        for args, want in [(["--token", "7_0"], tok), (["--token", "1_000_000_000"], tok), (["--token", "+7"], tok),
                           (["--token", " 7"], tok), (["--token", "7 "], tok), (["--token", "\u0667"], tok),
                           (["--token", "0"], tok), (["--token", "-1"], tok), (["--token", "9223372036854775808"], tok),
                           (["--token", ""], tok),
                           (["--token", "1", "--seq", "1_0"], seq), (["--token", "1", "--seq", "+1"], seq),
                           (["--token", "1", "--seq", "-1"], seq), (["--token", "1", "--seq", "\u0661"], seq),
                           (["--token", "1", "--seq", "9223372036854775808"], seq)]:
            with self.subTest(args=args):
                code, out, err = run_main(*base, *args, "on")
                self.assertEqual((code, out), (EXIT_USAGE, ""), err)
                self.assertIn(want, err)
                self.assertNotIn("give either", err)

    def test_bad_broker_etcd_timeout_exit_64(self) -> None:
        base = ["send", "--gateway", "gw", "--actuator", "pump"]
        for args, want in [
                (["--broker", "127.0.0.1:1883", "--token", "1"],
                 "--broker '127.0.0.1:1883': no scheme: want tcp://HOST:PORT: write tcp://127.0.0.1:1883"),
                (["--broker", "http://x", "--token", "1"], "--broker 'http://x': scheme 'http': want tcp://HOST:PORT"),
                (["--broker", "tcp://", "--token", "1"], "--broker 'tcp://': no host: want tcp://HOST:PORT"),
                (["--broker", "tcp://:99999", "--token", "1"], "--broker 'tcp://:99999': "),
                (["--broker", "tcp://h:99999", "--token", "1"], "port 99999 is not a port (1 to 65535): want tcp://HOST:PORT"),
                (["--broker", "tcp://[::1", "--token", "1"], "--broker 'tcp://[::1': "),
                (["--broker", "tcp://u:s3cret@h:0", "--token", "1"], "port 0 is not a port"),
                (["--broker", "tcp://127.0.0.1:1", "--etcd", "http://x:notaport"], "--etcd 'http://x:notaport': "),
                (["--broker", "tcp://127.0.0.1:1", "--etcd", "http://x:99999"], "--etcd 'http://x:99999': "),
                (["--broker", "tcp://127.0.0.1:1", "--etcd", "http://[::1"], "--etcd 'http://[::1': "),
                (["--broker", "tcp://127.0.0.1:1", "--token", "1", "--timeout", "nan"], "--timeout nan: want a positive number of seconds"),
                (["--broker", "tcp://127.0.0.1:1", "--token", "1", "--timeout", "inf"], "--timeout inf: want a positive number of seconds"),
                (["--broker", "tcp://127.0.0.1:1", "--token", "1", "--timeout=-inf"], "--timeout -inf: want a positive number of seconds")]:
            with self.subTest(args=args):
                code, out, err = run_main(*base, *args, "on")
                self.assertEqual((code, out), (EXIT_USAGE, ""), err)
                self.assertIn(want, err)
                self.assertNotIn("Traceback", err)
                self.assertNotIn("s3cret", err)
                if "--broker" in want:
                    self.assertIn("want tcp://HOST:PORT", err)


    def test_bad_topic_flags_exit_64_naming_the_flag(self) -> None:
        """A gateway id no gateway's configuration can have (the config
        loader's rule), a prefix that cannot begin topics, a user name too
        long for the reply topic: bad usage, exit 64, said before anything
        is sent, naming the flag and what is wanted."""
        base = ["send", "--broker", "tcp://127.0.0.1:1", "--actuator", "pump", "--token", "1"]
        cases = [
            (["--gateway", "si m"], "--gateway 'si m': want 1 to 64 letters, digits, - and _"),
            (["--gateway", "g" * 65], "want 1 to 64 letters, digits, - and _"),
            (["--gateway", "gw.1"], "--gateway 'gw.1': want 1 to 64 letters, digits, - and _"),
            (["--gateway", "si/m"], "--gateway 'si/m': want"),
            (["--gateway", "gw", "--prefix", "a/+"], "--prefix 'a/+': it has a wildcard (+ #); want the gateway's mqtt.topic_prefix"),
            (["--gateway", "gw", "--prefix", "/site"], "--prefix '/site': it has an empty level"),
            (["--gateway", "gw", "--prefix", "a\x07"], "--prefix 'a\\x07': character 2 (U+0007) is a control character"),
            (["--gateway", "gw", "--username", "u" * 300], "--username: user name 'uuuuuuuuuuuuuuuu'… is 300 bytes"),
            (["--gateway", "gw", "--username", "ops/a"], "--username: user name 'ops/a' cannot be a level of the reply topic"),
        ]
        for args, want in cases:
            with self.subTest(args=args):
                code, out, err = run_main(*base, *args, "on")
                self.assertEqual(code, EXIT_USAGE, err)
                self.assertIn(want, err)
                self.assertNotIn("client id", err.split(":", 2)[1])  # the flag's fault, named as such
                self.assertEqual(out, "")
        code, _, err = run_main(*base, "--gateway", "gw", "--username", "u" * 300, "on")
        self.assertIn("want a user name of at most", err)
        self.assertNotIn("reply=", err)  # the library's advice, no flag of the CLI's

    def test_stop_flags(self) -> None:
        base = ["send", "--gateway", "gw", "--actuator", "pump", "--broker", "tcp://127.0.0.1:1"]
        for args, want in [(["--token", "1", "--stop-under-lease"], "--stop-under-lease goes with --etcd"),
                           (["--etcd", "http://127.0.0.1:1", "--stop-under-lease", "--stop-after-grant"],
                            "give --stop-after-grant (send without the lease's guard) or --stop-under-lease (send under it), not both")]:
            with self.subTest(args=args):
                code, out, err = run_main(*base, *args, "on")
                self.assertEqual((code, out), (EXIT_USAGE, ""), err)
                self.assertIn(want, err)

    def test_help_names_the_exit_codes(self) -> None:
        code, out, _ = run_main("send", "--help")
        self.assertEqual(code, 0)
        for want in ("6 no answer within --timeout", "7 applied or duplicate but the output is not as\nasked",
                     "8 the lease was lost before the command was sent: nothing was sent"):
            self.assertIn(want, out)


class TestKeyFile(unittest.TestCase):
    def test_errors(self) -> None:
        with tempfile.TemporaryDirectory() as d:
            pub = Path(d, "k.pub")
            pub.write_text("ed25519:11qYAYKxCrfVS/7TyWQHOg7hcvPapiMlrwIaaPcHURo=\n")
            junk = Path(d, "junk")
            junk.write_text("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
            for path, want in [(pub, "is a public key"), (junk, "PRIVATE KEY"), (Path(d, "none"), "No such file")]:
                with self.subTest(path=path.name), self.assertRaises(KeyFileError) as cm:
                    Signer("ctl-a", str(path))
                self.assertIn(want, str(cm.exception))


if __name__ == "__main__":
    unittest.main()
