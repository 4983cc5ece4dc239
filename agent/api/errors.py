"""The host API's errors: each carries the errno OCP's C calls would set and the field at fault.

OCP's calls return -1 and set ``errno``; here a call raises an ``ApiError`` whose class says
which errno (``InvalidArgument`` is EINVAL, ``Busy`` EBUSY, ...), whose ``field`` names the
argument or attribute that is wrong (``wr[0].sg_list[0].lkey``, ``ev_op.entries[3].ev``)
and whose message says why. The agent reports its errors the same way over the control
socket (``to_json`` / ``from_json``), so a client raises exactly what the agent found. A call
that fails having produced something (OCP's EV probe batch that times out still fills in the
answers that came) carries it as ``partial``.
"""

from __future__ import annotations

import errno
from typing import Any

from agent.api.types import EpResponse


class ApiError(Exception):
    """A refused call. ``errno`` is the C API's error number, ``field`` what was wrong."""

    errno_name = "EIO"

    def __init__(
        self, message: str, field: str | None = None, partial: dict[str, Any] | None = None
    ) -> None:
        super().__init__(f"{field}: {message}" if field else message)
        self.field = field
        self.reason = message
        #: What the call produced before it failed, as the agent sent it (usually nothing).
        self.partial = partial or {}

    @property
    def errno(self) -> int:
        """The error number OCP's call would have set."""
        return int(getattr(errno, self.errno_name))

    def to_json(self) -> dict[str, Any]:
        """How the agent sends it to a client."""
        out: dict[str, Any] = {
            "errno": self.errno_name,
            "message": self.reason,
            "field": self.field,
        }
        if self.partial:
            out["partial"] = self.partial
        return out


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


class ProbesTimedOut(TimedOut):
    """Not every EV probe of a batch was answered within its timeout
    (``mrc_ctl_ep_batch_send_wait``'s ETIMEDOUT). What the call still learnt, as OCP's
    ``rsp`` and ``num_rsp`` hold it: ``responses``, the answers that came, in arrival order;
    ``timed_out``, the ``req_id`` of each probe that got none."""

    def __init__(
        self, message: str, field: str | None, responses: list[EpResponse], timed_out: list[int]
    ) -> None:
        super().__init__(message, field)
        self.responses = responses
        self.timed_out = timed_out


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
    partial = raw.get("partial")
    return cls(
        message if isinstance(message, str) else "error",
        field if isinstance(field, str) else None,
        partial if isinstance(partial, dict) else None,
    )
