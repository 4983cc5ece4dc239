"""The application API (OCP's ``mrc.h``), in Python, over the host's running agent.

A ``Context`` is one connection to the agent's control socket; everything made through it
(completion channels, CQs, protection domains, regions, QPs) lives in the agent until it is
destroyed or the context closes, and dies with the process that made it. In OCP's order::

    with Context.open() as ctx:                           # mrc_create_context
        channel = ctx.create_comp_channel()               # mrc_create_comp_channel
        cq = ctx.create_cq(128, channel=channel)          # mrc_create_cq
        pd = ctx.alloc_pd()                               # ibv_alloc_pd
        mr = pd.reg_mr(1 << 20, Access.LOCAL_WRITE | Access.REMOTE_WRITE)   # ibv_reg_mr
        qp = ctx.create_qp(pd, cq, cq, max_send_wr=128, max_recv_wr=128)    # mrc_create_qp
        qp.modify(QpState.INIT, ev_profile_id=0, cc_profile_id=0)           # mrc_modify_qp
        qp.modify(QpState.RTR, dest_qp_num=peer.qpn, rq_psn=peer.psn, dgid=peer.gid)
        qp.modify(QpState.RTS, sq_psn=my_psn)
        qp.post_send(SendWR(1, [Sge(mr.addr, 4096, mr.lkey)], peer.addr, peer.rkey,
                            WrOpcode.RDMA_WRITE_WITH_IMM, imm_data=7))      # mrc_post_send
        for wc in cq.poll(16): ...                        # mrc_poll_cq

Memory is the difference from verbs: the agent must see the bytes, so a region is memory the
API allocates (a sealed memfd, handed to the agent over the socket and mapped by both):
``mr.buf`` is the application's view of it, ``mr.addr`` its address for work requests.

Calls check what they can before anything is sent, and raise an ``ApiError`` naming the
field (a QP used before RTS, an L_Key of another protection domain, an SGE outside its
region, a full send queue); what only the agent or the peer can judge (a wrong R_Key, a peer
gone) comes back as a completion with an error status and the QP in ERR. ``post_send``,
``post_recv`` and ``req_notify_cq`` do not wait for the agent; everything else does.

A completion channel and the context's asynchronous events are file descriptors
(``channel.fileno()``, ``ctx.async_fd``) that ``selectors`` or asyncio can wait on. The
connection to the agent itself is ``agent.api.link``'s.
"""

from __future__ import annotations

import contextlib
import fcntl
import mmap
import os
import socket
import time
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from agent.api.errors import (
    AgentGone,
    ApiError,
    InvalidArgument,
    NotSupported,
    OutOfResources,
    PermissionDenied,
    from_json,
)
from agent.api.link import AgentLink, Message, Pump, read_line, wait_readable
from agent.api.types import (
    Access,
    AsyncEvent,
    DeviceAttr,
    EventType,
    QpState,
    QpType,
    RecvWR,
    SendFlags,
    SendWR,
    WcOpcode,
    WcStatus,
    WorkCompletion,
    WrOpcode,
)
from agent.io.control_server import default_socket_path

_U32 = 0xFFFFFFFF
_U64 = (1 << 64) - 1


