"""What a hostile host on the fabric sends an agent: the attacker half of ``make fuzz``.

It runs in its own namespace as a separate process (``python -m tools.fuzz.attacks``) and
speaks the agent's side channel and UDP 4791 with nothing but the standard library, so the same
attacks can be pointed at any build of the agent. Each attack is one bounded exchange; the
answers it gets are tallied (``welcome``, ``error:<code>``, ``closed``, ...) and printed as
JSON when the time is up.

Attacks on the side channel: a line nested 100,000 deep, a line longer than any limit, random
bytes, hellos with one field mutated, forty hellos at once for regions larger than the
receiver's caps, idle openers holding setup slots, a file hello abandoned after its welcome, a
commit that lies about the digest, a reset right after connecting. On UDP 4791: bursts of
random and half-valid datagrams.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import random
import socket
import struct
import sys
import time
from collections import Counter
from collections.abc import Callable, Sequence

SIDE_CHANNEL_PORT = 18515
MRC_PORT = 4791
#: Seconds any one read or write of an attack may wait.
IO_TIMEOUT = 5.0
#: Opcodes the agent's codec knows (and 0x00, which it does not), for half-valid datagrams.
OPCODES = (0x00, 0x06, 0x0A, 0x11, 0xC6, 0xCA, 0xD1, 0xDC, 0xDD, 0xDE)
MiB = 1 << 20
GiB = 1 << 30


def hello(source: str, length: int, purpose: str = "sink", name: str | None = None) -> dict:
    """A well-formed hello from ``source`` for a region of ``length`` bytes."""
    message: dict = {
        "type": "hello",
        "v": 1,
        "qp": random.randrange(1, 1 << 24),
        "psn": random.randrange(0, 1 << 24),
        "planes": [source],
        "purpose": purpose,
        "length": length,
    }
    if name is not None:
        message["name"] = name
    return message


def line(message: dict) -> bytes:
    """``message`` as one JSON line."""
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


#: Values a mutated hello field takes: wrong types, out of range, hostile strings.
JUNK: tuple[object, ...] = (
    None,
    -1,
    0,
    1 << 24,
    1 << 64,
    10**40,
    1.5,
    "",
    "x" * 5000,
    "../../etc/passwd",
    "a\x00b",
    "/abs/path",
    [],
    [1, 2, 3],
    {"a": {"b": {}}},
    True,
    "file",
    "sink",
    ["999.1.1.1"],
    ["::1", "10.0.0.1", "nonsense"],
)


class Attacker:
    """Runs random attacks against ``target`` from ``sources`` (addresses of this host)."""

    def __init__(self, target: str, sources: Sequence[str], rng: random.Random) -> None:
        self.target = target
        self.sources = list(sources)
        self.rng = rng
        self.tally: Counter[str] = Counter()
        self.attacks: dict[str, Callable[[], None]] = {
            "deep_line": self.deep_line,
            "long_line": self.long_line,
            "random_bytes": self.random_bytes,
            "mutated_hello": self.mutated_hello,
            "forty_large_hellos": self.forty_large_hellos,
            "forty_1g_hellos": lambda: self.forty_large_hellos(GiB),
            "idle_openers": self.idle_openers,
            "abandoned_file": self.abandoned_file,
            "lying_commit": self.lying_commit,
            "reset": self.reset,
            "udp_garbage": self.udp_garbage,
        }

    # --- plumbing -------------------------------------------------------------------------

    def _source(self) -> str:
        return self.rng.choice(self.sources)

    def _connect(self, source: str | None = None) -> socket.socket:
        return socket.create_connection(
            (self.target, SIDE_CHANNEL_PORT),
            timeout=IO_TIMEOUT,
            source_address=(source or self._source(), 0),
        )

    def _answer(self, sock: socket.socket) -> str:
        """The first reply's kind (``welcome``, ``error:<code>``), or ``closed``/``timeout``."""
        buffer = b""
        try:
            while b"\n" not in buffer:
                chunk = sock.recv(65536)
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
        if reply.get("type") == "error":
            return f"error:{reply.get('code')}"
        return str(reply.get("type"))

    def _exchange(self, name: str, payload: bytes, source: str | None = None) -> None:
        try:
            with self._connect(source) as sock:
                with contextlib.suppress(OSError):
                    sock.sendall(payload)
                self.tally[f"{name}:{self._answer(sock)}"] += 1
        except OSError as exc:
            self.tally[f"{name}:connect_failed:{type(exc).__name__}"] += 1

    # --- the attacks ----------------------------------------------------------------------

    def deep_line(self) -> None:
        depth = 100_000
        self._exchange("deep_line", b"[" * depth + b"]" * depth + b"\n")

    def long_line(self) -> None:
        self._exchange("long_line", b'{"type":"hello","pad":"' + b"a" * (2 * MiB))

    def random_bytes(self) -> None:
        size = self.rng.randrange(1, 4096)
        self._exchange("random_bytes", self.rng.randbytes(size) + b"\n")

    def mutated_hello(self) -> None:
        source = self._source()
        message = hello(source, self.rng.randrange(1, 4 * MiB), self.rng.choice(("sink", "file")))
        message["name"] = "fuzz.bin"
        field = self.rng.choice([*message, "extra"])
        message[field] = self.rng.choice(JUNK)
        self._exchange("mutated_hello", line(message), source)

    def forty_large_hellos(self, length: int | None = None) -> None:
        """The attack that once grew an agent to 3.9 GB: forty concurrent region requests
        (1 GiB, 64 or 16 MiB each), held open until each is answered, the welcomed ones a
        second longer."""
        if length is None:
            length = self.rng.choice((1 * GiB, 64 * MiB, 16 * MiB))
        name = "forty_1g_hellos" if length == GiB else "forty_large_hellos"
        socks: list[socket.socket] = []
        try:
            for _ in range(40):
                try:
                    sock = self._connect()
                    sock.sendall(line(hello(sock.getsockname()[0], length)))
                    socks.append(sock)
                except OSError as exc:
                    self.tally[f"{name}:connect_failed:{type(exc).__name__}"] += 1
            for sock in socks:
                self.tally[f"{name}:{self._answer(sock)}"] += 1
            time.sleep(1.0)
        finally:
            for sock in socks:
                sock.close()

    def idle_openers(self) -> None:
        """Twenty connections that never say hello, held for a second."""
        socks: list[socket.socket] = []
        source = self._source()
        try:
            for _ in range(20):
                try:
                    socks.append(self._connect(source))
                except OSError as exc:
                    self.tally[f"idle_openers:connect_failed:{type(exc).__name__}"] += 1
            time.sleep(1.0)
            for sock in socks:
                sock.settimeout(0.05)
                self.tally[f"idle_openers:{self._answer(sock)}"] += 1
        finally:
            for sock in socks:
                sock.close()

    def abandoned_file(self) -> None:
        """A file hello, then gone after the welcome: the receiver must remove its part file."""
        source = self._source()
        name = f"abandoned-{self.rng.randrange(1 << 30)}.bin"
        self._exchange("abandoned_file", line(hello(source, 8 * MiB, "file", name)), source)

    def lying_commit(self) -> None:
        """A welcomed file transfer whose commit arrives with no data and a made-up digest."""
        source = self._source()
        try:
            with self._connect(source) as sock:
                sock.sendall(line(hello(source, 4096, "file", "lie.bin")))
                first = self._answer(sock)
                if first == "welcome":
                    digest = hashlib.sha256(self.rng.randbytes(32)).hexdigest()
                    sock.sendall(line({"type": "commit", "sha256": digest}))
                    self.tally[f"lying_commit:{self._answer(sock)}"] += 1
                else:
                    self.tally[f"lying_commit:hello:{first}"] += 1
        except OSError as exc:
            self.tally[f"lying_commit:connect_failed:{type(exc).__name__}"] += 1

    def reset(self) -> None:
        try:
            sock = self._connect()
        except OSError:
            self.tally["reset:connect_failed"] += 1
            return
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        self.tally["reset:sent"] += 1

    def udp_garbage(self) -> None:
        """A burst of 2,000 datagrams: random bytes, and BTH-shaped headers with random tails."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as sock:
            sock.bind((self._source(), 0))
            for _ in range(2000):
                size = self.rng.choice((0, 1, 11, 12, 13, 16, 28, 40, 60, 300, 1100, 1472))
                if self.rng.random() < 0.5:
                    body = self.rng.randbytes(size)
                else:
                    opcode = self.rng.choice(OPCODES)
                    header = struct.pack(
                        "!BBHII",
                        opcode,
                        self.rng.randrange(256),
                        0xFFFF,
                        self.rng.randrange(1 << 24),
                        self.rng.randrange(1 << 32),
                    )
                    body = (header + self.rng.randbytes(size))[:size]
                with contextlib.suppress(OSError):
                    sock.sendto(body, (self.target, MRC_PORT))
            self.tally["udp_garbage:datagrams"] += 2000

    # --- the loop -------------------------------------------------------------------------

    def run_until(self, deadline: float, only: Sequence[str] = ()) -> None:
        """Random attacks until ``deadline`` (``time.monotonic``); every attack at least once."""
        names = list(only) or list(self.attacks)
        unknown = sorted(set(names) - set(self.attacks))
        if unknown:
            raise SystemExit(f"unknown attacks: {', '.join(unknown)}")
        for name in names:
            self.attacks[name]()
        while time.monotonic() < deadline:
            self.attacks[self.rng.choice(names)]()


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="tools.fuzz.attacks", description=__doc__.splitlines()[0])
    parser.add_argument("--target", required=True, help="the agent's plane address")
    parser.add_argument("--source", action="append", required=True, help="address to attack from")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds to attack")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--only", action="append", default=[], help="run just this attack")
    args = parser.parse_args(argv)
    random.seed(args.seed)
    attacker = Attacker(args.target, args.source, random.Random(args.seed))
    attacker.run_until(time.monotonic() + args.duration, args.only)
    json.dump(dict(sorted(attacker.tally.items())), sys.stdout)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
