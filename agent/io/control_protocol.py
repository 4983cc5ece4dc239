"""The agent's control protocol: JSON lines on a Unix socket, for local clients.

The host's agent owns UDP 4791, so local tools hand it work instead of opening endpoints of
their own. Each request is one line with an ``op`` and an ``id`` the replies echo; a client may
send several requests and match the replies by id.

Requests::

    {"id": 1, "op": "send", "path": "/abs/file", "to": "HOST[:PORT]",
     "name": "file"?, "message_size": 1048576?, "transport": "mrc"?, "roce_profile": "nccl"?,
     "roce_timeout": 14?, "roce_retry_cnt": 7?, "roce_qps": 4?, "roce_line_rate": 4e5?}
    {"id": 2, "op": "perf", "to": "HOST[:PORT]", "bytes": N?, "duration": S?,
     "evs": K?, "cc": "nscc"?, "message_size": 65536?, "interval": 1.0?, "transport": "mrc"?,
     "roce_profile": "nccl"?, "roce_timeout": 14?, "roce_retry_cnt": 7?, "roce_qps": 4?,
     "roce_line_rate": 4e5?}
    {"id": 3, "op": "status", "evs": true?}

Replies (zero or more ``progress`` lines, then exactly one final line)::

    {"id": 2, "progress": {"elapsed_s": ..., "goodput_bps": ..., ...}}
    {"id": 1, "ok": true, "result": {...}}
    {"id": 1, "ok": false, "error": {"code": "peer_unreachable", "message": "..."}}

``code`` is an ``ErrorCode`` value; the client turns it back into the exit code the command
would have had doing the work itself. Paths must be absolute: the agent's working directory
is not the client's. A client that disconnects cancels the transfers it started.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from agent.io.errors import AgentError, ErrorCode, ProtocolError, error_from_code
from agent.io.fields import (
    get_dict,
    get_int,
    get_optional_int,
    get_optional_number,
    get_optional_str,
    get_str,
)
from agent.io.json_lines import Message
from agent.io.transport import (
    MAX_QPS,
    MAX_ROCE_LINE_RATE,
    MIN_ROCE_LINE_RATE,
    transport_names,
)
from agent.roce.profiles import profile_names

_MAX_BYTES = (1 << 62) - 1
_MAX_MESSAGE = 0xFFFFFFFF
_MAX_SECONDS = 7 * 24 * 3600.0


@dataclass(frozen=True, slots=True)
class SendRequest:
    """Send the file at ``path`` to ``to``, stored there as ``name`` (default: its basename)."""

    path: str
    to: str
    name: str | None = None
    message_size: int | None = None
    #: ``--transport``, the RoCE profile, its QPs' verbs settings, their count and the NIC's
    #: line rate in bits/s (see ``agent.io.transport``).
    transport: str | None = None
    roce_profile: str | None = None
    roce_timeout: int | None = None
    roce_retry_cnt: int | None = None
    roce_qps: int | None = None
    roce_line_rate: float | None = None

    def to_json(self, request_id: int) -> Message:
        """The request line."""
        message: Message = {"id": request_id, "op": "send", "path": self.path, "to": self.to}
        optional = {
            "name": self.name,
            "message_size": self.message_size,
            "transport": self.transport,
            "roce_profile": self.roce_profile,
            "roce_timeout": self.roce_timeout,
            "roce_retry_cnt": self.roce_retry_cnt,
            "roce_qps": self.roce_qps,
            "roce_line_rate": self.roce_line_rate,
        }
        message.update({key: value for key, value in optional.items() if value is not None})
        return message


@dataclass(frozen=True, slots=True)
class PerfRequest:
    """Measure goodput to ``to`` (see ``agent.io.perf_transfer``)."""

    to: str
    total_bytes: int | None = None
    duration: float | None = None
    evs: int | None = None
    cc: str | None = None
    message_size: int | None = None
    interval: float | None = None
    transport: str | None = None
    roce_profile: str | None = None
    roce_timeout: int | None = None
    roce_retry_cnt: int | None = None
    roce_qps: int | None = None
    roce_line_rate: float | None = None

    def to_json(self, request_id: int) -> Message:
        """The request line."""
        message: Message = {"id": request_id, "op": "perf", "to": self.to}
        optional = {
            "bytes": self.total_bytes,
            "duration": self.duration,
            "evs": self.evs,
            "cc": self.cc,
            "message_size": self.message_size,
            "interval": self.interval,
            "transport": self.transport,
            "roce_profile": self.roce_profile,
            "roce_timeout": self.roce_timeout,
            "roce_retry_cnt": self.roce_retry_cnt,
            "roce_qps": self.roce_qps,
            "roce_line_rate": self.roce_line_rate,
        }
        message.update({key: value for key, value in optional.items() if value is not None})
        return message


@dataclass(frozen=True, slots=True)
class StatusRequest:
    """The agent's planes, connections and counters; ``evs``: each connection's EV table too."""

    evs: bool = False

    def to_json(self, request_id: int) -> Message:
        """The request line."""
        message: Message = {"id": request_id, "op": "status"}
        if self.evs:
            message["evs"] = True
        return message


Request = SendRequest | PerfRequest | StatusRequest


def request_id(message: Message) -> int:
    """The request's id (``ProtocolError`` if it has none usable)."""
    return get_int(message, "id", 0, (1 << 53) - 1)