class CompChannel:
    """A completion channel (``mrc_comp_channel``): ``fileno()`` becomes readable when a CQ
    armed with ``req_notify`` gets a completion."""

    def __init__(self, context: Context, handle: int, sock: socket.socket) -> None:
        self.context = context
        self.handle = handle
        self._sock = sock
        self._buffer = bytearray()
        self.unacked: dict[int, int] = {}

    def fileno(self) -> int:
        """The descriptor to wait on (``mrc_get_comp_channel_fd``)."""
        return self._sock.fileno()

    def get_cq_event(self, timeout: float | None = None) -> CQ | None:
        """The CQ that has an event (``mrc_get_cq_event``), waiting up to ``timeout``
        seconds (None: forever); None if none came. Acknowledge it with ``ack_cq_events``."""
        while True:
            message = read_line(self._sock, self._buffer)
            if message is not None:
                break
            if not wait_readable(self._sock, timeout, self.context.pump, self.context.clock):
                return None
        cq = self.context.cqs.get(int(message.get("cq", -1)))
        if cq is None:
            return None
        cq.notified = max(cq.notified, int(message.get("s", 0)))
        self.unacked[cq.handle] = self.unacked.get(cq.handle, 0) + 1
        return cq

    def ack_cq_events(self, cq: CQ, count: int) -> None:
        """Acknowledge ``count`` events of ``cq`` (``mrc_ack_cq_events``)."""
        left = self.unacked.get(cq.handle, 0) - count
        if left < 0:
            raise InvalidArgument(
                f"only {count + left} events of CQ {cq.handle} unacked", "nevents"
            )
        self.unacked[cq.handle] = left

    def destroy(self) -> None:
        """``mrc_destroy_comp_channel`` (``Busy`` while a CQ uses it)."""
        self.context.link.request("api.channel.destroy", channel=self.handle)
        self._sock.close()


class CQ:
    """A completion queue (``mrc_cq``)."""

    def __init__(
        self, context: Context, handle: int, cqe: int, cq_context: Any, channel: CompChannel | None
    ) -> None:
        self.context = context
        self.handle = handle
        self.cqe = cqe
        self.cq_context = cq_context
        self.channel = channel
        self.entries: deque[Any] = deque()
        #: Entries the agent pushed (its sequence), and the latest a notification announced.
        self.seq = 0
        self.notified = 0
        self.overrun = False

    def _take(self, message: Message) -> None:
        self.seq = max(self.seq, int(message.get("s", 0)))
        wr_id, status, opcode, qp_num, byte_len, imm, reason = message["w"]
        self.entries.append(
            WorkCompletion(wr_id, WcStatus(status), WcOpcode(opcode), qp_num, byte_len, imm, reason)
        )
        if len(self.entries) > self.cqe and not self.overrun:
            self.overrun = True
            self.context.local_event(AsyncEvent(EventType.CQ_ERR, self.handle, "CQ overrun"))

    def poll(self, num_entries: int = 16) -> list[WorkCompletion]:
        """Up to ``num_entries`` completions, oldest first (``mrc_poll_cq``); an empty list
        when there are none. Never waits, except for completions a notification announced
        and the socket has not delivered yet."""
        context = self.context
        context.link.read(block=False)
        while self.seq < self.notified:
            context.link.read(block=True)
        context.raise_pending()
        out: list[Any] = []
        while self.entries and len(out) < num_entries:
            out.append(self.entries.popleft())
        return out

    def req_notify(self, solicited_only: bool = False) -> None:
        """Arm the CQ: its next completion wakes its channel (``mrc_req_notify_cq``)."""
        if self.channel is None:
            raise InvalidArgument("this CQ has no completion channel", "channel")
        self.context.link.submit(
            "api.cq.notify", cq=self.handle, seen=self.seq, solicited=solicited_only
        )

    def destroy(self) -> None:
        """``mrc_destroy_cq`` (``Busy`` while a QP completes into it)."""
        self.context.link.request("api.cq.destroy", cq=self.handle)
        self.context.cqs.pop(self.handle, None)


class PD:
    """A protection domain: regions and QPs of one PD only see each other."""

    def __init__(self, context: Context, handle: int) -> None:
        self.context = context
        self.handle = handle

    def reg_mr(self, length: int, access: Access = Access.LOCAL_WRITE) -> MR:
        """A new region of ``length`` bytes (``ibv_reg_mr``; the memory is made here)."""
        return self.context.reg_mr(self, length, access)

    def dealloc(self) -> None:
        """``ibv_dealloc_pd`` (``Busy`` while regions or QPs use it)."""
        self.context.link.request("api.pd.dealloc", pd=self.handle)


