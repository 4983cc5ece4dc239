"""The TCP side channel two agents use to set up a connection, as perftest does for RDMA.

MRC packets carry QP numbers, PSNs, R_Keys and addresses that both ends must agree on before
the first packet; RDMA tools exchange them over a TCP socket, and so do the agents. The TCP
connection also scopes the MRC connection: when it closes, both sides tear theirs down and the
receiver frees the memory it registered, so nothing outlives a crashed peer.

Exchange (JSON lines, see ``agent.io.json_lines``; client = the side that sends data)::

    client -> server  {"type": "hello", "v": 1, "qp", "psn", "planes": [addr, ...],
                       "purpose": "file" | "sink", "length", "name"?, "transport"?,
                       "extra_qps": [[qp, psn], ...]?, "selective_repeat": true?}
    server -> client  {"type": "welcome", "v": 1, "qp", "psn", "planes", "rkey", "va", "length",
                       "transport", "extra_qps"?, "selective_repeat"?}
                  or  {"type": "error", "code", "message"}
    ... MRC traffic on UDP 4791: the client writes into [va, va + length) with rkey ...
    file:  client -> server {"type": "commit", "sha256"}       once every write was ACKed
           server -> client {"type": "committed", "sha256", "path", "length"} or an error
    sink:  client -> server {"type": "bye"}
           server -> client {"type": "farewell", "receiver": {statistics}}

``planes`` lists each side's plane addresses in plane order; both must have as many planes.
A ``file`` transfer asks for a region of the file's size and ends with the receiver's digest of
what it wrote to disk; a ``sink`` (mrc-perf) asks for one message's worth of region that every
write overwrites, as ib_write_bw does.

``transport`` says which QP the receiver sets up: ``mrc`` (the default when absent) or ``roce``,
a standard RoCEv2 RC QP (``agent.roce``); the welcome repeats it, so a sender whose peer did
not set up what it asked for stops before sending a packet. Either way the QP numbers, PSNs
and region exchanged are the same. A RoCE transfer striped over several QPs
(``agent.io.qp_striping``) offers the QPs after the first in ``extra_qps``, each with its first
PSN, and the welcome answers with as many of its own, in the same order: QP *i* of one side
talks to QP *i* of the other, both on plane *i* mod *planes*. ``selective_repeat`` asks for
responders that keep what arrives early (``agent.roce.selective_responder``); the welcome
repeats it too. Both are absent for one go-back-N QP, and refused for MRC.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from agent.io.errors import ErrorCode, ProtocolError
from agent.io.fields import (
    get_dict,
    get_int,
    get_optional_str,
    get_str,
    get_str_list,
)
from agent.io.json_lines import Message
from agent.io.transport import MAX_QPS, WIRE_TRANSPORTS, Engine

#: Default TCP port of the side channel: perftest's (ib_write_bw and friends).
SIDE_CHANNEL_PORT = 18515
#: Version of this exchange; both sides must speak the same one.
PROTOCOL_VERSION = 1
#: Most planes a host may announce (the MRC notes' NICs have 8 ports; room to spare).
MAX_PLANES = 64
_U24 = 0xFFFFFF
_U32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1
_HEX_DIGITS = frozenset("0123456789abcdef")

#: A QP number and the first PSN it sends.
QpOffer = tuple[int, int]


class Purpose(Enum):
    """What the client's writes are for."""

    #: A file: the receiver writes the region to its --out-dir once complete.
    FILE = "file"
    #: Throughput measurement: the region is overwritten by every message and discarded.
    SINK = "sink"


@dataclass(frozen=True, slots=True)
class Hello:
    """Client's offer: its QP, first PSN, plane addresses and what region it needs."""

    qp: int
    psn: int
    planes: tuple[str, ...]
    purpose: Purpose
    length: int
    name: str | None = None
    #: ``mrc`` or ``roce`` (``agent.io.transport.Transport.on_wire``, the engine).
    transport: str = "mrc"
    #: RoCE: the QPs after ``qp`` the transfer is striped over, and their first PSNs.
    extra_qps: tuple[QpOffer, ...] = ()
    #: RoCE: whether the QPs run selective repeat.
    selective_repeat: bool = False

    def to_json(self) -> Message:
        """The wire form."""
        message: Message = {
            "type": "hello",
            "v": PROTOCOL_VERSION,
            "qp": self.qp,
            "psn": self.psn,
            "planes": list(self.planes),
            "purpose": self.purpose.value,
            "length": self.length,
            "transport": self.transport,
        }
        if self.name is not None:
            message["name"] = self.name
        _put_roce_fields(message, self.extra_qps, self.selective_repeat)
        return message


