"""The MQTT connection under the client: paho-mqtt 1.x and 2.x alike.

paho-mqtt 2.0 changed its callbacks' signatures (CallbackAPIVersion);
this module detects which paho it runs on and speaks to either, so that
the rest of the package sees one set of events. It also turns a failed
connection into one sentence a person can act on: nothing listens, a
refused password, a certificate the broker or this side does not accept.
"""

from __future__ import annotations

import os
import socket
import ssl
import threading
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

try:
    import paho.mqtt.client as paho
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(f"fencegate needs paho-mqtt (1.6 or 2.x): on Debian, apt-get install python3-paho-mqtt "
                      f"and run Debian's /usr/bin/python3; elsewhere, pip install paho-mqtt ({e})") from None

from .errors import BrokerError, redact_url

__all__ = ["PAHO_V2", "Security", "Connection", "ENV_PASSWORD", "broker_problem"]

#: True on paho-mqtt 2.x, whose callbacks take the VERSION2 signatures.
PAHO_V2 = hasattr(paho, "CallbackAPIVersion")

#: The environment variable a password comes from when a user name has none.
ENV_PASSWORD = "FENCEGATE_MQTT_PASSWORD"

_TLS_SCHEMES = {"ssl", "tls", "mqtts", "mqtt+ssl", "tcps"}
_PLAIN_SCHEMES = {"tcp", "mqtt"}

# MQTT 3.1.1 CONNACK return codes, by the names paho 2.x gives them.
_CONNACK_V1 = {0: "Success", 1: "Unsupported protocol version", 2: "Client identifier not valid",
               3: "Server unavailable", 4: "Bad user name or password", 5: "Not authorized"}

#: The names of the connection's options in messages; a CLI maps them to its flags.
DEFAULT_NAMES = {"broker": "broker", "ca_file": "ca_file", "cert_file": "cert_file", "key_file": "key_file",
                 "username": "username", "password_file": "password_file"}


@dataclass
class Security:
    """How to log in: TLS files, user name and password (where it came from)."""

    username: str = ""
    password: Optional[str] = field(default=None, repr=False)
    password_from: str = ""
    ca_file: str = ""
    cert_file: str = ""
    key_file: str = ""
    names: Dict[str, str] = field(default_factory=lambda: dict(DEFAULT_NAMES))

    @classmethod
    def build(cls, username: Optional[str], password: Optional[str], password_file: Optional[str],
              ca_file: Optional[str], cert_file: Optional[str], key_file: Optional[str],
              names: Optional[Dict[str, str]] = None) -> "Security":
        """Check the options and read the password (from the argument, the file, or the environment)."""
        n = dict(DEFAULT_NAMES, **(names or {}))
        s = cls(username=username or "", ca_file=ca_file or "", cert_file=cert_file or "", key_file=key_file or "", names=n)
        if password is not None and password_file:
            raise BrokerError(f"give the password or {n['password_file']}, not both")
        if password_file:
            s.password, s.password_from = read_password(password_file, n["password_file"]), f"{n['password_file']} {password_file}"
        elif password is not None:
            s.password, s.password_from = password, "the password given"
        elif s.username and os.environ.get(ENV_PASSWORD):
            s.password, s.password_from = os.environ[ENV_PASSWORD], f"${ENV_PASSWORD}"
        if s.password is not None and not s.username:
            raise BrokerError(f"a password without {n['username']}: give the user name it belongs to")
        if bool(s.cert_file) != bool(s.key_file):
            raise BrokerError(f"give {n['cert_file']} and {n['key_file']} together (a client certificate and its key), or neither")
        return s

    def credentials(self) -> str:
        """Which credentials the broker refused."""
        n = self.names
        if not self.username:
            return f"the broker takes no anonymous clients: set {n['username']} and its password ({n['password_file']} or ${ENV_PASSWORD})"
        if self.password is None:
            return (f"the broker refused user {self.username!r} without a password: give the password in "
                    f"{n['password_file']} or ${ENV_PASSWORD}")
        return (f"the broker refused user {self.username!r} with the password from {self.password_from}: "
                "check both against the broker's password file")