class MR:
    """A registered region: ``buf`` is its memory, ``addr`` its address in work requests,
    ``lkey`` for this host's requests, ``rkey`` for the peer's (0 without REMOTE_WRITE)."""

    def __init__(
        self, context: Context, pd: PD, mm: mmap.mmap, result: dict[str, Any], access: Access
    ) -> None:
        self.context = context
        self.pd = pd
        self._mm = mm
        self.buf = memoryview(mm)
        self.lkey = int(result["lkey"])
        self.rkey = int(result["rkey"])
        self.addr = int(result["addr"])
        self.length = int(result["length"])
        self.access = access
        self.registered = True

    def dereg(self) -> None:
        """``ibv_dereg_mr``: the peer can no longer write here."""
        if self.registered:
            self.registered = False
            self.context.regions.pop(self.lkey, None)
            self.context.link.request("api.mr.dereg", lkey=self.lkey)
            self.buf.release()
            self._mm.close()


class QP:
    """An MRC QP (``mrc_qp``), or an RC one (``qp_type``). ``state`` mirrors the agent's (an
    error there sets ERR)."""

    def __init__(
        self,
        context: Context,
        pd: PD,
        send_cq: CQ,
        recv_cq: CQ,
        result: dict[str, Any],
        sq_sig_all: bool,
    ) -> None:
        self.context = context
        self.pd = pd
        self.send_cq = send_cq
        self.recv_cq = recv_cq
        self.qp_num = int(result["qp_num"])
        self.qp_type = QpType[result.get("qp_type", QpType.MRC.name)]
        #: An RC QP's RoCE profile as its agent runs it (None for MRC).
        self.roce_profile: str | None = result.get("roce_profile")
        self.max_send_wr = int(result["max_send_wr"])
        self.max_recv_wr = int(result["max_recv_wr"])
        self.sq_sig_all = sq_sig_all
        self.state = QpState.RESET
        self.error_reason = ""
        self.max_wimm = 0
        self._posted = 0
        self._retired = 0
        self._opcodes: deque[WrOpcode] = deque()
        self._wimm = 0
        self._recv_posted = 0

    # --- state --------------------------------------------------------------------------------

    def modify(
        self,
        qp_state: QpState,
        *,
        cur_qp_state: QpState | None = None,
        ev_profile_id: int | None = None,
        cc_profile_id: int | None = None,
        qp_hint: object = None,
        dest_qp_num: int | None = None,
        rq_psn: int | None = None,
        dgid: str | None = None,
        dgids: Sequence[str] | None = None,
        path_mtu: int | None = None,
        max_wimm_dest: int | None = None,
        mpr_dest: int | None = None,
        cap: int | None = None,
        sq_psn: int | None = None,
        max_wimm: int | None = None,
        mpr: int | None = None,
        timeout: int | None = None,
        retry: tuple[int, int] | None = None,
    ) -> dict[str, Any]:
        """``mrc_modify_qp``: RESET -> INIT (profiles) -> RTR (peer) -> RTS (send PSN), or
        ERR / RESET from anywhere. The keyword arguments are OCP's mask bits: only those
        given are set, and each move takes its own (one of another move is refused by name;
        ``docs/api.md``). Returns the QP's attributes after the change."""
        attrs: dict[str, Any] = {
            "ev_profile_id": ev_profile_id,
            "cc_profile_id": cc_profile_id,
            "qp_hint": qp_hint,
            "dest_qp_num": dest_qp_num,
            "rq_psn": rq_psn,
            "dgid": dgid,
            "dgids": list(dgids) if dgids is not None else None,
            "path_mtu": path_mtu,
            "max_wimm_dest": max_wimm_dest,
            "mpr_dest": mpr_dest,
            "cap": cap,
            "sq_psn": sq_psn,
            "max_wimm": max_wimm,
            "mpr": mpr,
            "timeout": timeout,
        }
        if retry is not None:
            attrs["retry_linear"], attrs["retry_exp"] = retry
        attrs = {key: value for key, value in attrs.items() if value is not None}
        request: dict[str, Any] = {
            "qp": self.qp_num,
            "qp_state": QpState(qp_state).name,
            "attrs": attrs,
        }
        if cur_qp_state is not None:
            request["cur_qp_state"] = QpState(cur_qp_state).name
        result = self.context.link.request("api.qp.modify", **request)
        self.state = QpState[result["qp_state"]]
        self.max_wimm = int(result.get("max_wimm", 0))
        if self.state is QpState.RESET:
            self._opcodes.clear()
            self._posted = self._retired = self._wimm = self._recv_posted = 0
        return result

    def query(self) -> dict[str, Any]:
        """``mrc_query_qp``: state, profiles, peer, PSNs, limits."""
        result = self.context.link.request("api.qp.query", qp=self.qp_num)
        self.state = QpState[result["qp_state"]]
        return result

    def destroy(self) -> None:
        """``mrc_destroy_qp``: the connection closes (the peer's QP fails)."""
        self.context.link.request("api.qp.destroy", qp=self.qp_num)
        self.context.qps.pop(self.qp_num, None)

    # --- work requests ------------------------------------------------------------------------

    @property
    def send_queue_free(self) -> int:
        """Send WRs that may still be posted."""
        return self.max_send_wr - (self._posted - self._retired)

    def post_send(self, wrs: SendWR | Iterable[SendWR]) -> None:
        """``mrc_post_send`` of one WR or several (all checked first; none is sent if one is
        wrong, and the error names it: ``wr[2].sg_list[0].lkey``)."""
        context = self.context
        context.raise_pending()
        batch = [wrs] if isinstance(wrs, SendWR) else list(wrs)
        context.link.read(block=False)
        if self.state is not QpState.RTS:
            reason = f" ({self.error_reason})" if self.error_reason else ""
            raise InvalidArgument(
                f"the QP is {self.state.name}{reason}: post_send needs RTS", "qp_state"
            )
        free = self.send_queue_free
        if len(batch) > free:
            raise OutOfResources(f"the send queue has room for {free} of {len(batch)} WRs", "wr")
        wimm = self._wimm
        lines = []
        for index, wr in enumerate(batch):
            where = f"wr[{index}]"
            opcode = WrOpcode(wr.opcode)
            if opcode not in (WrOpcode.RDMA_WRITE, WrOpcode.RDMA_WRITE_WITH_IMM):
                raise NotSupported(
                    f"{opcode.name}: MRC posts RDMA WRITE (with immediate) only", f"{where}.opcode"
                )
            with_imm = opcode is WrOpcode.RDMA_WRITE_WITH_IMM
            if with_imm:
                if wr.imm_data is None or not 0 <= wr.imm_data <= _U32:
                    raise InvalidArgument("needs a 32-bit value", f"{where}.imm_data")
                wimm += 1
                if self.max_wimm and wimm > self.max_wimm:
                    raise OutOfResources(
                        f"max_wimm ({self.max_wimm}) WRITEs with immediate would be outstanding",
                        where,
                    )
            elif wr.imm_data is not None:
                raise InvalidArgument("only RDMA_WRITE_WITH_IMM carries one", f"{where}.imm_data")
            if len(wr.sg_list) != 1:
                raise NotSupported("one SGE per WR", f"{where}.sg_list")
            sge = wr.sg_list[0]
            context.check_local(self.pd, sge.lkey, sge.addr, sge.length, f"{where}.sg_list[0]")
            if not 0 <= wr.rkey <= _U32:
                raise InvalidArgument("must be 32 bits", f"{where}.rkey")
            if not 0 <= wr.remote_addr <= _U64 - sge.length:
                raise InvalidArgument(
                    "remote_addr + length must fit 64 bits", f"{where}.remote_addr"
                )
            if not 0 <= wr.wr_id <= _U64:
                raise InvalidArgument("must be 64 bits", f"{where}.wr_id")
            flags = int(SendFlags(wr.send_flags))
            lines.append(
                [
                    wr.wr_id,
                    int(opcode),
                    sge.addr,
                    sge.length,
                    sge.lkey,
                    wr.remote_addr,
                    wr.rkey,
                    wr.imm_data if with_imm else None,
                    flags,
                ]
            )
        for wr in batch:
            self._opcodes.append(WrOpcode(wr.opcode))
        self._posted += len(batch)
        self._wimm = wimm
        context.link.submit("api.post_send", qp=self.qp_num, wr=lines)

    def post_recv(self, wrs: RecvWR | Iterable[RecvWR]) -> None:
        """``mrc_post_recv``: buffers for WRITEs with immediate (one each; post them before
        the peer writes: MRC has no RNR)."""
        context = self.context
        context.raise_pending()
        batch = [wrs] if isinstance(wrs, RecvWR) else list(wrs)
        context.link.read(block=False)
        if self.state not in (QpState.INIT, QpState.RTR, QpState.RTS):
            raise InvalidArgument(
                f"the QP is {self.state.name}: post_recv needs INIT, RTR or RTS", "qp_state"
            )
        if self._recv_posted + len(batch) > self.max_recv_wr:
            raise OutOfResources(f"the receive queue holds {self.max_recv_wr} WRs", "wr")
        lines = []
        for index, wr in enumerate(batch):
            where = f"wr[{index}]"
            if len(wr.sg_list) > 1:
                raise NotSupported("at most one SGE per receive WR", f"{where}.sg_list")
            sges = []
            for sge in wr.sg_list:
                region = context.check_local(
                    self.pd, sge.lkey, sge.addr, sge.length, f"{where}.sg_list[0]"
                )
                if not region.access & Access.LOCAL_WRITE:
                    raise InvalidArgument(
                        "the region lacks LOCAL_WRITE", f"{where}.sg_list[0].lkey"
                    )
                sges.append([sge.addr, sge.length, sge.lkey])
            lines.append([wr.wr_id, sges])
        self._recv_posted += len(batch)
        context.link.submit("api.post_recv", qp=self.qp_num, wr=lines)

    def _retire_to(self, total: int) -> None:
        while self._retired < total and self._opcodes:
            if self._opcodes.popleft() is WrOpcode.RDMA_WRITE_WITH_IMM:
                self._wimm -= 1
            self._retired += 1
        self._retired = max(self._retired, total)


