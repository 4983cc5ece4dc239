"""Malformed lines on the agent's control socket, for ``make fuzz``.

The control socket is root-only, so whoever writes to it could stop the agent anyway; what is
checked here is that a buggy or confused local client costs its own connection only, and that
an honest ``status`` request is answered between the bad ones.
"""

from __future__ import annotations

import contextlib
import json
import random
import socket
from collections import Counter

IO_TIMEOUT = 5.0


class ControlAttacker:
    """Sends one malformed request per ``attack()`` and checks ``status`` every few."""

    def __init__(self, path: str, rng: random.Random) -> None:
        self.path = path
        self.rng = rng
        self.tally: Counter[str] = Counter()

    def _payloads(self) -> list[tuple[str, bytes]]:
        rng = self.rng
        return [
            ("deep_line", b'{"a":' * 50_000 + b"1" + b"}" * 50_000 + b"\n"),
            ("long_line", b'{"op":"status","pad":"' + b"a" * (2 << 20)),
            ("random_bytes", rng.randbytes(rng.randrange(1, 2048)) + b"\n"),
            ("not_an_object", b"[1,2,3]\n"),
            ("unknown_op", b'{"id":1,"op":"reboot"}\n'),
            ("wrong_types", b'{"id":"x","op":5}\n'),
            ("send_bad_fields", b'{"id":2,"op":"send","path":7,"to":["a"]}\n'),
            ("perf_bad_fields", b'{"id":3,"op":"perf","to":"","bytes":-5,"duration":"x"}\n'),
            ("half_line", b'{"id":4,"op":"sta'),
        ]

    def attack(self) -> None:
        name, payload = self.rng.choice(self._payloads())
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(IO_TIMEOUT)
                sock.connect(self.path)
                with contextlib.suppress(OSError):
                    sock.sendall(payload)
                    if name == "half_line":
                        sock.shutdown(socket.SHUT_WR)
                self.tally[f"{name}:{_first_reply(sock)}"] += 1
        except OSError as exc:
            self.tally[f"{name}:connect_failed:{type(exc).__name__}"] += 1

    def status_answers(self) -> bool:
        """Whether an honest ``status`` request gets an ``ok`` reply now."""
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(IO_TIMEOUT)
                sock.connect(self.path)
                sock.sendall(b'{"id":1,"op":"status"}\n')
                answered = _first_reply(sock) == "ok"
        except OSError:
            answered = False
        self.tally[f"status:{'ok' if answered else 'failed'}"] += 1
        return answered


def _first_reply(sock: socket.socket) -> str:
    """``ok``, ``error:<code>``, ``closed``, ``timeout`` or ``reset``."""
    buffer = b""
    try:
        while b"\n" not in buffer:
            chunk = sock.recv(1 << 20)
            if not chunk:
                return "closed"
            buffer += chunk
    except TimeoutError:
        return "timeout"
    except OSError:
        return "reset"
    try:
        reply = json.loads(buffer.split(b"\n", 1)[0])
    except ValueError:
        return "unparsable_reply"
    if reply.get("ok"):
        return "ok"
    error = reply.get("error")
    code = error.get("code") if isinstance(error, dict) else error
    return f"error:{code}"
