"""The agent's Unix control socket: local clients hand it sends and measurements.

The socket is created with mode 0600 by default: the agent runs as root and reads the files
a ``send`` names, so only its owner may ask. It may be opened to others (``--socket-mode``)
for the host API's applications: each client's user is taken from the kernel
(``SO_PEERCRED``), and ``send``, ``perf``, ``status`` and every op a handler registers as
privileged stay root's and the owner's (``agent.io.caller_check.is_privileged``). Ops other
layers add (the host API, ``agent.api``) go to the ``handlers`` they register. A socket file
left by a crashed agent is replaced; one that a live agent still answers on is a clear
"already running" error.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agent.core import Endpoint
from agent.io.addresses import format_address, parse_peer
from agent.io.caller_check import Credentials, is_privileged, peer_credentials
from agent.io.config_overrides import with_overrides
from agent.io.control_protocol import (
    PerfRequest,
    SendRequest,
    StatusRequest,
    error_reply,
    ok_reply,
    parse_request,
    progress_reply,
    request_id,
)
from agent.io.errors import AgentError, PermissionDeniedError, PortInUseError, UsageError
from agent.io.file_transfer import DEFAULT_FILE_MESSAGE_SIZE, FileTransfer, read_file_for_sending
from agent.io.json_lines import LineChannel, Message
from agent.io.outbound import OutboundTransfer
from agent.io.perf_transfer import DEFAULT_PERF_MESSAGE_SIZE, PerfSample, PerfTransfer
from agent.io.reactor import READ
from agent.io.runtime import AgentRuntime
from agent.io.side_channel import SIDE_CHANNEL_PORT
from agent.io.stats_json import connection_stats_to_json
from agent.io.transport import (
    RoceSetup,
    Transport,
    check_transport_options,
    mrc_config_for,
    parse_transport,
    roce_setup_for,
)

log = logging.getLogger(__name__)

#: Where the host's agent listens unless told otherwise (``--socket``, ``MRC_AGENT_SOCKET``).
DEFAULT_SOCKET_PATH = "/run/mrc-agent.sock"
SOCKET_ENV = "MRC_AGENT_SOCKET"


def default_socket_path() -> str:
    """``$MRC_AGENT_SOCKET`` or ``/run/mrc-agent.sock``."""
    return os.environ.get(SOCKET_ENV) or DEFAULT_SOCKET_PATH


def _agent_answers(path: str) -> bool:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as probe:
        probe.settimeout(1.0)
        try:
            probe.connect(path)
        except OSError:
            return False
        return True


class ControlServer:
    """Listens on the Unix socket and serves each client's requests."""

    def __init__(self, runtime: AgentRuntime, path: str, mode: int = 0o600) -> None:
        self.runtime = runtime
        self.path = path
        self.sessions: set[ControlSession] = set()
        #: Ops served elsewhere, by name: ``handler(session, message)`` answers on its own.
        self.handlers: dict[str, Callable[[ControlSession, Message], None]] = {}
        #: Who counts as privileged (root or this process's user, by default).
        self.is_privileged: Callable[[Credentials | None], bool] = is_privileged
        if os.path.exists(path):
            if _agent_answers(path):
                raise PortInUseError(
                    f"an agent already answers on {path}: stop it, or pick another --socket"
                )
            os.unlink(path)  # left over from an agent that did not shut down cleanly
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(path)
            os.chmod(path, mode)
            sock.listen(16)
        except OSError as exc:
            sock.close()
            raise UsageError(f"cannot create control socket {path}: {exc.strerror}") from None
        sock.setblocking(False)
        self.sock = sock
        runtime.reactor.watch(sock, READ, self._accept, self._accept_failed)
        runtime.on_close(self.close)

    def _accept(self, _mask: int) -> None:
        while True:
            try:
                conn, _address = self.sock.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("control socket: accept failed: %s", exc)
                return
            self.adopt(conn)

    def adopt(self, sock: socket.socket) -> ControlSession:
        """Serve ``sock``, a connected stream socket, as a client (accepted ones, and one end
        of a socketpair for an in-process client)."""
        session = ControlSession(self, sock)
        self.sessions.add(session)
        return session

    def _accept_failed(self, exc: BaseException) -> None:
        log.error("control socket: accepting a client failed: %r", exc)

    def close(self) -> None:
        """Stop listening, cancel what clients asked for, remove the socket file."""
        for session in list(self.sessions):
            session.close()
        self.runtime.reactor.unwatch(self.sock)
        self.sock.close()
        try:
            os.unlink(self.path)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                log.warning("cannot remove %s: %s", self.path, exc)


