"""Signing commands with a controller's Ed25519 key.

The key is the PKCS#8 PEM file that ``gateway keygen --out PATH`` writes
(``PATH.key``). A signature covers the command's canonical bytes
(:func:`fencegate.wire.canonical`) for one gateway: pure Ed25519, no
pre-hashing, deterministic.
"""

from __future__ import annotations

import base64
import os
from typing import Union

try:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
except ImportError as e:  # pragma: no cover - depends on the installation
    raise ImportError(f"fencegate needs cryptography: on Debian, apt-get install python3-cryptography "
                      f"and run Debian's /usr/bin/python3; elsewhere, pip install cryptography ({e})") from None

from .errors import KeyFileError
from .wire import Command, canonical

__all__ = ["Signer", "read_private_key", "public_key_line"]

_WANT = "want the PATH.key that gateway keygen --out PATH wrote"


def read_private_key(path: Union[str, "os.PathLike[str]"]) -> Ed25519PrivateKey:
    """Read a controller's private key (PKCS#8 PEM "PRIVATE KEY", Ed25519).

    Its errors say what is wrong with the file, never what it holds.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise KeyFileError(f"signing key {path}: {e.strerror or e}") from None
    if b"-----BEGIN" not in data:
        if data.strip().startswith(b"ed25519:"):
            raise KeyFileError(f"signing key {path} is a public key; {_WANT}")
        raise KeyFileError(f"signing key {path} is not a PEM file; {_WANT}")
    if b"-----BEGIN PRIVATE KEY-----" not in data:
        raise KeyFileError(f"signing key {path} is not a PEM \"PRIVATE KEY\" (PKCS#8); {_WANT}")
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError):
        raise KeyFileError(f"signing key {path}: not a PKCS#8 private key; {_WANT}") from None
    if not isinstance(key, Ed25519PrivateKey):
        raise KeyFileError(f"signing key {path} holds a {type(key).__name__}, not an Ed25519 key; {_WANT}")
    return key


def public_key_line(key: Ed25519PrivateKey) -> str:
    """The public key of ``key`` as the gateway's ``public_key:`` takes it."""
    raw = key.public_key().public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return "ed25519:" + base64.b64encode(raw).decode("ascii")


class Signer:
    """A controller's name (``controllers: name`` in the gateway's
    configuration) and its private key."""

    def __init__(self, name: str, key: Union[Ed25519PrivateKey, str, "os.PathLike[str]"]) -> None:
        if not name:
            raise ValueError("a signer needs the controller's name, as the gateway's configuration has it (controllers: name)")
        self.name = name
        self.key = key if isinstance(key, Ed25519PrivateKey) else read_private_key(key)

    @classmethod
    def from_seed(cls, name: str, seed: bytes) -> "Signer":
        """A signer from a 32-byte Ed25519 seed (for test vectors)."""
        return cls(name, Ed25519PrivateKey.from_private_bytes(seed))

    def sign(self, gateway: str, c: Command) -> bytes:
        """The 64-byte signature of ``c`` for ``gateway``; sign after the id is set."""
        return self.key.sign(canonical(gateway, c))

    def public_key(self) -> str:
        """The public key line (``ed25519:<base64>``)."""
        return public_key_line(self.key)
