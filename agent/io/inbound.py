"""The receiving side: the side-channel listener and one session per connecting peer.

For each peer that says ``hello`` the agent admits a region against its limits
(``agent.io.admission``; nothing is allocated for a hello over a limit, which is answered
``over_limit``), registers it (a ``.part`` file of the file's size in the ``--out-dir``, or one
message in memory for a ``sink``), opens an MRC connection and answers ``welcome``. It then
follows the core's ``MessageReceived`` events for that connection. A file is committed when the
peer asks: only if every byte of the region arrived and its digest matches, and then the part
file is flushed and renamed into place, so the sender's exit status reflects what is on disk.
A sink is simply counted. When the TCP connection ends, for any reason, the MRC connection is
closed, the region released and a part file removed: a vanished peer leaves nothing behind.
A hello that asks for ``transport: roce`` gets RoCE RC QPs (``agent.roce``), as many as it
offers (``agent.io.qp_striping``), go-back-N or selective repeat as it asks, and a region on
the runtime's RoCE endpoint instead; everything else is the same.

Callers are checked first (``agent.io.caller_check``): an address outside ``--allow`` is
refused at accept, and with a secret every hello must carry a valid HMAC.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import mmap
import secrets
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core import (
    ConnectionSpec,
    Endpoint,
    Event,
    MemoryRegion,
    MessageReceived,
    WriteRejected,
)
from agent.io.addresses import PeerAddress, format_address
from agent.io.admission import (
    DEFAULT_MAX_REGION,
    DEFAULT_MAX_SETUPS,
    Grant,
    ReceiveBudget,
    ReceiveLimits,
    default_max_memory,
)
from agent.io.caller_check import HelloVerifier, Network, allowed
from agent.io.errors import (
    AgentError,
    ErrorCode,
    OverLimitError,
    PortInUseError,
    ProtocolError,
    TransferFailedError,
    UnauthorizedError,
    UsageError,
)
from agent.io.json_lines import LineChannel, Message, encode_line
from agent.io.out_dir import PartFile, check_file_name
from agent.io.qp_striping import connect_striped, merged_roce_stats, merged_stats
from agent.io.reactor import READ, Timer
from agent.io.runtime import AgentRuntime
from agent.io.side_channel import (
    Bye,
    Commit,
    Committed,
    Farewell,
    Hello,
    Purpose,
    QpOffer,
    Refusal,
    Welcome,
    parse_side_message,
    peer_plane_addresses,
)
from agent.io.stats_json import connection_stats_to_json, roce_stats_to_json
from agent.io.transport import Engine, roce_config_for
from agent.roce import RoceEndpoint

log = logging.getLogger(__name__)

#: Seconds a new side-channel connection has to say hello.
HELLO_TIMEOUT = 10.0
_U24 = 0xFFFFFF


@dataclass(frozen=True, slots=True)
class InboundPolicy:
    """What the agent accepts from peers (limits: see ``agent.io.admission``)."""

    #: Where completed files go; None refuses file transfers (sinks are still accepted).
    out_dir: Path | None
    #: Largest region one peer may make this host allocate.
    max_region: int = DEFAULT_MAX_REGION
    #: Memory all incoming regions may hold together; None: a quarter of what is available.
    max_memory: int | None = None
    #: Memory one peer's regions may hold; None: half of ``max_memory``.
    max_peer_memory: int | None = None
    #: Side-channel connections between accept and an answered hello.
    max_setups: int = DEFAULT_MAX_SETUPS
    #: Caller prefixes allowed (empty: everyone who can reach the listener).
    allow: tuple[Network, ...] = ()
    #: Shared secret hellos must be signed with (None: not required).
    secret: bytes | None = None

    def limits(self) -> ReceiveLimits:
        """The admission limits this policy sets."""
        total = self.max_memory if self.max_memory is not None else default_max_memory()
        per_peer = self.max_peer_memory if self.max_peer_memory is not None else total // 2
        return ReceiveLimits(
            max_memory=total,
            max_peer_memory=max(1, per_peer),
            max_setups=self.max_setups,
            max_region=self.max_region,
        )


class SideChannelServer:
    """Listens for peers on TCP (one socket per address in ``listen``) and runs an
    ``InboundSession`` for each caller the policy lets in."""

    def __init__(
        self,
        runtime: AgentRuntime,
        listen: PeerAddress | Sequence[PeerAddress],
        policy: InboundPolicy,
    ) -> None:
        self.runtime = runtime
        self.policy = policy
        self.budget = ReceiveBudget(policy.limits())
        self.verifier = HelloVerifier(policy.secret) if policy.secret is not None else None
        self.sessions: set[InboundSession] = set()
        #: Connections refused at accept: outside ``--allow``, or over ``max_setups``.
        self.refused_callers = 0
        addresses = [listen] if isinstance(listen, PeerAddress) else list(listen)
        if not addresses:
            raise UsageError("the side channel needs at least one address to listen on")
        self.socks: list[socket.socket] = []
        try:
            for address in addresses:
                self.socks.append(_listen(address))
        except AgentError:
            for sock in self.socks:
                sock.close()
            raise
        self.addresses = [PeerAddress(*sock.getsockname()[:2]) for sock in self.socks]
        #: The first listening address (the only one when ``listen`` was one address).
        self.address = self.addresses[0]
        for sock in self.socks:
            runtime.reactor.watch(sock, READ, self._acceptor(sock), self._accept_failed)
        runtime.on_close(self.close)
        runtime.status_providers["side_channel"] = self.status

    def _acceptor(self, sock: socket.socket) -> Any:
        def accept(_mask: int) -> None:
            self._accept(sock)

        return accept

    def _accept_failed(self, exc: BaseException) -> None:
        log.error("side channel: accepting a connection failed: %r", exc)

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                conn, address = listener.accept()
            except BlockingIOError:
                return
            except OSError as exc:
                log.warning("side channel: accept failed: %s", exc)
                return
            peer = f"{address[0]}:{address[1]}"
            try:
                if not allowed(address[0], self.policy.allow):
                    raise UnauthorizedError(f"{address[0]} is not in this agent's --allow list")
                self.budget.begin_setup(address[0])
            except AgentError as exc:
                self.refused_callers += 1
                log.warning("side channel %s: refused at accept: %s", peer, exc)
                _refuse_and_close(conn, exc)
                continue
            try:
                session = InboundSession(self, conn, peer, address[0])
            except Exception:
                self.budget.end_setup(address[0])
                conn.close()
                raise
            self.sessions.add(session)

    def status(self) -> dict[str, Any]:
        """Listening addresses, limits and their use, refusals (for ``mrc-agent status``)."""
        return {
            "listen": [str(a) for a in self.addresses],
            "sessions": len(self.sessions),
            "allow": [str(n) for n in self.policy.allow],
            "authenticated_hellos": self.verifier is not None,
            "refused_callers": self.refused_callers,
            "limits": self.budget.snapshot(),
        }

    def close(self) -> None:
        """Stop listening and end every session."""
        for session in list(self.sessions):
            session.end("agent shutting down")
        for sock in self.socks:
            self.runtime.reactor.unwatch(sock)
            sock.close()
        self.runtime.status_providers.pop("side_channel", None)


def _listen(listen: PeerAddress) -> socket.socket:
    family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
        sock.bind((listen.host, listen.port))
        sock.listen(64)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise PortInUseError(
                f"side-channel port {listen} is already in use (another mrc-agent?); "
                f"choose another with --listen"
            ) from None
        raise UsageError(f"cannot listen on {listen}: {exc.strerror}") from None
    sock.setblocking(False)
    return sock


def _refuse_and_close(conn: socket.socket, error: AgentError) -> None:
    """Tell a refused caller why in one line, without waiting for it, then close."""
    try:
        conn.setblocking(False)
        conn.send(encode_line(Refusal(error.code, str(error)).to_json()))
    except OSError:
        pass
    finally:
        conn.close()


def anonymous_region(length: int) -> memoryview:
    """``length`` bytes of zeroed memory that become resident only as data arrives.

    A ``bytearray`` is zeroed when made: a 1 GiB hello then costs ~0.3 s of the agent's only
    thread and a resident GiB before a byte is sent. An anonymous mapping costs neither; the
    admitted grant still bounds what a peer that does send can make resident.
    """
    return memoryview(mmap.mmap(-1, length))


class InboundSession:
    """One peer's connection: hello, region, MRC connection, commit or bye."""

    def __init__(
        self, server: SideChannelServer, sock: socket.socket, peer: str, peer_host: str
    ) -> None:
        self.server = server
        self.runtime = server.runtime
        self.peer = peer
        self.peer_host = peer_host
        self.hello: Hello | None = None
        #: The connection's QPs (several for a RoCE transfer striped over them).
        self.qps: tuple[int, ...] = ()
        self.region: MemoryRegion | None = None
        #: Where the region is registered: the MRC endpoint's memory or the RoCE one's.
        self._region_owner: Endpoint | RoceEndpoint | None = None
        self.grant: Grant | None = None
        self.part: PartFile | None = None
        self.bytes_received = 0
        self.messages_received = 0
        self.writes_rejected = 0
        self._ended = False
        #: Counted in the budget's setups until the hello is answered or the session ends.
        self._in_setup = True
        self.channel = LineChannel(
            sock, self.runtime.reactor, self._on_line, self._on_closed, peer=peer
        )
        self._hello_timer: Timer | None = self.runtime.reactor.call_at(
            self.runtime.clock() + HELLO_TIMEOUT, lambda: self.end("no hello in time")
        )

    # --- side channel ---------------------------------------------------------------------

    def _on_line(self, line: Message) -> None:
        try:
            message = parse_side_message(line)
            if self.hello is None:
                if not isinstance(message, Hello):
                    raise ProtocolError(f"expected 'hello', got {line.get('type')!r}")
                if self.server.verifier is not None:
                    self.server.verifier.verify(line, self.runtime.wall_clock())
                self._accept_hello(message)
            elif isinstance(message, Commit):
                self._commit(message)
            elif isinstance(message, Bye):
                self._farewell()
            else:
                raise ProtocolError(f"unexpected {line.get('type')!r} after hello")
        except AgentError as exc:
            self._refuse(exc.code, str(exc))

    def _on_closed(self, reason: str | None) -> None:
        self.end(reason or "peer closed the side channel")

    def _refuse(self, code: ErrorCode, text: str) -> None:
        log.warning("side channel %s: refused: %s", self.peer, text)
        self.channel.send(Refusal(code, text).to_json())
        self.end(f"refused: {text}")

    def _accept_hello(self, hello: Hello) -> None:
        policy = self.server.policy
        budget = self.server.budget
        runtime = self.runtime
        remote = peer_plane_addresses(hello.planes, runtime.local_addresses)
        if hello.purpose is Purpose.FILE:
            if policy.out_dir is None:
                raise TransferFailedError("this agent stores no files (started without --out-dir)")
            check_file_name(hello.name or "")
            self.grant = budget.admit_file(self.peer_host, hello.length, policy.out_dir)
            try:
                self.part = PartFile(policy.out_dir, hello.length)
            except OSError as exc:
                raise OverLimitError(
                    f"cannot set aside {hello.length} bytes in the out-dir: {exc.strerror}"
                ) from None
            assert self.part.view is not None
            buffer: bytearray | memoryview = self.part.view
        else:
            self.grant = budget.admit_memory(self.peer_host, hello.length)
            buffer = anonymous_region(hello.length)
        if self._hello_timer is not None:
            self._hello_timer.cancel()
            self._hello_timer = None
        pool = runtime.pool
        roce = hello.transport == Engine.ROCE.value
        endpoint: Endpoint | RoceEndpoint = pool.roce if roce else pool.default
        self.region = endpoint.register_memory(buffer)
        self._region_owner = endpoint
        offered: tuple[QpOffer, ...] = ((hello.qp, hello.psn), *hello.extra_qps)
        local = tuple((pool.allocate_qp(endpoint), secrets.randbelow(_U24 + 1)) for _ in offered)
        (qp, psn), *extra = local
        try:
            if isinstance(endpoint, RoceEndpoint):
                config = dataclasses.replace(
                    roce_config_for(pool.default.config.dscp),
                    selective_repeat=hello.selective_repeat,
                )
                connect_striped(pool, local, offered, remote, config)
            else:
                pool.connect(
                    endpoint,
                    ConnectionSpec(
                        local_qp=qp,
                        remote_qp=hello.qp,
                        remote_addresses=remote,
                        send_psn=psn,
                        receive_psn=hello.psn,
                    ),
                )
        except ValueError as exc:
            for number, _psn in local:
                pool.release_qp(number)
            raise ProtocolError(f"cannot open the connection: {exc}") from None
        self.qps = tuple(number for number, _psn in local)
        self.hello = hello
        for number in self.qps:
            runtime.on_events(number, self._on_event)
        self.channel.send(
            Welcome(
                qp=qp,
                psn=psn,
                planes=tuple(format_address(a) for a in runtime.local_addresses),
                rkey=self.region.rkey,
                va=self.region.va,
                length=hello.length,
                transport=hello.transport,
                extra_qps=tuple(extra),
                selective_repeat=hello.selective_repeat,
            ).to_json()
        )
        self._end_setup()
        what = f"file {hello.name!r}" if hello.purpose is Purpose.FILE else "perf sink"
        log.info(
            "%s: %s over %s, %d bytes, qp %#x <- %#x (%d QP(s))",
            self.peer, what, hello.transport, hello.length, qp, hello.qp, len(local),
        )  # fmt: skip

    def _commit(self, commit: Commit) -> None:
        hello, part = self.hello, self.part
        assert hello is not None
        if hello.purpose is not Purpose.FILE:
            raise ProtocolError("'commit' ends a file transfer, this is a sink")
        assert part is not None and hello.name is not None
        if self.bytes_received < hello.length:
            raise TransferFailedError(
                f"commit after {self.bytes_received} of {hello.length} bytes arrived"
            )
        stored = part.sha256()
        if stored != commit.sha256:
            code = ErrorCode.TRANSFER_FAILED
            self._refuse(code, f"received bytes hash to {stored}, sender says {commit.sha256}")
            return
        self._release_region()
        try:
            path = part.commit(hello.name)
        except OSError as exc:
            self._refuse(ErrorCode.TRANSFER_FAILED, f"cannot store {hello.name}: {exc.strerror}")
            return
        self.part = None
        log.info("%s: stored %s (%d bytes, sha256 %s)", self.peer, path, hello.length, stored)
        self.channel.send(Committed(sha256=stored, path=str(path), length=hello.length).to_json())
        self.end(None)

    def _farewell(self) -> None:
        self.channel.send(Farewell(receiver=self.receiver_stats()).to_json())
        self.end(None)

    def receiver_stats(self) -> dict[str, Any]:
        """What this side saw of the transfer (sent back in the farewell)."""
        result: dict[str, Any] = {
            "bytes_received": self.bytes_received,
            "messages_received": self.messages_received,
            "writes_rejected": self.writes_rejected,
            "drops": self.runtime.pool.drops(),
            "io": self.runtime.io.counters(),
        }
        if self.qps:
            pool = self.runtime.pool
            stats = merged_stats([pool.connection_stats(qp) for qp in self.qps])
            result["connection"] = connection_stats_to_json(stats, with_evs=False)
            if isinstance(self._region_owner, RoceEndpoint):
                each = [self._region_owner.roce_stats(qp) for qp in self.qps]
                result["roce"] = roce_stats_to_json(merged_roce_stats(each))
        return result

    # --- MRC events -----------------------------------------------------------------------

    def _on_event(self, event: Event) -> None:
        if isinstance(event, MessageReceived):
            self.bytes_received += event.length
            self.messages_received += 1
        elif isinstance(event, WriteRejected):
            self.writes_rejected += 1
            log.warning("%s: write rejected: %s", self.peer, event.reason)
        else:
            log.info("%s: %s", self.peer, event)

    # --- teardown -------------------------------------------------------------------------

    def _end_setup(self) -> None:
        if self._in_setup:
            self._in_setup = False
            self.server.budget.end_setup(self.peer_host)

    def _release_region(self) -> None:
        """Withdraw the region from the core (later writes to it are refused)."""
        if self.region is not None:
            assert self._region_owner is not None
            self._region_owner.memory.deregister(self.region.rkey)
            self.region = None

    def end(self, reason: str | None) -> None:
        """Close the MRC connection, free the region, close the channel (once)."""
        if self._ended:
            return
        self._ended = True
        if self._hello_timer is not None:
            self._hello_timer.cancel()
        runtime = self.runtime
        for qp in self.qps:
            runtime.on_events(qp, None)
            runtime.pool.close(qp)
        self.qps = ()
        self._release_region()
        if self.part is not None:
            self.part.discard()
            self.part = None
        if self.grant is not None:
            self.grant.release()
        self._end_setup()
        self.channel.close_after_flush()
        self.server.sessions.discard(self)
        if reason is not None:
            log.info("%s: session ended: %s", self.peer, reason)