class Context:
    """An MRC context (``mrc_context``): one connection to the agent and what it holds."""

    def __init__(
        self,
        sock: socket.socket,
        pump: Pump | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.pump = pump
        #: What timeouts are measured on (an in-process agent's clock when pumped).
        self.clock = clock
        self.link = AgentLink(sock, pump)
        self.link.on_push = self._on_push
        self.cqs: dict[int, CQ] = {}
        self.qps: dict[int, QP] = {}
        self.regions: dict[int, MR] = {}
        self._pending: list[ApiError] = []
        self._local_events: deque[AsyncEvent] = deque()
        self._async_buffer = bytearray()
        mine, theirs = socket.socketpair()
        try:
            result = self.link.request("api.open", fds=[theirs.fileno()])
        except BaseException:
            mine.close()
            theirs.close()
            self.link.close()
            raise
        theirs.close()
        self._async = mine
        self.privileged = bool(result.get("privileged"))
        device = result["device"]
        self.device = DeviceAttr(**{**device, "ports": tuple(device["ports"])})

    @classmethod
    def open(cls, path: str | None = None) -> Context:
        """A context on the host's running agent (``mrc_create_context``); ``path`` is its
        control socket (default ``$MRC_AGENT_SOCKET`` or ``/run/mrc-agent.sock``)."""
        where = path or default_socket_path()
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.connect(where)
        except OSError as exc:
            sock.close()
            if exc.errno in (13, 1):
                raise PermissionDenied(
                    f"the agent's socket {where} is not open to this user", "path"
                ) from None
            raise AgentGone(f"no agent answers at {where}: {exc.strerror}", "path") from None
        return cls(sock)

    # --- plumbing -----------------------------------------------------------------------------

    def _on_push(self, message: Message) -> None:
        kind = message.get("p")
        if kind == "wc":
            cq = self.cqs.get(int(message.get("cq", -1)))
            if cq is not None:
                cq._take(message)
                wc = cq.entries[-1]
                if wc.opcode is WcOpcode.RECV_RDMA_WITH_IMM:
                    qp = self.qps.get(wc.qp_num)
                    if qp is not None:
                        qp._recv_posted -= 1
            done = message.get("sq")
            if isinstance(done, list):
                qp = self.qps.get(done[0])
                if qp is not None:
                    qp._retire_to(done[1])
        elif kind == "sq":
            qp = self.qps.get(int(message.get("qp", -1)))
            if qp is not None:
                qp._retire_to(int(message.get("n", 0)))
        elif kind == "qp":
            qp = self.qps.get(int(message.get("qp", -1)))
            if qp is not None:
                qp.state = QpState[message.get("state", "ERR")]
                qp.error_reason = str(message.get("reason", ""))
        elif kind == "ev":
            cq = self.cqs.get(int(message.get("cq", -1)))
            if cq is not None:
                cq._take(message)
        elif kind == "err":
            self._pending.append(from_json(message.get("error")))

    def raise_pending(self) -> None:
        """Raise an error the agent reported about an earlier unanswered call."""
        if self._pending:
            raise self._pending.pop(0)

    def local_event(self, event: AsyncEvent) -> None:
        """An asynchronous event the client itself found (a CQ overrun)."""
        self._local_events.append(event)

    def check_local(self, pd: PD, lkey: int, addr: int, length: int, where: str) -> MR:
        """The region of ``pd`` that ``lkey`` names, holding ``[addr, addr + length)``."""
        region = self.regions.get(lkey)
        if region is None or region.pd is not pd:
            raise InvalidArgument(
                f"no region with L_Key {lkey:#x} in this QP's protection domain", f"{where}.lkey"
            )
        if length < 0 or addr < region.addr or addr + length > region.addr + region.length:
            raise InvalidArgument(
                f"[{addr:#x}, +{length}) lies outside the region [{region.addr:#x}, "
                f"+{region.length})",
                f"{where}.addr",
            )
        return region

    # --- calls ----------------------------------------------------------------------------------

    def query_device(self) -> DeviceAttr:
        """``mrc_query_device``."""
        result = self.link.request("api.query_device")
        return DeviceAttr(**{**result, "ports": tuple(result["ports"])})

    def query_port(self, port_num: int) -> dict[str, Any]:
        """A port's (plane's) state, admin state and address (``ibv_query_port``)."""
        return self.link.request("api.query_port", port=port_num)

    def create_comp_channel(self) -> CompChannel:
        """``mrc_create_comp_channel``."""
        mine, theirs = socket.socketpair()
        try:
            result = self.link.request("api.channel.create", fds=[theirs.fileno()])
        except BaseException:
            mine.close()
            raise
        finally:
            theirs.close()
        mine.setblocking(False)
        return CompChannel(self, int(result["channel"]), mine)

    def create_cq(
        self,
        cqe: int,
        cq_context: Any = None,
        channel: CompChannel | None = None,
        comp_vector: int = 0,
    ) -> CQ:
        """``mrc_create_cq`` (``comp_vector`` is accepted and has no effect)."""
        del comp_vector
        result = self.link.request(
            "api.cq.create", cqe=cqe, channel=channel.handle if channel is not None else None
        )
        cq = CQ(self, int(result["cq"]), int(result["cqe"]), cq_context, channel)
        self.cqs[cq.handle] = cq
        return cq

    def alloc_pd(self) -> PD:
        """``ibv_alloc_pd``."""
        return PD(self, int(self.link.request("api.pd.alloc")["pd"]))

    def reg_mr(self, pd: PD, length: int, access: Access = Access.LOCAL_WRITE) -> MR:
        """A region of ``length`` zero bytes in ``pd``, shared with the agent."""
        if length < 1:
            raise InvalidArgument(f"must be at least 1, got {length}", "length")
        fd = os.memfd_create("mrc-region", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
        try:
            os.ftruncate(fd, length)
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_SEAL)
            mm = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            try:
                result = self.link.request(
                    "api.mr.reg", fds=[fd], pd=pd.handle, length=length, access=int(access)
                )
            except BaseException:
                mm.close()
                raise
        finally:
            os.close(fd)
        region = MR(self, pd, mm, result, Access(access))
        self.regions[region.lkey] = region
        return region

    def create_qp(
        self,
        pd: PD,
        send_cq: CQ,
        recv_cq: CQ,
        max_send_wr: int = 128,
        max_recv_wr: int = 128,
        max_send_sge: int = 1,
        max_recv_sge: int = 1,
        sq_sig_all: bool = False,
        qp_type: QpType = QpType.MRC,
        roce_profile: str | None = None,
    ) -> QP:
        """``mrc_create_qp``: a QP in RESET, with its number (``qp.qp_num``). ``qp_type``
        ``QpType.RC`` makes a RoCEv2 RC QP instead (the testbed's baseline, docs/api.md),
        running ``roce_profile`` (``agent.roce.profiles``; None: perftest's)."""
        options: dict[str, Any] = {} if roce_profile is None else {"roce_profile": roce_profile}
        result = self.link.request(
            "api.qp.create",
            pd=pd.handle,
            send_cq=send_cq.handle,
            recv_cq=recv_cq.handle,
            max_send_wr=max_send_wr,
            max_recv_wr=max_recv_wr,
            max_send_sge=max_send_sge,
            max_recv_sge=max_recv_sge,
            sq_sig_all=sq_sig_all,
            qp_type=QpType(qp_type).name,
            **options,
        )
        qp = QP(self, pd, send_cq, recv_cq, result, sq_sig_all)
        self.qps[qp.qp_num] = qp
        return qp

    @property
    def async_fd(self) -> int:
        """The descriptor asynchronous events make readable (``ibv_context.async_fd``)."""
        return self._async.fileno()

    def get_async_event(self, timeout: float | None = None) -> AsyncEvent | None:
        """The next asynchronous event (``mrc_get_async_event``), waiting up to ``timeout``
        seconds (None: forever); None if none came."""
        if self._local_events:
            return self._local_events.popleft()
        while True:
            self._async.setblocking(False)
            message = read_line(self._async, self._async_buffer)
            if message is not None:
                return AsyncEvent(EventType(message["t"]), int(message["e"]), str(message["r"]))
            if not wait_readable(self._async, timeout, self.pump, self.clock):
                return None

    def ack_async_event(self, event: AsyncEvent) -> None:
        """``mrc_ack_async_event`` (nothing to release here)."""
        del event

    def close(self) -> None:
        """``mrc_destroy_context``: the agent releases everything this context held."""
        if self.link.closed:
            return
        for region in list(self.regions.values()):
            region.registered = False
            region.buf.release()
            with contextlib.suppress(BufferError):
                region._mm.close()
        self.regions.clear()
        self.link.close()
        self._async.close()

    def __enter__(self) -> Context:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["CQ", "MR", "PD", "QP", "ApiError", "CompChannel", "Context"]