@dataclass(frozen=True, slots=True)
class Welcome:
    """Server's answer: its QP, first PSN, plane addresses and the region to write into."""

    qp: int
    psn: int
    planes: tuple[str, ...]
    rkey: int
    va: int
    length: int
    #: The transport of the QP the server set up (the hello's).
    transport: str = "mrc"
    #: RoCE: the server's QPs answering the hello's ``extra_qps``, in order, and their PSNs.
    extra_qps: tuple[QpOffer, ...] = ()
    #: RoCE: whether the server's QPs run selective repeat (the hello's).
    selective_repeat: bool = False

    def to_json(self) -> Message:
        """The wire form."""
        message: Message = {
            "type": "welcome",
            "v": PROTOCOL_VERSION,
            "qp": self.qp,
            "psn": self.psn,
            "planes": list(self.planes),
            "rkey": self.rkey,
            "va": self.va,
            "length": self.length,
            "transport": self.transport,
        }
        _put_roce_fields(message, self.extra_qps, self.selective_repeat)
        return message


@dataclass(frozen=True, slots=True)
class Commit:
    """Client: every write was acknowledged; here is the SHA-256 of what was sent."""

    sha256: str

    def to_json(self) -> Message:
        """The wire form."""
        return {"type": "commit", "sha256": self.sha256}


@dataclass(frozen=True, slots=True)
class Committed:
    """Server: the file is on disk at ``path`` with this digest and length."""

    sha256: str
    path: str
    length: int

    def to_json(self) -> Message:
        """The wire form."""
        return {
            "type": "committed",
            "sha256": self.sha256,
            "path": self.path,
            "length": self.length,
        }


@dataclass(frozen=True, slots=True)
class Bye:
    """Client: the measurement is over."""

    def to_json(self) -> Message:
        """The wire form."""
        return {"type": "bye"}


@dataclass(frozen=True, slots=True)
class Farewell:
    """Server: the receiver's side of the statistics, then the channel closes."""

    receiver: dict[str, Any]

    def to_json(self) -> Message:
        """The wire form."""
        return {"type": "farewell", "receiver": self.receiver}


@dataclass(frozen=True, slots=True)
class Refusal:
    """Either side: the request failed (``code`` says how), and the channel closes."""

    code: ErrorCode
    message: str

    def to_json(self) -> Message:
        """The wire form."""
        return {"type": "error", "code": self.code.value, "message": self.message}


SideMessage = Hello | Welcome | Commit | Committed | Bye | Farewell | Refusal


def parse_side_message(message: Message) -> SideMessage:
    """Validate a decoded line; ``ProtocolError`` names the first bad field."""
    kind = message.get("type")
    if kind == "hello":
        _check_version(message)
        purpose_text = get_str(message, "purpose", 16)
        try:
            purpose = Purpose(purpose_text)
        except ValueError:
            raise ProtocolError(f"unknown purpose {purpose_text!r}") from None
        name = get_optional_str(message, "name", 255)
        if purpose is Purpose.FILE and name is None:
            raise ProtocolError("a file transfer needs a 'name'")
        transport = _get_transport(message)
        return Hello(
            qp=get_int(message, "qp", 2, _U24),
            psn=get_int(message, "psn", 0, _U24),
            planes=get_str_list(message, "planes", MAX_PLANES),
            purpose=purpose,
            length=get_int(message, "length", 1, _U32),
            name=name,
            transport=transport,
            extra_qps=_get_extra_qps(message, transport),
            selective_repeat=_get_selective_repeat(message, transport),
        )
    if kind == "welcome":
        _check_version(message)
        transport = _get_transport(message)
        return Welcome(
            qp=get_int(message, "qp", 2, _U24),
            psn=get_int(message, "psn", 0, _U24),
            planes=get_str_list(message, "planes", MAX_PLANES),
            rkey=get_int(message, "rkey", 0, _U32),
            va=get_int(message, "va", 0, _U64),
            length=get_int(message, "length", 1, _U32),
            transport=transport,
            extra_qps=_get_extra_qps(message, transport),
            selective_repeat=_get_selective_repeat(message, transport),
        )
    if kind == "commit":
        return Commit(sha256=_get_digest(message))
    if kind == "committed":
        return Committed(
            sha256=_get_digest(message),
            path=get_str(message, "path"),
            length=get_int(message, "length", 0, _U64),
        )
    if kind == "bye":
        return Bye()
    if kind == "farewell":
        return Farewell(receiver=get_dict(message, "receiver"))
    if kind == "error":
        code_text = get_str(message, "code", 64)
        try:
            code = ErrorCode(code_text)
        except ValueError:
            code = ErrorCode.INTERNAL
        return Refusal(code=code, message=get_str(message, "message"))
    raise ProtocolError(f"unknown side-channel message type {kind!r}")


