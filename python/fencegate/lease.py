"""Fencing tokens from etcd, through its v3 JSON gateway (HTTP, urllib).

The lock is the very one Go's ``lease`` package takes, so that Go,
Python and Node-RED controllers exclude each other: etcd's own lock
service (``/v3/lock/lock``, a server-side concurrency.Mutex) on the name
``/fencegate/locks/<gateway>/<scope>``, held by a lease. The lock key is
``<name>/<lease id in hex>``, and **the token is the key's
create_revision**: etcd's revision only grows, so every later grant gets a
higher token.

- :func:`acquire` grants a lease, keeps it alive (every ttl/3 s, in a
  thread, also while it waits for the lock), locks, and reads the key back:
  it must exist under our lease, and the lease must still be alive. A
  waiting lease that is lost queues again under a new one, as Go's
  ``lease.Acquire`` does.
- The lease is held until its deadline: the time the last keep-alive that
  etcd answered was *sent* (at first, the grant's request) plus the TTL
  etcd answered. etcd counts the TTL from when the request reached it,
  never earlier, so by then it may have let the lease expire. ``held`` and
  ``check()`` read the clock against it; :attr:`Lease.lost` is set by then
  too, or at once when a keep-alive says the lease is gone. From then on
  nothing may be sent under its token.
- :meth:`Lease.release` unlocks and revokes; a clean stop leaves no lease
  behind. ``with acquire(...) as lease:`` releases on the way out.

The JSON gateway speaks base64 for bytes and decimal strings for int64s.
"""

from __future__ import annotations

import base64
import json
import socket
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Callable, Dict, List, Optional

from .errors import AheadError, EtcdError, LeaseLost, redact_url

__all__ = ["PREFIX", "lock_name", "Etcd", "Lease", "acquire", "check_fence"]

#: The key prefix of fencegate's locks (as Go's lease.Prefix).
PREFIX = "/fencegate/locks/"


def _now() -> float:
    """The clock of a lease's deadline: monotonic, and on Linux counting the
    time this machine was suspended too (CLOCK_BOOTTIME): the TTL runs on
    at etcd meanwhile, and a controller that wakes up after it must not
    think it still holds."""
    return time.clock_gettime(time.CLOCK_BOOTTIME) if hasattr(time, "CLOCK_BOOTTIME") else time.monotonic()


def lock_name(gateway: str, scope: str) -> str:
    """The lock of a gateway's fence scope."""
    return PREFIX + gateway + "/" + scope


def _b64(s: bytes) -> str:
    return base64.b64encode(s).decode("ascii")


def _reason(e: BaseException, host: str) -> str:
    """Why a request to etcd at ``host`` failed, in words a person can act on."""
    r: Any = e.reason if isinstance(e, urllib.error.URLError) else e
    if isinstance(r, ConnectionRefusedError):
        return f"connection refused: nothing listens at {host} (is etcd running? is the URL right?)"
    if isinstance(r, socket.gaierror):
        return f"host {host.rsplit(':', 1)[0]!r} not found (is the URL right?)"
    if isinstance(r, (socket.timeout, TimeoutError)):
        return f"timed out: etcd at {host} did not answer (network down, firewall, or wrong address)"
    if isinstance(r, (ConnectionResetError, BrokenPipeError)) or "RemoteDisconnected" in type(r).__name__:
        return f"etcd at {host} closed the connection (is this etcd's client URL?)"
    if isinstance(r, OSError) and r.strerror:
        return r.strerror
    return str(r) or type(r).__name__