class ControlSession:
    """One local client: its requests and the transfers they started."""

    def __init__(self, server: ControlServer, sock: socket.socket) -> None:
        self.server = server
        self.runtime = server.runtime
        self.transfers: dict[int, OutboundTransfer] = {}
        self._closed = False
        self.credentials = peer_credentials(sock)
        self.privileged = server.is_privileged(self.credentials)
        #: Run once when the session ends (the host API releases the client's resources).
        self.closers: list[Callable[[], None]] = []
        self.channel = LineChannel(
            sock, self.runtime.reactor, self._on_line, self._on_closed, peer="control client"
        )

    def _on_line(self, message: Message) -> None:
        op = message.get("op")
        handler = self.server.handlers.get(op) if isinstance(op, str) else None
        if handler is not None:
            handler(self, message)
            return
        request: int | None = None
        try:
            request = request_id(message)
            if not self.privileged:
                raise PermissionDeniedError(
                    f"{op!r} is for root or the agent's user; this socket serves others the "
                    "host API only"
                )
            if request in self.transfers:
                raise UsageError(f"request id {request} is already in progress")
            parsed = parse_request(message)
            if isinstance(parsed, StatusRequest):
                self.channel.send(ok_reply(request, self.status(with_evs=parsed.evs)))
            elif isinstance(parsed, SendRequest):
                self._start(request, self._file_transfer(parsed))
            else:
                self._start(request, self._perf_transfer(request, parsed))
        except AgentError as exc:
            self.channel.send(error_reply(request, exc))

    def _transport(
        self, request: SendRequest | PerfRequest, evs: int | None, cc: str | None
    ) -> tuple[Transport, RoceSetup | None]:
        """The request's transport and, for RoCE, its QPs' settings and count."""
        transport = parse_transport(request.transport)
        check_transport_options(
            transport, evs=evs, cc=cc, roce_timeout=request.roce_timeout,
            roce_retry_cnt=request.roce_retry_cnt, roce_profile=request.roce_profile,
            qps=request.roce_qps, roce_line_rate=request.roce_line_rate,
        )  # fmt: skip
        if not transport.is_roce:
            return transport, None
        roce = roce_setup_for(
            self.runtime.pool.default.config.dscp,
            profile=request.roce_profile,
            timeout=request.roce_timeout,
            retry_cnt=request.roce_retry_cnt,
            qps=request.roce_qps,
            line_rate=request.roce_line_rate,
        )
        return transport, roce

    def _file_transfer(self, request: SendRequest) -> FileTransfer:
        transport, roce = self._transport(request, None, None)
        base = self.runtime.pool.default.config
        config = mrc_config_for(transport, base)
        data = read_file_for_sending(request.path)
        return FileTransfer(
            self.runtime,
            parse_peer(request.to, SIDE_CHANNEL_PORT),
            data,
            request.name or Path(request.path).name,
            message_size=request.message_size or DEFAULT_FILE_MESSAGE_SIZE,
            config=config if config != base else None,
            transport=transport,
            roce=roce,
        )

    def _perf_transfer(self, request_number: int, request: PerfRequest) -> PerfTransfer:
        transport, roce = self._transport(request, request.evs, request.cc)
        base = self.runtime.pool.default.config
        config = mrc_config_for(transport, with_overrides(base, evs=request.evs, cc=request.cc))

        def progress(sample: PerfSample) -> None:
            self.channel.send(progress_reply(request_number, sample.to_json()))

        return PerfTransfer(
            self.runtime,
            parse_peer(request.to, SIDE_CHANNEL_PORT),
            message_size=request.message_size or DEFAULT_PERF_MESSAGE_SIZE,
            duration=request.duration,
            total_bytes=request.total_bytes,
            config=config if config != base else None,
            interval=request.interval or 1.0,
            on_progress=progress,
            transport=transport,
            roce=roce,
        )

    def _start(self, request: int, transfer: OutboundTransfer) -> None:
        self.transfers[request] = transfer

        def finished(done: OutboundTransfer) -> None:
            self.transfers.pop(request, None)
            if self._closed:
                return
            if done.error is not None:
                self.channel.send(error_reply(request, done.error))
            else:
                self.channel.send(ok_reply(request, done.result or {}))

        transfer.on_finished.append(finished)
        transfer.start()

    def status(self, with_evs: bool = False) -> dict[str, Any]:
        """Planes, open connections (with per-EV tables if ``with_evs``) and counters."""
        runtime = self.runtime
        connections = []
        for qp in runtime.pool.qps:
            stats = runtime.pool.connection_stats(qp)
            entry = connection_stats_to_json(stats, with_evs=with_evs)
            owner = runtime.pool.owner(qp)
            if isinstance(owner, Endpoint):  # the peer, which names it in the live view
                entry["remote_addresses"] = [format_address(a) for a in owner.remote_addresses(qp)]
            connections.append(entry)
        return {
            "planes": [format_address(a) for a in runtime.local_addresses],
            "connections": connections,
            "core_drops": runtime.pool.drops(),
            **runtime.io.counters(),
            "callback_errors": runtime.reactor.callback_errors,
            "receive_errors": runtime.receive_errors,
            **{name: provide() for name, provide in runtime.status_providers.items()},
        }

    def _on_closed(self, _reason: str | None) -> None:
        self.close()

    def close(self) -> None:
        """Cancel this client's transfers and drop the session."""
        if self._closed:
            return
        self._closed = True
        for transfer in list(self.transfers.values()):
            transfer.cancel("the control client went away")
        self.transfers.clear()
        closers, self.closers = self.closers, []
        for closer in closers:
            try:
                closer()
            except Exception as exc:  # one failing release must not keep the others
                log.error("control client: releasing its resources failed: %r", exc)
        self.channel.close(None)
        self.server.sessions.discard(self)