def parse_request(message: Message) -> Request:
    """Validate a request line; ``ProtocolError`` names the first bad field."""
    op = message.get("op")
    if op == "send":
        path = get_str(message, "path")
        if not path.startswith("/"):
            raise ProtocolError(f"'path' must be absolute, got {path!r}")
        return SendRequest(
            path=path,
            to=get_str(message, "to", 300),
            name=get_optional_str(message, "name", 255),
            message_size=get_optional_int(message, "message_size", 1, _MAX_MESSAGE),
            **_transport_fields(message),
        )
    if op == "perf":
        return PerfRequest(
            to=get_str(message, "to", 300),
            total_bytes=get_optional_int(message, "bytes", 1, _MAX_BYTES),
            duration=get_optional_number(message, "duration", 1e-3, _MAX_SECONDS),
            evs=get_optional_int(message, "evs", 1, 1 << 16),
            cc=get_optional_str(message, "cc", 32),
            message_size=get_optional_int(message, "message_size", 1, _MAX_MESSAGE),
            interval=get_optional_number(message, "interval", 1e-3, 3600.0),
            **_transport_fields(message),
        )
    if op == "status":
        evs = message.get("evs", False)
        if not isinstance(evs, bool):
            raise ProtocolError(f"'evs' must be true or false, got {evs!r}")
        return StatusRequest(evs=evs)
    raise ProtocolError(f"unknown op {op!r}: expected send, perf or status")


def _transport_fields(message: Message) -> dict[str, Any]:
    """``transport``, ``roce_profile``, ``roce_timeout``, ``roce_retry_cnt``, ``roce_qps`` and
    ``roce_line_rate``, checked (names: the registries'; ranges: verbs' and
    ``agent.io.transport``'s)."""
    transport = get_optional_str(message, "transport", 16)
    if transport is not None and transport not in transport_names():
        raise ProtocolError(
            f"unknown transport {transport!r}: expected {', '.join(transport_names())}"
        )
    profile = get_optional_str(message, "roce_profile", 32)
    if profile is not None and profile not in profile_names():
        raise ProtocolError(
            f"unknown RoCE profile {profile!r}: expected {', '.join(profile_names())}"
        )
    return {
        "transport": transport,
        "roce_profile": profile,
        "roce_timeout": get_optional_int(message, "roce_timeout", 0, 31),
        "roce_retry_cnt": get_optional_int(message, "roce_retry_cnt", 0, 7),
        "roce_qps": get_optional_int(message, "roce_qps", 1, MAX_QPS),
        "roce_line_rate": get_optional_number(
            message, "roce_line_rate", MIN_ROCE_LINE_RATE, MAX_ROCE_LINE_RATE
        ),
    }


def ok_reply(request: int, result: dict[str, Any]) -> Message:
    """The final line of a request that succeeded."""
    return {"id": request, "ok": True, "result": result}


def error_reply(request: int | None, error: AgentError) -> Message:
    """The final line of a request that failed."""
    return {"id": request, "ok": False, "error": {"code": error.code.value, "message": str(error)}}


def progress_reply(request: int, progress: dict[str, Any]) -> Message:
    """An intermediate line (perf samples)."""
    return {"id": request, "progress": progress}


@dataclass(frozen=True, slots=True)
class Reply:
    """A reply line as a client sees it: progress, or final with a result or an error."""

    request: int | None
    progress: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    error: AgentError | None = None

    @property
    def final(self) -> bool:
        """Whether this line ends the request."""
        return self.progress is None


def parse_reply(message: Message) -> Reply:
    """Validate a reply line (client side)."""
    raw_id = message.get("id")
    request = raw_id if type(raw_id) is int else None
    if "progress" in message:
        return Reply(request, progress=get_dict(message, "progress"))
    ok = message.get("ok")
    if ok is True:
        return Reply(request, result=get_dict(message, "result"))
    if ok is False:
        error = get_dict(message, "error")
        try:
            code = ErrorCode(error.get("code"))
        except ValueError:
            code = ErrorCode.INTERNAL
        text = error.get("message")
        return Reply(request, error=error_from_code(code, text if isinstance(text, str) else ""))
    raise ProtocolError(f"reply without 'ok' or 'progress': {message!r}")