class Etcd:
    """A minimal client of etcd's v3 JSON gateway: POST JSON, get JSON."""

    def __init__(self, url: str, timeout: float = 5.0) -> None:
        try:
            u = urllib.parse.urlsplit(url.split(",")[0].strip())
        except ValueError as e:  # an unclosed [ of an IPv6 address
            raise EtcdError(f"etcd URL {redact_url(url)!r}: {e}: want http://HOST:PORT (etcd's client URL)") from None
        if u.scheme not in ("http", "https") or not u.netloc:
            raise EtcdError(f"etcd URL {redact_url(url)!r}: want http://HOST:PORT (etcd's client URL)")
        if "@" in u.netloc:
            # urllib would take user:password@host for the host name; and
            # etcd's JSON gateway wants a token from auth/authenticate, not
            # a password in the URL.
            raise EtcdError(f"etcd URL {redact_url(url)!r}: a user name or password in the URL is not supported "
                            "(this client does not log in to etcd): give http://HOST:PORT")
        try:
            port = u.port  # a port that is no number from 0 to 65535 raises ValueError
            if not u.hostname or port == 0:
                raise ValueError("no host" if not u.hostname else "port 0")
        except ValueError as e:
            raise EtcdError(f"etcd URL {redact_url(url)!r}: {e}: want http://HOST:PORT (etcd's client URL)") from None
        self.url = f"{u.scheme}://{u.netloc}"
        self.host = u.netloc
        self.timeout = timeout

    def call(self, path: str, body: Dict[str, Any], timeout: Optional[float] = -1.0) -> Dict[str, Any]:
        """POST ``body`` to ``/v3/<path>`` and return the answer.

        ``timeout`` bounds the request (None: no bound; default: the
        client's). An error answer raises :class:`EtcdError` with etcd's
        message and its gRPC ``code`` as ``code``.
        """
        req = urllib.request.Request(f"{self.url}/v3/{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        t = self.timeout if timeout is not None and timeout < 0 else timeout
        try:
            with urllib.request.urlopen(req, timeout=t) as resp:
                data = resp.read()
        except urllib.error.HTTPError as e:
            raw = e.read()
            try:
                d = json.loads(raw)
                msg, code = d.get("message") or d.get("error") or raw.decode(errors="replace"), d.get("code")
            except ValueError:
                msg, code = raw.decode(errors="replace").strip() or e.reason, None
            err = EtcdError(f"etcd {self.url}: {path}: {msg} (HTTP {e.code})")
            err.code = code  # type: ignore[attr-defined]
            raise err from None
        except (urllib.error.URLError, OSError) as e:
            err = EtcdError(f"etcd {self.url}: {_reason(e, self.host)}")
            r = e.reason if isinstance(e, urllib.error.URLError) else e
            err.timed_out = isinstance(r, (socket.timeout, TimeoutError))  # type: ignore[attr-defined]
            raise err from None
        try:
            d = json.loads(data)
        except ValueError:
            raise EtcdError(f"etcd {self.url}: {path}: the answer is not JSON (is this etcd's client URL, and etcd 3.4 or later?)") from None
        if not isinstance(d, dict):
            raise EtcdError(f"etcd {self.url}: {path}: the answer is not a JSON object")
        if "error" in d and "result" not in d:
            raise EtcdError(f"etcd {self.url}: {path}: {d.get('message') or d['error']}")
        return d

    def revision(self) -> int:
        """The cluster's current revision: every token it issued is at or below it."""
        d = self.call("kv/range", {"key": _b64(PREFIX.encode()), "count_only": True})
        return int(d.get("header", {}).get("revision", 0))


def _code(e: EtcdError) -> Optional[int]:
    return getattr(e, "code", None)


class Lease:
    """A held lock on a gateway's fence scope and its fencing token.

    ``granted_at`` is the time (:func:`_now`) the grant's request was sent;
    the lease is held until ``granted_at + ttl`` unless a keep-alive moves
    that deadline on.
    """

    def __init__(self, etcd: Etcd, lease_id: str, ttl: int, gateway: str, scope: str,
                 on_lost: Optional[Callable[["Lease"], None]] = None, granted_at: Optional[float] = None) -> None:
        self.etcd = etcd
        self.id = lease_id
        self.ttl = ttl
        self.gateway = gateway
        self.scope = scope
        #: The fencing token: the lock key's create_revision (0 until locked).
        self.token = 0
        #: The lock key (bytes), once locked.
        self.key = b""
        #: Set when the lease is gone; from then on nothing may be sent under it.
        self.lost = threading.Event()
        #: Why it was lost.
        self.lost_reason = ""
        self._on_lost = on_lost
        self._deadline = (_now() if granted_at is None else granted_at) + ttl
        self._keepalive_error = ""
        self._stop = threading.Event()
        self._released = False
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._keepalive, name=f"fencegate-lease-{lease_id}", daemon=True)

    def __repr__(self) -> str:
        return f"Lease(scope={self.scope!r}, token={self.token}, id={self.id}, lost={self.lost.is_set()})"

    def __enter__(self) -> "Lease":
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    @property
    def held(self) -> bool:
        """True while the lease is neither lost nor released, and its deadline has not passed."""
        self._expire()
        return not self.lost.is_set() and not self._released

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the lease is held."""
        self._expire()
        if self._released:
            raise LeaseLost(f"the lease of scope {self.scope} (token {self.token}) was released")
        if self.lost.is_set():
            raise LeaseLost(f"the lease of scope {self.scope} (token {self.token}) is lost ({self.lost_reason}): "
                            "nothing may be sent under its token; acquire the scope again")

    def _expire(self) -> None:
        """Mark the lease lost if its deadline has passed."""
        with self._lock:
            late = _now() - self._deadline
        if late >= 0:
            why = f": {self._keepalive_error}" if self._keepalive_error else ""
            self._set_lost(f"etcd answered no keep-alive sent within the last {self.ttl:g}s{why}")

    def _set_lost(self, why: str) -> None:
        with self._lock:
            if self.lost.is_set() or self._released:
                return
            self.lost_reason = why
            self.lost.set()
        if self._on_lost is not None:
            try:
                self._on_lost(self)
            except Exception:  # a callback's fault must not stop the keep-alive thread's exit
                pass

    def _keepalive(self) -> None:
        # As Go's etcd client: a keep-alive every TTL/3, and a deadline of
        # a whole TTL; unlike it, the deadline counts from when the
        # keep-alive was sent, not answered (etcd renewed it in between).
        every = max(self.ttl / 3.0, 0.2)
        next_at = self._deadline - self.ttl + every
        while True:
            with self._lock:
                deadline = self._deadline
            if self._stop.wait(max(min(next_at, deadline) - _now(), 0)):
                return
            self._expire()
            if self.lost.is_set():
                return
            sent = _now()
            if sent < next_at:
                continue
            try:
                d = self.etcd.call("lease/keepalive", {"ID": self.id}, timeout=max(min(max(every, 1.0), deadline - sent), 0.01))
            except EtcdError as e:
                if self._stop.is_set():
                    return
                self._keepalive_error = str(e)
                next_at = _now() + min(every, 0.5)  # try again soon: the deadline is near
                continue
            ttl = int(d.get("result", {}).get("TTL", 0) or 0)
            if ttl <= 0:
                self._set_lost("etcd says the lease is gone (expired or revoked)")
                return
            with self._lock:
                if _now() < self._deadline:  # an answer after the deadline is too late to count
                    self._deadline = max(self._deadline, sent + ttl)
            self._keepalive_error = ""
            next_at = _now() + every

    def _read_back(self) -> None:
        d = self.etcd.call("kv/range", {"key": _b64(self.key)})
        kvs: List[Dict[str, Any]] = d.get("kvs") or []
        if not self.held or not kvs or str(kvs[0].get("lease", "")) != self.id:
            raise LeaseLost("lease: lock obtained after the lease was lost")
        rev = int(kvs[0].get("create_revision", 0))
        if rev <= 0:
            raise EtcdError(f"etcd {self.etcd.url}: lock key has revision {rev}")
        self.token = rev

    def still_held(self) -> bool:
        """Whether the lock key still exists under this lease, asking etcd."""
        kvs = self.etcd.call("kv/range", {"key": _b64(self.key)}).get("kvs") or []
        return bool(kvs) and str(kvs[0].get("lease", "")) == self.id and int(kvs[0].get("create_revision", 0)) == self.token

    def check_fence(self, fence: int) -> None:
        """:func:`check_fence` for a stale answer under this lease, before it is released.

        Also raises :class:`~fencegate.errors.AheadError` if the fence is at
        or above this lease's token while the lock is still held: no holder
        of this etcd can have been granted a newer token meanwhile (after a
        restore without --bump-revision, etcd hands out its old tokens again).
        """
        check_fence(self.etcd, fence)
        if fence < self.token or not self.still_held():
            return
        raise AheadError(fence, self.etcd.revision(), held=self.token)

    def release(self) -> None:
        """Unlock and revoke the lease (a lease already gone is no error).

        Idempotent. Errors talking to etcd are raised after both steps were
        tried; the lease then expires by its TTL.
        """
        with self._lock:
            if self._released:
                return
            self._released = True
        self._stop.set()
        err: Optional[EtcdError] = None
        try:
            if self.key:
                self.etcd.call("lock/unlock", {"key": _b64(self.key)})
        except EtcdError as e:
            err = e
        finally:
            # Also when the unlock was interrupted (KeyboardInterrupt):
            # revoking the lease deletes the lock key with it.
            try:
                self.etcd.call("lease/revoke", {"ID": self.id})
            except EtcdError as e:
                if _code(e) != 5 and "lease not found" not in str(e):  # 5: NotFound, already gone
                    err = err or e
        if err is not None:
            raise err


def check_fence(etcd: str | Etcd, fence: int) -> None:
    """Raise :class:`~fencegate.errors.AheadError` if ``fence`` (a gateway's
    fence token, as a stale answer reports it) is above etcd's current
    revision: then no newer holder of this etcd raised it, and acquiring
    again cannot produce a token that passes it."""
    e = etcd if isinstance(etcd, Etcd) else Etcd(etcd)
    rev = e.revision()
    if fence > rev:
        raise AheadError(fence, rev)


def acquire(etcd: str | Etcd, gateway: str, scope: str, ttl: int = 10, wait: Optional[float] = None,
            on_lost: Optional[Callable[[Lease], None]] = None) -> Lease:
    """Wait for the lock of ``gateway``'s fence ``scope`` and return it with its token.

    ``scope`` is the actuator's fence scope as the gateway publishes it
    (:meth:`fencegate.Client.scope`), never the actuator's name. ``wait``
    bounds the wait for the grant and the lock together, in seconds (None:
    as long as it takes); ``on_lost`` is called (from the thread that
    notices) when the returned lease is lost.

    The lock request waits at most a TTL at a time, so that a lease lost
    while it waits is noticed (etcd's lock service puts a request made
    again at the back of the queue). A lease lost while waiting is replaced
    by a new one, queued behind a new key, as Go's ``lease.Acquire`` does.
    Raises :class:`EtcdError` (etcd unreachable, or the wait ran out) or
    :class:`LeaseLost` (the lease was lost while waiting and no new one
    could be granted, or the lease ran out before the lock came back).
    """
    if not gateway or not scope or "/" in gateway + scope:
        raise ValueError(f"lease: gateway {gateway!r} and scope {scope!r} must be non-empty and contain no /")
    if ttl <= 0:
        raise ValueError(f"lease: ttl {ttl} must be positive (seconds)")
    e = etcd if isinstance(etcd, Etcd) else Etcd(etcd)
    name = lock_name(gateway, scope)
    wait_for = _Wait(e, name, wait)
    lost = ""  # why the last waiting lease was lost
    while True:
        left = wait_for.left()
        try:
            lease = _grant(e, gateway, scope, ttl, left)
        except EtcdError as err:
            if not lost:
                raise
            raise LeaseLost(f"lease: the lease was lost while waiting for the lock of {name} ({lost}), "
                            f"and no new one was granted: {err}") from None
        try:
            if _lock(e, lease, name, wait_for):
                lease._on_lost = on_lost  # not before: a lease lost while waiting is never the caller's
                lease._read_back()
                return lease
            lost = lease.lost_reason
        except BaseException:
            _abandon(lease)
            raise
        _abandon(lease)


class _Wait:
    """acquire's bound on its wait, for the grant and the lock together."""

    def __init__(self, e: Etcd, name: str, wait: Optional[float]) -> None:
        self.e, self.name, self.wait = e, name, wait
        self.until = None if wait is None else time.monotonic() + wait

    def left(self) -> Optional[float]:
        """Seconds left (None: no bound); EtcdError once none are."""
        if self.until is None:
            return None
        left = self.until - time.monotonic()
        if left <= 0:
            raise EtcdError(f"etcd {self.e.url}: lock {self.name}: not granted within {self.wait:g}s (held by another?)")
        return left