def _check_version(message: Message) -> None:
    version = message.get("v")
    if version != PROTOCOL_VERSION:
        raise ProtocolError(
            f"side-channel version {version!r} is not supported (this agent speaks "
            f"{PROTOCOL_VERSION})"
        )


def _get_transport(message: Message) -> str:
    transport = get_optional_str(message, "transport", 16)
    if transport is None:
        return "mrc"
    if transport not in WIRE_TRANSPORTS:
        raise ProtocolError(
            f"unknown transport {transport!r}: this agent speaks {', '.join(WIRE_TRANSPORTS)}"
        )
    return transport


def _put_roce_fields(message: Message, extra_qps: tuple[QpOffer, ...], selective: bool) -> None:
    """The RoCE fields, where they differ from one go-back-N QP's (absent otherwise)."""
    if extra_qps:
        message["extra_qps"] = [list(offer) for offer in extra_qps]
    if selective:
        message["selective_repeat"] = True


def _get_extra_qps(message: Message, transport: str) -> tuple[QpOffer, ...]:
    value = message.get("extra_qps")
    if value is None:
        return ()
    if transport != Engine.ROCE.value:
        raise ProtocolError("'extra_qps' stripes a RoCE transfer; this one is MRC")
    if not isinstance(value, list) or not 1 <= len(value) < MAX_QPS:
        raise ProtocolError(f"field 'extra_qps' must be a list of 1-{MAX_QPS - 1} [qp, psn]")
    offers: list[QpOffer] = []
    for item in value:
        if (
            not isinstance(item, list)
            or len(item) != 2
            or any(type(number) is not int for number in item)
            or not 2 <= item[0] <= _U24
            or not 0 <= item[1] <= _U24
        ):
            raise ProtocolError(f"field 'extra_qps' holds {item!r}, not a [qp, psn] pair")
        offers.append((item[0], item[1]))
    qps = [message.get("qp"), *(qp for qp, _psn in offers)]
    if len(set(qps)) != len(qps):
        raise ProtocolError("field 'extra_qps' repeats a QP number")
    return tuple(offers)


def _get_selective_repeat(message: Message, transport: str) -> bool:
    value = message.get("selective_repeat", False)
    if not isinstance(value, bool):
        raise ProtocolError(f"field 'selective_repeat' must be true or false, got {value!r}")
    if value and transport != Engine.ROCE.value:
        raise ProtocolError("'selective_repeat' is a RoCE setting; this transfer is MRC")
    return value


def _get_digest(message: Message) -> str:
    digest = get_str(message, "sha256", 64)
    if len(digest) != 64 or not set(digest) <= _HEX_DIGITS:
        raise ProtocolError("field 'sha256' must be 64 lowercase hex digits")
    return digest


def peer_plane_addresses(planes: Sequence[str], local: Sequence[bytes]) -> tuple[bytes, ...]:
    """The peer's plane addresses, packed, checked against ours: as many planes, same IP
    version, unicast. ``ProtocolError`` (for the peer) says which rule was broken."""
    if len(planes) != len(local):
        raise ProtocolError(
            f"plane count mismatch: the peer has {len(planes)} plane(s), this host {len(local)}"
        )
    packed: list[bytes] = []
    for text in planes:
        try:
            address = ipaddress.ip_address(text)
        except ValueError:
            raise ProtocolError(f"peer plane address {text!r} is not an IP address") from None
        if address.is_unspecified or address.is_multicast:
            raise ProtocolError(f"peer plane address {text!r} is not a unicast address")
        if len(address.packed) != len(local[0]):
            raise ProtocolError(
                f"peer plane address {text!r} is not of this host's IP version "
                f"(IPv{4 if len(local[0]) == 4 else 6})"
            )
        packed.append(address.packed)
    return tuple(packed)
