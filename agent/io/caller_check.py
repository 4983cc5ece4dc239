"""Who may open a side channel: an address allow-list and an HMAC over the hello.

The side channel is plain TCP on the fabric, so any host there can reach it. Two optional
checks keep other tenants of a lab out:

- ``--allow PREFIX`` (repeatable): a connection from outside every prefix is refused at
  accept, before it can cost more than a socket;
- ``--secret-file``: a shared secret both ends read. The client adds
  ``"auth": {"t": UNIX_SECONDS, "nonce": HEX, "mac": HEX}`` to its hello, the MAC being
  HMAC-SHA256 over a fixed label, the time, the nonce and the hello's other fields in
  canonical JSON. The server accepts a MAC only within ``AUTH_WINDOW_S`` of its clock and
  only once per nonce, so a hello seen on the wire cannot be replayed or altered.

Neither encrypts the transfer: see ``docs/security.md`` for what they do and do not stop.

Local callers (the control socket) are told apart by the kernel's word: ``peer_credentials``
(``SO_PEERCRED``) gives the connecting process's user, and ``is_privileged`` says whether it
may use what only an operator may (sending files, the controller API): root, or the user the
agent runs as, who owns the socket.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import json
import os
import secrets
import socket
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.io.errors import UnauthorizedError, UsageError

#: How far a hello's time may be from the server's clock, either way.
AUTH_WINDOW_S = 120
#: Shortest secret accepted: 16 bytes (128 bits).
MIN_SECRET_BYTES = 16
#: Nonces remembered at most; more fresh hellos than this within the window are refused.
MAX_REMEMBERED_NONCES = 65536
_LABEL = b"mrc-side-channel-hello-v1\n"
_NONCE_HEX = 32

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def parse_allow(prefixes: Iterable[str]) -> tuple[Network, ...]:
    """``--allow`` values as networks; ``UsageError`` naming a bad one."""
    networks: list[Network] = []
    for text in prefixes:
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise UsageError(f"--allow {text!r} is not an address or prefix") from None
    return tuple(networks)


def allowed(address: str, networks: tuple[Network, ...]) -> bool:
    """Whether ``address`` (as ``accept`` gives it) lies in one of ``networks`` (all are
    allowed when there are none). IPv4-mapped IPv6 addresses count as their IPv4 form."""
    if not networks:
        return True
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return any(ip.version == net.version and ip in net for net in networks)


def load_secret(path: str) -> bytes:
    """The shared secret in ``path`` (surrounding whitespace dropped); ``UsageError`` when it
    cannot be read, is shorter than ``MIN_SECRET_BYTES`` or is open to group or others (as ssh
    refuses such a key: a secret others can read keeps no one out)."""
    try:
        mode = Path(path).stat().st_mode
        secret = Path(path).read_bytes().strip()
    except OSError as exc:
        raise UsageError(f"--secret-file {path}: {exc.strerror}") from None
    if mode & 0o077:
        raise UsageError(
            f"--secret-file {path}: readable by others (mode {mode & 0o777:o}); chmod 600 it"
        )
    if len(secret) < MIN_SECRET_BYTES:
        raise UsageError(
            f"--secret-file {path}: the secret must be at least {MIN_SECRET_BYTES} bytes"
        )
    return secret


def _mac(secret: bytes, fields: Mapping[str, Any], when: int, nonce: str) -> str:
    body = json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()
    message = _LABEL + f"{when}\n{nonce}\n".encode() + body
    return hmac.new(secret, message, hashlib.sha256).hexdigest()


def sign_hello(hello: Mapping[str, Any], secret: bytes, now: float) -> dict[str, Any]:
    """``hello`` with its ``auth`` field added."""
    fields = {key: value for key, value in hello.items() if key != "auth"}
    when = int(now)
    nonce = secrets.token_hex(_NONCE_HEX // 2)
    return {**fields, "auth": {"t": when, "nonce": nonce, "mac": _mac(secret, fields, when, nonce)}}


class HelloVerifier:
    """Checks hellos against one secret and remembers the nonces it accepted."""

    def __init__(self, secret: bytes) -> None:
        self._secret = secret
        self._seen: dict[str, float] = {}

    def verify(self, hello: Mapping[str, Any], now: float) -> None:
        """Return if ``hello`` carries a fresh, valid MAC; ``UnauthorizedError`` otherwise."""
        auth = hello.get("auth")
        if not isinstance(auth, dict):
            raise UnauthorizedError("this agent requires authenticated hellos (--secret-file)")
        when, nonce, mac = auth.get("t"), auth.get("nonce"), auth.get("mac")
        if type(when) is not int or not isinstance(nonce, str) or not isinstance(mac, str):
            raise UnauthorizedError("malformed hello authentication")
        if len(nonce) != _NONCE_HEX or len(mac) != 64:
            raise UnauthorizedError("malformed hello authentication")
        if abs(now - when) > AUTH_WINDOW_S:
            raise UnauthorizedError(
                f"hello authentication is {abs(now - when):.0f} s off this agent's clock "
                f"(at most {AUTH_WINDOW_S} s)"
            )
        fields = {key: value for key, value in hello.items() if key != "auth"}
        if not hmac.compare_digest(mac, _mac(self._secret, fields, when, nonce)):
            raise UnauthorizedError("hello authentication failed (a different --secret-file?)")
        self._forget_older_than(now - AUTH_WINDOW_S)
        if nonce in self._seen:
            raise UnauthorizedError("hello authentication replayed")
        if len(self._seen) >= MAX_REMEMBERED_NONCES:
            raise UnauthorizedError("too many authenticated hellos in the window; try again")
        self._seen[nonce] = float(when)

    def _forget_older_than(self, limit: float) -> None:
        """Drop nonces past the window, once the table is full (a nonce outside the window
        is refused by its time anyway)."""
        if len(self._seen) >= MAX_REMEMBERED_NONCES:
            self._seen = {n: t for n, t in self._seen.items() if t >= limit}


def secret_fingerprint(secret: bytes) -> str:
    """A short, non-reversible name for a secret, for logs and status."""
    return hashlib.sha256(b"fingerprint\n" + secret).hexdigest()[:12]


@dataclass(frozen=True, slots=True)
class Credentials:
    """The process at the other end of a Unix socket, as the kernel saw it connect."""

    pid: int
    uid: int
    gid: int


_UCRED = struct.Struct("3i")


def peer_credentials(sock: socket.socket) -> Credentials | None:
    """The peer of a connected Unix socket (None for another kind of socket)."""
    if sock.family != socket.AF_UNIX:
        return None
    try:
        raw = sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _UCRED.size)
    except OSError:
        return None
    pid, uid, gid = _UCRED.unpack(raw)
    return Credentials(pid, uid, gid)


def is_privileged(credentials: Credentials | None, owner_uid: int | None = None) -> bool:
    """Whether a local caller is root or the socket's owner (default: this process's user)."""
    if credentials is None:
        return False
    owner = os.geteuid() if owner_uid is None else owner_uid
    return credentials.uid in (0, owner)
