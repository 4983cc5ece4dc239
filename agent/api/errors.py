"""The host API's errors: each carries the errno OCP's C calls would set and the field at fault.

OCP's calls return -1 and set ``errno``; here a call raises an ``ApiError`` whose class says
which errno (``InvalidArgument`` is EINVAL, ``Busy`` EBUSY, ...), whose ``field`` names the
argument or attribute that is wrong (``wr[0].sg_list[0].lkey``, ``ev_op.entries[3].ev``)
and whose message says why. The agent reports its errors the same way over the control
socket (``to_json`` / ``from_json``), so a client raises exactly what the agent found.
"""

from __future__ import annotations

import errno
from typing import Any


class ApiError(Exception):
    """A refused call. ``errno`` is the C API's error number, ``field`` what was wrong."""

    errno_name = "EIO"

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.reason = message

    @property
    def errno(self) -> int:
        """The error number OCP's call would have set."""
        return int(getattr(errno, self.errno_name))

    def to_json(self) -> dict[str, Any]:
        """How the agent sends it to a client."""
        return {"errno": self.errno_name, "message": self.reason, "field": self.field}


class InvalidArgument(ApiError):
    """An argument is out of range, of the wrong kind, or not allowed in this state."""

    errno_name = "EINVAL"


class PermissionDenied(ApiError):
    """The caller is not privileged (the controller API is root's or the socket owner's)."""

    errno_name = "EPERM"


class NotFound(ApiError):
    """An EV, QP, CQ, region or profile that does not exist."""

    errno_name = "ENOENT"


class Busy(ApiError):
    """The object is in use (a profile held by live QPs, a CQ by a QP)."""

    errno_name = "EBUSY"


class TooBig(ApiError):
    """More than the device allows (EVs per profile, fields per format, entries)."""

    errno_name = "E2BIG"


class NotSupported(ApiError):
    """An operation this testbed does not offer (READ, SEND, SRv6 on the wire, ...)."""

    errno_name = "EOPNOTSUPP"


class TimedOut(ApiError):
    """No answer within the time given."""

    errno_name = "ETIMEDOUT"


class OutOfResources(ApiError):
    """A queue is full (send queue, receive queue, outstanding writes with immediate)."""

    errno_name = "ENOMEM"


class AgentGone(ApiError):
    """The agent closed the connection or broke the protocol; every object is gone."""

    errno_name = "ECONNRESET"


_BY_NAME = {
    cls.errno_name: cls
    for cls in (
        ApiError,
        InvalidArgument,
        PermissionDenied,
        NotFound,
        Busy,
        TooBig,
        NotSupported,
        TimedOut,
        OutOfResources,
        AgentGone,
    )
}


def from_json(raw: object) -> ApiError:
    """The error an agent reported (a malformed report becomes a plain ``ApiError``)."""
    if not isinstance(raw, dict):
        return AgentGone(f"the agent sent a malformed error: {raw!r}")
    cls = _BY_NAME.get(str(raw.get("errno")), ApiError)
    message = raw.get("message")
    field = raw.get("field")
    return cls(
        message if isinstance(message, str) else "error",
        field if isinstance(field, str) else None,
    )