def _grant(e: Etcd, gateway: str, scope: str, ttl: int, left: Optional[float]) -> Lease:
    """A new lease, kept alive from now on; ``left`` bounds the request."""
    sent = _now()
    d = e.call("lease/grant", {"TTL": ttl}, timeout=-1.0 if left is None else min(left, e.timeout))
    lease_id = str(d.get("ID", ""))
    if not lease_id or lease_id == "0":
        raise EtcdError(f"etcd {e.url}: lease/grant: no lease ID in the answer ({d.get('error', '')})")
    lease = Lease(e, lease_id, int(d.get("TTL", ttl) or ttl), gateway, scope, granted_at=sent)
    lease._thread.start()
    return lease


def _lock(e: Etcd, lease: Lease, name: str, wait_for: _Wait) -> bool:
    """Lock ``name`` under ``lease``: True once locked, False if the lease was lost first."""
    mine = f"{name}/{int(lease.id):x}".encode()  # the key etcd's lock service makes for this lease
    while lease.held:
        left = wait_for.left()
        try:
            d = e.call("lock/lock", {"name": _b64(name.encode()), "lease": lease.id},
                       timeout=lease.ttl if left is None else min(left, lease.ttl))
        except EtcdError as err:
            if _code(err) == 5 or "lease not found" in str(err):  # 5: NotFound
                lease._set_lost("etcd says the lease is gone (expired or revoked)")
                return False
            if not getattr(err, "timed_out", False):
                raise
            _deleted(e, mine)
            continue
        lease.key = base64.b64decode(d.get("key", ""))
        if not lease.key:
            raise EtcdError(f"etcd {e.url}: lock {name}: no key in the answer")
        return True
    return False


def _deleted(e: Etcd, key: bytes, within: float = 1.0) -> None:
    """Wait up to ``within`` s for ``key`` to be deleted.

    etcd's lock service deletes the key of a lock request whose client gave
    up. A new request that found it still there would wait behind it, and
    be granted a key that is gone.
    """
    end = time.monotonic() + within
    while time.monotonic() < end:
        if int(e.call("kv/range", {"key": _b64(key), "count_only": True}).get("count", 0) or 0) == 0:
            return
        time.sleep(0.02)


def _abandon(lease: Lease) -> None:
    """Release a lease that acquire will not return; etcd's faults are left to the TTL."""
    try:
        lease.release()
    except EtcdError:
        pass
