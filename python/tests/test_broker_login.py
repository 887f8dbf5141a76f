"""A broker that refuses the login or whose TLS fails: one sentence that says
why. Each test class starts a Mosquitto of its own (skipped without
mosquitto on PATH); the certificates are made here with cryptography."""

from __future__ import annotations

import datetime
import ipaddress
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the package beside tests/, wherever this runs from

from cryptography import x509  # noqa: E402
from cryptography.hazmat.primitives import hashes, serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric import ec  # noqa: E402
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID  # noqa: E402

from fencegate import BrokerError, Client  # noqa: E402
from fencegate.connection import ENV_PASSWORD  # noqa: E402

MOSQUITTO = shutil.which("mosquitto") or ("/usr/sbin/mosquitto" if os.path.exists("/usr/sbin/mosquitto") else None)
MOSQUITTO_PASSWD = shutil.which("mosquitto_passwd")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Broker:
    """A Mosquitto with one listener configured by ``conf`` lines."""

    def __init__(self, d: Path, conf: List[str], port: int = 0) -> None:
        self.port = port or free_port()
        # Mosquitto started as root reads its files as the user mosquitto.
        os.chmod(d, 0o755)
        for f in d.iterdir():
            os.chmod(f, 0o644)
        cfg = d / f"mosquitto-{self.port}.conf"
        cfg.write_text("\n".join([f"listener {self.port} 127.0.0.1", "set_tcp_nodelay true", *conf]) + "\n")
        assert MOSQUITTO
        self.proc = subprocess.Popen([MOSQUITTO, "-c", str(cfg)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 10
        while True:
            try:
                socket.create_connection(("127.0.0.1", self.port), 0.2).close()
                return
            except OSError:
                if self.proc.poll() is not None or time.monotonic() > deadline:
                    err = self.proc.stderr.read().decode() if self.proc.stderr else ""
                    raise RuntimeError(f"mosquitto did not start: {err}")
                time.sleep(0.02)

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(10)
        if self.proc.stderr:
            self.proc.stderr.close()


def connect_error(url: str, **kw: Any) -> str:
    try:
        Client(url, "gw", connect_timeout=5, **kw).close()
    except BrokerError as e:
        return str(e)
    return ""


@unittest.skipUnless(MOSQUITTO and MOSQUITTO_PASSWD, "needs mosquitto and mosquitto_passwd")
class TestPassword(unittest.TestCase):
    broker: Broker
    tmp: tempfile.TemporaryDirectory[str]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory()
        d = Path(cls.tmp.name)
        assert MOSQUITTO_PASSWD
        subprocess.run([MOSQUITTO_PASSWD, "-b", "-c", str(d / "passwd"), "ctl", "right"], check=True, capture_output=True)
        (d / "right").write_text("right\n")
        (d / "wrong").write_text("wrong\n")
        cls.broker = Broker(d, ["allow_anonymous false", f"password_file {d / 'passwd'}"])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.broker.stop()
        cls.tmp.cleanup()

    def url(self) -> str:
        return f"tcp://127.0.0.1:{self.broker.port}"

    def test_refused(self) -> None:
        d = Path(self.tmp.name)
        self.assertIn("not authorised: the broker takes no anonymous clients: set username", connect_error(self.url()))
        self.assertIn(f"not authorised: the broker refused user 'ctl' with the password from password_file {d / 'wrong'}: "
                      "check both against the broker's password file",
                      connect_error(self.url(), username="ctl", password_file=str(d / "wrong")))
        self.assertIn("the broker refused user 'ctl' without a password", connect_error(self.url(), username="ctl"))

    def test_accepted(self) -> None:
        d = Path(self.tmp.name)
        self.assertEqual(connect_error(self.url(), username="ctl", password_file=str(d / "right")), "")
        self.assertEqual(connect_error(self.url(), username="ctl", password="right"), "")
        os.environ[ENV_PASSWORD] = "right"
        try:
            self.assertEqual(connect_error(self.url(), username="ctl"), "")
        finally:
            del os.environ[ENV_PASSWORD]

    def test_password_file(self) -> None:
        d = Path(self.tmp.name)
        (d / "empty").write_text("")
        (d / "two").write_text("a\nb\n")
        for name, want in [("empty", "is empty"), ("two", "has 2 lines"), ("none", "No such file")]:
            with self.subTest(name):
                self.assertIn(want, connect_error(self.url(), username="ctl", password_file=str(d / name)))


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _cert(subject: str, key: ec.EllipticCurvePrivateKey, issuer: Optional[Tuple[x509.Certificate, ec.EllipticCurvePrivateKey]],
          ca: bool = False, server: bool = False, client: bool = False) -> x509.Certificate:
    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    b = (x509.CertificateBuilder().subject_name(name).public_key(key.public_key())
         .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
         .not_valid_after(now + datetime.timedelta(days=1))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if server:
        b = b.add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                            critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
    if client:
        b = b.add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                                          encipher_only=False, decipher_only=False), critical=True)
    issuer_name, signing_key = (issuer[0].subject, issuer[1]) if issuer else (name, key)
    return b.issuer_name(issuer_name).sign(signing_key, hashes.SHA256())


def _write(d: Path, name: str, cert: x509.Certificate, key: ec.EllipticCurvePrivateKey) -> Dict[str, str]:
    (d / f"{name}.crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (d / f"{name}.key").write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                                      serialization.NoEncryption()))
    return {"cert": str(d / f"{name}.crt"), "key": str(d / f"{name}.key")}


@unittest.skipUnless(MOSQUITTO, "needs mosquitto")
class TestTLS(unittest.TestCase):
    tls: Broker
    plain: Broker
    tmp: tempfile.TemporaryDirectory[str]
    files: Dict[str, Dict[str, str]]

    @classmethod
    def setUpClass(cls) -> None:
        cls.tmp = tempfile.TemporaryDirectory()
        d = Path(cls.tmp.name)
        ca_key, other_key = _key(), _key()
        ca = _cert("fencegate test CA", ca_key, None, ca=True)
        other = _cert("another CA", other_key, None, ca=True)
        server_key, client_key, stranger_key = _key(), _key(), _key()
        cls.files = {
            "ca": _write(d, "ca", ca, ca_key),
            "server": _write(d, "server", _cert("broker", server_key, (ca, ca_key), server=True), server_key),
            "client": _write(d, "client", _cert("ctl", client_key, (ca, ca_key), client=True), client_key),
            "stranger": _write(d, "stranger", _cert("stranger", stranger_key, (other, other_key), client=True), stranger_key),
        }
        cls.tls = Broker(d, ["allow_anonymous true", f"cafile {cls.files['ca']['cert']}",
                             f"certfile {cls.files['server']['cert']}", f"keyfile {cls.files['server']['key']}",
                             "require_certificate true"])
        cls.plain = Broker(d, ["allow_anonymous true"])

    @classmethod
    def tearDownClass(cls) -> None:
        cls.tls.stop()
        cls.plain.stop()
        cls.tmp.cleanup()

    def url(self) -> str:
        return f"ssl://127.0.0.1:{self.tls.port}"

    def test_unknown_ca(self) -> None:
        self.assertIn("the broker's certificate is not signed by a CA this system trusts", connect_error(self.url()))

    def test_no_client_certificate(self) -> None:
        # Mosquitto ends the handshake with an alert or without one, depending on the TLS version.
        got = connect_error(self.url(), ca_file=self.files["ca"]["cert"])
        self.assertTrue("the broker requires a client certificate (it said" in got
                        or "it may require a client certificate (cert_file and key_file)" in got, got)
        self.assertNotIn("Traceback", got)

    def test_refused_client_certificate(self) -> None:
        f = self.files
        got = connect_error(self.url(), ca_file=f["ca"]["cert"], cert_file=f["stranger"]["cert"], key_file=f["stranger"]["key"])
        # Mosquitto ends the handshake with an alert or without one, depending on the TLS version.
        self.assertTrue(f"the broker refused this client's certificate, cert_file {f['stranger']['cert']}" in got
                        or f"it may have refused this client's certificate, cert_file {f['stranger']['cert']}" in got, got)

    def test_accepted(self) -> None:
        f = self.files
        self.assertEqual(connect_error(self.url(), ca_file=f["ca"]["cert"], cert_file=f["client"]["cert"],
                                       key_file=f["client"]["key"]), "")

    def test_wrong_host(self) -> None:
        f = self.files
        got = connect_error(f"ssl://127.0.0.2:{self.tls.port}", ca_file=f["ca"]["cert"], cert_file=f["client"]["cert"],
                            key_file=f["client"]["key"])
        self.assertTrue("not for '127.0.0.2'" in got or "connection refused" in got, got)

    def test_tls_to_a_plain_listener(self) -> None:
        self.assertIn(f"the broker closed the connection during the TLS handshake or right after it: it may require a client certificate "
                      f"(cert_file and key_file), or 127.0.0.1:{self.plain.port} is not its TLS listener",
                      connect_error(f"ssl://127.0.0.1:{self.plain.port}"))

    def test_files(self) -> None:
        f = self.files
        self.assertIn("ca_file /nonexistent", connect_error(self.url(), ca_file="/nonexistent"))
        self.assertIn("give cert_file and key_file together", connect_error(self.url(), cert_file=f["client"]["cert"]))
        self.assertIn("do not belong together", connect_error(self.url(), cert_file=f["client"]["cert"], key_file=f["stranger"]["key"]))
        self.assertIn("are not a PEM certificate", connect_error(self.url(), cert_file=f["client"]["key"], key_file=f["client"]["key"]))


if __name__ == "__main__":
    unittest.main()
