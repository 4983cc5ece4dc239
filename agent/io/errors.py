"""Failures the agent reports to a user, each with the exit code that says what failed.

Every command-line tool ends with one of these codes, so a script (or a test) can tell "the
peer was unreachable" from "the port was taken" without parsing messages. The codes also
travel over the control socket (as ``ErrorCode`` names) when a client asks the host's running
agent to do the work, so ``mrc-agent send`` exits the same way whichever process did it.
"""

from __future__ import annotations

from enum import Enum, IntEnum


class ExitCode(IntEnum):
    """Process exit codes of ``mrc-agent`` and ``mrc-perf``."""

    #: Done: for ``send``, the receiver confirmed every byte (and its digest).
    OK = 0
    #: A bug or an unexpected system error; the message says which.
    INTERNAL = 1
    #: Bad arguments (argparse's convention), e.g. an unknown option or a missing file.
    USAGE = 2
    #: UDP port 4791 (or the side-channel / control address) is already in use.
    PORT_IN_USE = 3
    #: The peer's side channel could not be reached (refused, no route, timed out).
    PEER_UNREACHABLE = 4
    #: The transfer started but did not complete: the connection died, the receiver refused
    #: it, or the bytes it confirmed do not match.
    TRANSFER_FAILED = 5
    #: Raw sockets or buffer sizes need privileges (CAP_NET_RAW / root) the process lacks.
    PERMISSION_DENIED = 6
    #: The peer (or the local agent) broke the side-channel or control protocol.
    PROTOCOL_ERROR = 7
    #: The receiver refused the transfer because it would exceed one of its limits
    #: (receive memory in total or per peer, concurrent setups, region size, free disk).
    OVER_LIMIT = 8
    #: The receiver refused this host: its address is not in the receiver's ``--allow``
    #: list, or the hello's HMAC was missing or wrong (``--secret-file``).
    UNAUTHORIZED = 9
    #: Interrupted by Ctrl-C or SIGTERM (128 + SIGINT, the shell's convention).
    INTERRUPTED = 130


class ErrorCode(Enum):
    """Names of failures as they travel in control-socket and side-channel replies."""

    INTERNAL = "internal"
    USAGE = "usage"
    PORT_IN_USE = "port_in_use"
    PEER_UNREACHABLE = "peer_unreachable"
    TRANSFER_FAILED = "transfer_failed"
    PERMISSION_DENIED = "permission_denied"
    PROTOCOL_ERROR = "protocol_error"
    OVER_LIMIT = "over_limit"
    UNAUTHORIZED = "unauthorized"

    @property
    def exit_code(self) -> ExitCode:
        """The process exit code for this failure."""
        return ExitCode[self.name]


class AgentError(Exception):
    """A failure to report to the user: ``code`` says what failed, the message how."""

    code: ErrorCode = ErrorCode.INTERNAL

    @property
    def exit_code(self) -> ExitCode:
        """The exit code a command-line tool ends with."""
        return self.code.exit_code


class UsageError(AgentError):
    """Bad arguments or a bad request: nothing was attempted."""

    code = ErrorCode.USAGE


class PortInUseError(AgentError):
    """UDP 4791, the side-channel port or the control socket is held by another process."""

    code = ErrorCode.PORT_IN_USE


class PeerUnreachableError(AgentError):
    """The peer's side channel refused, had no route, or did not answer in time."""

    code = ErrorCode.PEER_UNREACHABLE


class TransferFailedError(AgentError):
    """The transfer began but not every byte was confirmed."""

    code = ErrorCode.TRANSFER_FAILED


class PermissionDeniedError(AgentError):
    """The process lacks CAP_NET_RAW (raw sockets) or another needed privilege."""

    code = ErrorCode.PERMISSION_DENIED


class ProtocolError(AgentError):
    """A side-channel or control message was malformed or out of turn."""

    code = ErrorCode.PROTOCOL_ERROR


class OverLimitError(AgentError):
    """A request would take the receiver past one of its limits; nothing was allocated."""

    code = ErrorCode.OVER_LIMIT


class UnauthorizedError(AgentError):
    """The caller is not allowed: address outside ``--allow``, or a bad hello HMAC."""

    code = ErrorCode.UNAUTHORIZED


_BY_CODE: dict[ErrorCode, type[AgentError]] = {
    cls.code: cls
    for cls in (
        AgentError,
        UsageError,
        PortInUseError,
        PeerUnreachableError,
        TransferFailedError,
        PermissionDeniedError,
        ProtocolError,
        OverLimitError,
        UnauthorizedError,
    )
}


def error_from_code(code: ErrorCode, message: str) -> AgentError:
    """Rebuild the error a remote process reported (control socket, side channel)."""
    return _BY_CODE[code](message)
