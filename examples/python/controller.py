#!/usr/bin/env python3
"""An example fencegate controller in Python, the pattern to copy.

It learns the actuator's fence scope from the gateway, holds an etcd lease
on that scope, raises the gateway's fence as soon as it is granted (a
fence-only command), then switches the actuator on and off in a loop with
a growing seq. A stale answer is normal recovery: it rereads the state,
lets go of its lease and acquires a new one (with a higher token) before it
acts again, unless the gateway's fence is above every revision etcd has
issued (etcd was reset or restored): then no new lease can help, and it
stops with the reason. SIGINT or SIGTERM stop it cleanly: it releases its lease, so
the next controller need not wait for the lease to expire.

    python3 examples/python/controller.py --etcd http://127.0.0.1:2379 \\
        --broker tcp://127.0.0.1:1883 --gateway sim --actuator pump

Run two against the same actuator: one acts, the other waits for the lock.
Stop the active one (kill -STOP) for longer than the TTL and watch the
other take over; continue it (kill -CONT) and watch its next command be
refused as stale. It is the Python twin of examples/controller (Go).
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Optional

if importlib.util.find_spec("fencegate") is None:  # run from a checkout: the package lives in python/
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from fencegate import (Client, Command, EtcdError, FencegateError, Heartbeat, Lease, LeaseLost, Seq, Signer,
                       StaleError, Timeout, acquire)

log = logging.getLogger("controller")


class Stop(BaseException):
    """SIGINT or SIGTERM: stop, releasing the lease on the way out."""


_stopping = False
_shielded = False


def _on_signal(_signum: int, _frame: Optional[FrameType]) -> None:
    """Raise Stop in whatever the main thread waits for (the lock, an
    answer, a pause), once; not while the lease is being released."""
    global _stopping
    if not _stopping:
        _stopping = True
        if not _shielded:
            raise Stop


def release(lease: Lease) -> None:
    """Release the lease, unlock and revoke both, whatever signal comes."""
    global _shielded
    _shielded = True
    try:
        lease.release()
    except EtcdError as e:
        log.warning("release: %s (the lease expires by its TTL)", e)
    finally:
        _shielded = False
    if _stopping:
        raise Stop


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] + " See the module's comment for how to play with it.")
    p.add_argument("--etcd", default="http://127.0.0.1:2379", help="etcd's client URL (default %(default)s)")
    p.add_argument("--broker", default="tcp://127.0.0.1:1883", help="MQTT broker: tcp://HOST:PORT or ssl://HOST:PORT (default %(default)s)")
    p.add_argument("--gateway", default="sim", help="gateway id (default %(default)s)")
    p.add_argument("--actuator", default="pump", help="actuator to drive (default %(default)s)")
    p.add_argument("--ttl", type=int, default=5, help="lease TTL in seconds (default %(default)s)")
    p.add_argument("--period", type=float, default=1.0, help="seconds between commands (default %(default)s)")
    p.add_argument("--heartbeat", type=float, default=0.0,
                   help="send a fence-only heartbeat this often (seconds) while holding the lease, for a scope with a dead-man; 0: none")
    p.add_argument("--name", default=f"controller-{os.getpid()}", help="this controller's name, for the audit trail (default controller-PID)")
    p.add_argument("--key", help="sign commands with this private key (gateway keygen's PATH.key); with --signer")
    p.add_argument("--signer", help="the controller's name in the gateway's configuration (controllers: name); with --key")
    p.add_argument("--username", help="MQTT user name (password from --password-file or $FENCEGATE_MQTT_PASSWORD)")
    p.add_argument("--password-file", help="file holding the MQTT password, alone on one line")
    p.add_argument("--tls-ca", help="TLS: CA certificates (PEM) for the broker's certificate")
    p.add_argument("--tls-cert", help="TLS: client certificate (PEM), with --tls-key")
    p.add_argument("--tls-key", help="TLS: the client certificate's private key (PEM)")
    a = p.parse_args()
    logging.basicConfig(level=logging.INFO, stream=sys.stdout, format=f"%(asctime)s %(levelname)s {a.name}: %(message)s")
    if bool(a.key) != bool(a.signer):
        log.error("give both --key and --signer, or neither")
        return 64
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    try:
        signer = Signer(a.signer, a.key) if a.key else None
        with Client(a.broker, a.gateway, username=a.username, password_file=a.password_file, ca_file=a.tls_ca,
                    cert_file=a.tls_cert, key_file=a.tls_key, signer=signer) as gw:
            run(gw, a)
    except Stop:
        log.info("stopped")
        return 0
    except FencegateError as e:
        log.error("stopped: %s", e)
        return 1
    return 0


def run(gw: Client, a: argparse.Namespace) -> None:
    # The lease belongs to the actuator's fence scope, as the gateway
    # publishes it: actuators that share a scope share one lease.
    scope = gw.scope(a.actuator, 30)
    while True:
        log.info("waiting for the lock of scope %s", scope)
        try:
            lease = acquire(a.etcd, a.gateway, scope, ttl=a.ttl)
        except (EtcdError, LeaseLost) as e:
            log.warning("cannot acquire; retrying: %s", e)
            sleep(1)
            continue
        log.info("granted token %d", lease.token)
        try:
            hold(gw, lease, a)
        except StaleError as e:
            # Normal recovery: someone newer holds the scope. Reread, then
            # acquire again; the new grant's token is higher. Unless the
            # fence is above everything etcd has issued (asked before the
            # lease is released): then no grant can pass it, and looping
            # would only hide that.
            try:
                lease.check_fence(e.fence.token)
            except EtcdError as ce:
                log.warning("cannot check the fence against etcd: %s", ce)
            st = gw.reread(a.actuator, e.answer)
            log.warning("stale (fence %s, %s); reread: %s is %s, fence %s; acquiring again",
                        e.fence, e.answer.error, a.actuator, st.state, st.fence)
        except LeaseLost:
            log.warning("lease lost; stopping until granted again")
        except FencegateError as e:
            log.error("giving up the lease: %s", e)
            sleep(1)
        finally:
            release(lease)


def hold(gw: Client, lease: Lease, a: argparse.Namespace) -> None:
    """Act while the lease lasts: first a fence-only command, so that the
    gateway refuses every older holder's command from now on, then one
    set-point per period with a growing seq."""
    seq = Seq()  # shared with the heartbeats: every pair is new
    hb: Optional[Heartbeat] = None
    try:
        send(gw, lease, seq, Command(a.actuator, lease.token, 0, holder=a.name))
        if a.heartbeat > 0:
            # After the first command: a heartbeat first would take seq 1,
            # and the fence-only command at seq 0 would be stale.
            hb = Heartbeat(gw, lease, a.actuator, seq, a.heartbeat, holder=a.name,
                           on_error=lambda e: log.warning("heartbeats stopped: %s", e)).start()
        now = gw.state(a.actuator)
        state = "off" if now is not None and now.state == "on" else "on"
        while True:
            if lease.lost.wait(a.period):
                raise LeaseLost(lease.lost_reason)
            send(gw, lease, seq, Command(a.actuator, lease.token, seq.next(), state, holder=a.name))
            state = "off" if state == "on" else "on"
    finally:
        if hb is not None:
            hb.stop()


def send(gw: Client, lease: Lease, seq: Seq, c: Command) -> None:
    """Send one command. On a timeout, send the same command again (same id,
    token and seq): if the first was applied, the copy is answered
    duplicate and nothing is driven twice. A stale answer whose fence has
    our own token means a later command of ours (a heartbeat) got there
    first: the scope is still ours. A fence-only command has done its part
    then; a set-point goes again as a new command above the fence (the
    next seq, a new id), so that it is applied. Any other stale answer is
    raised: the scope is someone else's."""
    c = Command(c.actuator, c.token, c.seq, c.state, id=f"{c.holder}-{c.token}-{c.seq}", holder=c.holder)
    timeouts = 0
    while True:
        try:
            answer = gw.send(c, timeout=5, lease=lease)
        except Timeout:
            timeouts += 1
            if timeouts > 3:
                raise
            log.warning("no answer; sending the same command again (id %s)", c.id)
            continue
        except StaleError as e:
            if e.fence.token != lease.token:
                raise
            seq.skip_to(e.fence.seq)
            if not c.state:
                log.warning("stale under our own token (fence %s): the fence is ours already", e.fence)
                return
            s = seq.next()
            c = Command(c.actuator, c.token, s, c.state, id=f"{c.holder}-{c.token}-{s}", holder=c.holder)
            log.warning("stale under our own token (fence %s): sending %s again above it (seq %d)", e.fence, c.state, s)
            continue
        log.info("%s: %s token %d seq %d, fence %s", answer.outcome, c.state or "fence", c.token, c.seq, answer.fence)
        return


def sleep(seconds: float) -> None:
    time.sleep(seconds)


if __name__ == "__main__":
    sys.exit(main())