def read_password(path: str, setting: str = "password_file") -> str:
    """The password in ``path``: its one line, without the line break."""
    try:
        with open(path, encoding="utf-8") as f:
            s = f.read()
    except OSError as e:
        raise BrokerError(f"{setting} {path}: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise BrokerError(f"{setting} {path}: is not UTF-8 text") from None
    s = s.removesuffix("\n").removesuffix("\r")
    if not s:
        raise BrokerError(f"{setting} {path}: is empty: write the broker password into it, alone on one line")
    if "\n" in s or "\r" in s:
        raise BrokerError(f"{setting} {path}: has {s.count(chr(10)) + 1} lines: it must hold the password alone, on one line")
    return s


_WANT_URL = "want tcp://HOST:PORT, e.g. tcp://127.0.0.1:1883, or ssl://HOST:PORT for TLS"


def broker_problem(url: str) -> str:
    """What is wrong with broker URL ``url`` and what to write instead
    ("" if nothing), as Go's mqttsec.BrokerURL says it, without the URL."""
    if "://" not in url:
        host, sep, port = url.rpartition(":")
        if sep and host and "@" not in url and port.isascii() and port.isdigit() and int(port) < 65536:
            return f"no scheme: want tcp://HOST:PORT: write tcp://{url} (or ssl://{url} for TLS)"
        return "no scheme: " + _WANT_URL
    try:
        u = urllib.parse.urlsplit(url)
        host = u.hostname
    except ValueError as e:  # an unclosed [ of an IPv6 address
        return f"{e}: {_WANT_URL}"
    scheme = u.scheme.lower()
    if scheme not in _TLS_SCHEMES | _PLAIN_SCHEMES:
        return f"scheme {u.scheme!r}: want tcp://HOST:PORT, or ssl://HOST:PORT for TLS (mqtt, mqtts, tls work too)"
    if not host:
        return "no host: " + _WANT_URL
    port = u.netloc.rpartition("@")[2].rpartition("]")[2].partition(":")[2]
    if port and not (port.isascii() and port.isdigit() and 0 < int(port) < 65536):
        return f"port {port} is not a port (1 to 65535): {_WANT_URL}"
    return ""


def parse_broker(url: str) -> Tuple[str, int, bool]:
    """Host, port and whether TLS, from ``tcp://HOST:PORT`` or ``ssl://HOST:PORT``."""
    why = broker_problem(url)
    if why:
        raise BrokerError(f"broker URL {redact_url(url)!r}: {why}")
    u = urllib.parse.urlsplit(url)
    tls = u.scheme.lower() in _TLS_SCHEMES
    return u.hostname or "", u.port or (8883 if tls else 1883), tls


def _hostport(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def explain(e: BaseException, broker: str, s: Security) -> str:
    """Why connecting to ``broker`` failed, as a person can act on it."""
    n = s.names
    host, port, tls = parse_broker(broker)
    where = _hostport(host, port)
    if isinstance(e, ssl.SSLCertVerificationError):
        code, msg = e.verify_code, e.verify_message or str(e)
        ca = f"a CA in {n['ca_file']} {s.ca_file}" if s.ca_file else "a CA this system trusts"
        if code in (18, 19, 20, 21, 2):  # self-signed, or an issuer not found among the trusted CAs
            fix = ("put the certificate of the CA that signed the broker's certificate in that file" if s.ca_file
                   else f"set {n['ca_file']} to the certificate of the CA that signed it")
            return f"the broker's certificate is not signed by {ca} ({msg}): {fix}"
        if code == 62 or "hostname" in msg.lower():
            return f"the broker's certificate is not for {host!r} ({msg}): connect to a name it is for in {n['broker']}"
        if code == 10:
            return "the broker's certificate has expired: renew it on the broker (if it has not, this machine's clock is wrong)"
        if code == 9:
            return "the broker's certificate is not valid yet: is this machine's clock right?"
        return f"the broker's certificate was refused: {msg}"
    if isinstance(e, ssl.SSLEOFError) or (tls and isinstance(e, (ConnectionResetError, BrokenPipeError, EOFError))):
        return _closed_in_handshake(where, s)
    if isinstance(e, ssl.SSLError):
        reason = (e.reason or str(e)).upper()
        if "WRONG_VERSION_NUMBER" in reason or "UNKNOWN_PROTOCOL" in reason or "RECORD_LAYER" in reason:
            return f"the broker does not speak TLS at {where}: use the port of its TLS listener (often 8883) in {n['broker']}, or tcp:// for a plain one"
        if "ALERT" in reason:
            return _alert(reason, s)
        return f"TLS with the broker at {where} failed: {e.reason or e}"
    if isinstance(e, ConnectionRefusedError):
        return f"connection refused: nothing listens at {where} (is the broker running? is the port right?)"
    if isinstance(e, socket.gaierror):
        return f"host {host!r} not found (check {n['broker']})"
    if isinstance(e, (socket.timeout, TimeoutError)):
        return f"timed out: the broker at {where} did not answer (network down, firewall, or wrong address)"
    if isinstance(e, (ConnectionResetError, BrokenPipeError, EOFError)):
        return f"the broker at {where} closed the connection"
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror} ({where})"
    return str(e) or type(e).__name__


def _closed_in_handshake(where: str, s: Security) -> str:
    """A TLS connection the broker closed before it accepted this client.

    Mosquitto ends a handshake whose client certificate it refuses (or
    misses) with an alert or just by closing, depending on the TLS
    version; with TLS 1.3 the close comes after this side's handshake
    is done, with the first read.
    """
    n = s.names
    if s.cert_file:
        return (f"the broker closed the connection during the TLS handshake or right after it: it may have refused this "
                f"client's certificate, {n['cert_file']} {s.cert_file} (it must be signed by a CA the broker trusts, valid "
                f"now, and for client authentication), or {where} is not its TLS listener; the broker's log says why")
    return (f"the broker closed the connection during the TLS handshake or right after it: it may require a client "
            f"certificate ({n['cert_file']} and {n['key_file']}), or {where} is not its TLS listener; the broker's log says why")


def _alert(reason: str, s: Security) -> str:
    n = s.names
    said = reason.split("ALERT_", 1)[-1].lower().replace("_", " ")
    if not s.cert_file:
        return (f"the broker requires a client certificate (it said {said!r}): set {n['cert_file']} and {n['key_file']} "
                "to this client's certificate and key, signed by a CA the broker trusts (Mosquitto: its cafile)")
    return (f"the broker refused this client's certificate, {n['cert_file']} {s.cert_file} (it said {said!r}): it must be "
            "signed by a CA the broker trusts (Mosquitto: its cafile), valid now, and for client authentication")


def _tls_context(s: Security) -> ssl.SSLContext:
    n = s.names
    try:
        ctx = ssl.create_default_context(cafile=s.ca_file or None)
    except (OSError, ssl.SSLError) as e:
        why = getattr(e, "strerror", None) or "holds no PEM certificate"
        raise BrokerError(f"{n['ca_file']} {s.ca_file}: {why}") from None
    if s.cert_file:
        try:
            ctx.load_cert_chain(s.cert_file, s.key_file)
        except ssl.SSLError as e:
            if "KEY_VALUES_MISMATCH" in (e.reason or ""):
                raise BrokerError(f"{n['cert_file']} {s.cert_file} and {n['key_file']} {s.key_file} do not belong together: "
                                  "the key is not the certificate's") from None
            raise BrokerError(f"{n['cert_file']} {s.cert_file} and {n['key_file']} {s.key_file} are not a PEM certificate "
                              "and its private key") from None
        except OSError as e:
            raise BrokerError(f"{n['cert_file']} {s.cert_file} / {n['key_file']} {s.key_file}: {e.strerror or e}") from None
    return ctx


def _connack_name(rc: Any) -> str:
    if isinstance(rc, int) and not hasattr(rc, "getName"):
        return _CONNACK_V1.get(rc, f"refused with code {rc}")
    return str(rc)


def _refusal(name: str, s: Security) -> str:
    low = name.lower()
    if "not authori" in low:
        return f"not authorised: {s.credentials()} (Mosquitto answers a wrong password this way)"
    if "user name or password" in low:
        return f"bad user name or password: {s.credentials()}"
    if "identifier" in low:
        return "identifier rejected: the broker does not accept the client id (set another client id)"
    if "unavailable" in low:
        return "the broker says it is unavailable"
    if "protocol" in low:
        return "the broker does not speak MQTT 3.1.1"
    return f"the broker refused the connection ({name})"


class Connection:
    """A paho client kept connected, with version-neutral events.

    ``on_ready`` is called (from the network thread) after each connect
    once every subscription is acknowledged; ``on_message(topic, payload,
    retained)`` for each message; ``on_lost`` when the connection drops.
    It reconnects by itself, with a new paho client each time (see
    :meth:`_new_paho`); subscriptions are made again each time (a clean
    session).
    """

    def __init__(self, broker: str, client_id: str, security: Security, subscriptions: List[str],
                 on_message: Callable[[str, bytes, bool], None], on_ready: Callable[[], None],
                 on_lost: Callable[[], None]) -> None:
        #: The broker's URL as messages show it (no user info).
        self.broker = redact_url(broker)
        self.security = security
        self.host, self.port, self.tls = parse_broker(broker)
        self._subs = subscriptions
        self._on_message, self._on_ready, self._on_lost = on_message, on_ready, on_lost
        self._cv = threading.Condition()
        self._connack: Optional[str] = None
        self._ready = False
        self._sub_mid: Optional[int] = None
        self._sub_error = ""
        self._last_error = ""
        self._lost_before_connack = False
        self._stop = threading.Event()
        self.connected = False
        self._client_id = client_id
        self._tls_ctx = _tls_context(security) if self.tls else None
        # The paho client of the connection up now (after its CONNACK), or
        # None: the only one publish() hands a message to.
        self._live: Optional[Any] = None
        self._was_up = False
        self._paho = self._new_paho()
        self._thread = threading.Thread(target=self._run, name=f"fencegate-mqtt-{client_id}", daemon=True)

    def _new_paho(self) -> Any:
        """A new paho client, for one connection only.

        Each connection has a paho client of its own, never reconnected:
        a message handed to paho is sent on that connection or never.
        paho keeps an unacknowledged QoS 1 publish and sends it again on
        its own reconnect, even with a clean session (paho 1.6 and 2.x
        alike: its reconnect sets each one back to be published, and the
        CONNACK sends them), without asking anyone. A command published
        under a lease whose deadline passes while the broker is away would
        then be published again under a lost token. The client's own
        resend loop publishes again after a reconnect, and checks the
        lease first. (Dropping them from paho's queue on a disconnect
        would need paho's private attributes, and a publish racing the
        disconnect could still slip into the queue.)
        """
        if PAHO_V2:
            version2 = getattr(paho, "CallbackAPIVersion").VERSION2
            c = paho.Client(version2, client_id=self._client_id, clean_session=True, protocol=paho.MQTTv311)
            c.on_connect = lambda c_, _u, _f, rc, _p: self._connected(c_, _connack_name(rc))
            c.on_subscribe = lambda _c, _u, mid, rcs, _p: self._subscribed(mid, any(r.is_failure for r in rcs))
            c.on_disconnect = lambda c_, _u, _f, rc, _p: self._disconnected(c_)
        else:
            c = paho.Client(client_id=self._client_id, clean_session=True, protocol=paho.MQTTv311)
            c.on_connect = lambda c_, _u, _f, rc: self._connected(c_, _connack_name(rc))
            c.on_subscribe = lambda _c, _u, mid, granted: self._subscribed(mid, any(q == 128 for q in granted))
            c.on_disconnect = lambda c_, _u, rc: self._disconnected(c_)
        c.on_message = lambda _c, _u, m: self._on_message(m.topic, m.payload, bool(m.retain))
        c.on_log = self._log
        if self._tls_ctx is not None:
            c.tls_set_context(self._tls_ctx)
        if self.security.username:
            c.username_pw_set(self.security.username, self.security.password)
        return c

    def _log(self, _c: Any, _u: Any, level: int, buf: str) -> None:
        if level == paho.MQTT_LOG_ERR:
            self._last_error = buf

    def open(self, timeout: float) -> None:
        """Connect and subscribe, waiting up to ``timeout`` s; :class:`BrokerError` says why not."""
        s = self.security
        try:
            self._paho.connect(self.host, self.port, keepalive=30)
        except (OSError, ssl.SSLError, EOFError) as e:
            sock = self._paho.socket()
            if sock is not None:
                sock.close()
            raise BrokerError(f"connect {self.broker}: {explain(e, self.broker, s)}") from None
        self._thread.start()
        with self._cv:
            self._cv.wait_for(lambda: self._ready or self._connack not in (None, "Success") or bool(self._sub_error)
                              or not self._thread.is_alive() or self._lost_before_connack, timeout)
            connack, ready, sub_error = self._connack, self._ready, self._sub_error
        if ready:
            return
        self.close()
        if connack not in (None, "Success"):
            raise BrokerError(f"connect {self.broker}: {_refusal(connack or '', s)}")
        if sub_error:
            raise BrokerError(f"subscribe at {self.broker}: {sub_error}")
        if connack is None:
            why = self._last_error
            if "ALERT" in why.upper():
                raise BrokerError(f"connect {self.broker}: {_alert(why.upper(), s)}")
            if self._lost_before_connack and self.tls:
                raise BrokerError(f"connect {self.broker}: {_closed_in_handshake(_hostport(self.host, self.port), s)}")
            if self._lost_before_connack:
                raise BrokerError(f"connect {self.broker}: the broker closed the connection before it accepted this client"
                                  f"{' (' + why + ')' if why else ''}; its log says why")
            raise BrokerError(f"connect {self.broker}: no answer from the broker within {timeout:g}s")
        raise BrokerError(f"subscribe at {self.broker}: no answer from the broker within {timeout:g}s")

    def _run(self) -> None:
        # paho's loop for this connection's client, then a new client for
        # the next connection (never paho's reconnect: see _new_paho).
        # paho 1.x lets some TLS errors (a client certificate the broker
        # refuses after the handshake) escape its loop: a lost connection.
        c = self._paho
        delay = 1.0
        while not self._stop.is_set():
            try:
                while not self._stop.is_set() and c.loop(1.0) == paho.MQTT_ERR_SUCCESS:
                    pass
            except Exception as e:  # noqa: BLE001 - any fault of the loop is a lost connection
                self._last_error = f"{type(e).__name__}: {e}"
            self._disconnected(c)
            sock = c.socket()
            if sock is not None:
                try:
                    sock.close()
                except OSError:
                    pass
            if self._stop.is_set():
                return
            if self._was_up:
                delay, self._was_up = 1.0, False  # after a connection, the first retry in a second (as paho's)
            while True:
                if self._stop.wait(delay):
                    return
                delay = min(delay * 2, 10.0)
                n = self._new_paho()
                try:
                    n.connect(self.host, self.port, keepalive=30)
                except Exception as e:  # noqa: BLE001
                    self._last_error = f"{type(e).__name__}: {e}"
                    s = n.socket()
                    if s is not None:
                        s.close()
                    continue
                with self._cv:
                    self._paho = c = n
                if self._stop.is_set():  # close() may have missed it
                    try:
                        c.disconnect()
                    except Exception:  # noqa: BLE001
                        pass
                    return
                break

    def _connected(self, c: Any, connack: str) -> None:
        with self._cv:
            self._connack = connack
            self._cv.notify_all()
        if connack != "Success":
            return
        with self._cv:
            self._live = c
            self._was_up = True
        self.connected = True
        rc, mid = c.subscribe([(t, 1) for t in self._subs])
        with self._cv:
            self._sub_mid = mid

    def _subscribed(self, mid: int, failed: bool) -> None:
        with self._cv:
            if mid != self._sub_mid:
                return
            if failed:
                self._sub_error = "the broker refused a subscription (its ACL?) to one of " + ", ".join(self._subs)
                self._cv.notify_all()
                return
            self._ready = True
            self._cv.notify_all()
        self._on_ready()

    def _disconnected(self, c: Any) -> None:
        with self._cv:
            if c is not self._paho:
                return  # an old client's, already lost
            self._live = None
            if self._connack is None:
                self._lost_before_connack = True
            self.connected = False
            self._cv.notify_all()
        self._on_lost()

    def publish(self, topic: str, payload: bytes) -> bool:
        """Publish with QoS 1, never retained, on the connection up now;
        False if there is none. A message is sent on that connection or
        never: it is not published again on a reconnect (see _new_paho)."""
        with self._cv:
            c = self._live
        if c is None:
            return False
        info = c.publish(topic, payload, qos=1, retain=False)
        return bool(info.rc == paho.MQTT_ERR_SUCCESS)

    def close(self) -> None:
        """Disconnect and stop the network thread."""
        self._stop.set()
        with self._cv:
            c = self._paho
        try:
            c.disconnect()
        except Exception:  # noqa: BLE001 - closing what may be half open
            pass
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(5)
