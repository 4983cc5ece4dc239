"""A host-API client's QP operations in the agent (``mrc.h``): a QP's state machine (RESET ->
INIT -> RTR -> RTS, ERR), its work requests, and its core's events turned into completions.

This is what MRC and RC QPs share; what each type adds (its profiles, where its connection
opens, what its failure means) is ``agent.api.mrc_qp``'s and ``agent.api.rc_qp``'s. Posted
WRITEs are read straight from the client's mapped region; completions leave in posting order.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import Any

from agent.api.errors import ApiError, InvalidArgument, NotFound, NotSupported, OutOfResources
from agent.api.ev_states import EvStates
from agent.api.mrc_qp import MrcQpKind
from agent.api.objects import ClientObjects
from agent.api.outbox import Outbox
from agent.api.profiles import ProfileRegistry
from agent.api.qp_kind import QpKind, expect_state
from agent.api.qp_timing import max_mpr
from agent.api.qp_transitions import given, shared
from agent.api.rc_qp import RcQpKind, roce_profile_field
from agent.api.requests import (
    U24,
    U32,
    U64,
    enum_field,
    int_field,
    list_field,
    required,
)
from agent.api.resources import FLUSH, MAX_QPS, MAX_WIMM, MAX_WRS_PER_POST, QpRecord, SendRecord
from agent.api.types import (
    EventType,
    QpState,
    QpType,
    SendFlags,
    WcOpcode,
    WcStatus,
    WrOpcode,
)
from agent.core import (
    ConnectionClosed,
    ConnectionFailed,
    Event,
    MessageAcked,
    MessageFailed,
    MessageReceived,
    SendQueueFull,
)
from agent.io.addresses import format_address
from agent.io.json_lines import Message
from agent.io.runtime import AgentRuntime

log = logging.getLogger(__name__)


class QpOps:
    """One client's QPs: made, moved through their states, posted to, and closed."""

    def __init__(
        self,
        runtime: AgentRuntime,
        objects: ClientObjects,
        outbox: Outbox,
        registry: ProfileRegistry,
        ev_states: EvStates,
    ) -> None:
        self._runtime = runtime
        self._objects = objects
        self._outbox = outbox
        self._kinds: dict[QpType, QpKind] = {
            QpType.MRC: MrcQpKind(runtime, registry, ev_states, self._on_event),
            QpType.RC: RcQpKind(runtime, self._on_event),
        }
        #: QPs whose send queue moved with no completion to say so, told once per reactor turn.
        self._sq_moved: dict[int, QpRecord] = {}

    # --- QPs ------------------------------------------------------------------------------------

    def _qp(self, message: Message) -> QpRecord:
        num = int_field(message, "qp", 0, U24, "qp_num")
        qp = self._objects.qps.get(num)
        if qp is None:
            raise NotFound(f"no QP {num:#x} in this context", "qp_num")
        return qp

    def create(self, message: Message) -> dict[str, Any]:
        objects = self._objects
        if len(objects.qps) >= MAX_QPS:
            raise OutOfResources(f"at most {MAX_QPS} QPs", "qp")
        pd = objects.pd(message)
        send_cq = objects.cq(message, "send_cq")
        recv_cq = objects.cq(message, "recv_cq")
        qp_type = enum_field(QpType, message.get("qp_type", QpType.MRC.name), "qp_type")
        roce_profile = roce_profile_field(message, qp_type)
        limit = self._kinds[qp_type].max_send_wr()
        max_send_wr = int_field(message, "max_send_wr", 1, limit, "cap.max_send_wr")
        max_recv_wr = int_field(message, "max_recv_wr", 0, MAX_WIMM, "cap.max_recv_wr")
        if int_field(message, "max_send_sge", 0, 1, "cap.max_send_sge") > 1:
            raise NotSupported("one SGE per WR", "cap.max_send_sge")
        int_field(message, "max_recv_sge", 0, 1, "cap.max_recv_sge")
        num = self._runtime.pool.allocate_qp(self._runtime.pool.default)
        qp = QpRecord(
            num, pd, send_cq, recv_cq, max_send_wr, max_recv_wr, bool(message.get("sq_sig_all"))
        )
        qp.qp_type = qp_type
        qp.roce_profile = roce_profile
        send_cq.users += 1
        recv_cq.users += 1
        objects.qps[num] = qp
        created: dict[str, Any] = {
            "qp_num": num,
            "max_send_wr": max_send_wr,
            "max_recv_wr": max_recv_wr,
            "qp_type": qp_type.name,
        }
        if roce_profile is not None:
            created["roce_profile"] = roce_profile
        return created

    def modify(self, message: Message) -> dict[str, Any]:
        """``mrc_modify_qp``: every attribute is checked before the QP changes, so a refused
        move changes nothing (``agent.api.qp_transitions`` says what each move takes)."""
        qp = self._qp(message)
        target = enum_field(QpState, required(message, "qp_state"), "qp_state")
        raw = message.get("attrs") or {}
        if not isinstance(raw, dict):
            raise InvalidArgument("must be an object", "attrs")
        current = message.get("cur_qp_state")
        if current is not None and enum_field(QpState, current, "cur_qp_state") is not qp.state:
            raise InvalidArgument(f"the QP is {qp.state.name}", "cur_qp_state")
        attrs = given(target, raw)
        kind = self._kinds[qp.qp_type]
        if target is QpState.ERR:
            self._to_error(qp, "moved to ERR by the application")
        elif target is QpState.RESET:
            self._reset(qp)
        elif target is QpState.INIT:
            expect_state(qp, QpState.INIT, QpState.RESET, QpState.INIT)
            if "qp_hint" in attrs:
                raise NotSupported("QP hints are not offered (max_qp_hint 0)", "qp_hint")
            settings = self._shared(attrs)
            kind.to_init(qp, attrs)
            qp.attrs.update(settings)
            qp.state = QpState.INIT
        elif target is QpState.RTR:
            self._to_rtr(qp, kind, attrs)
        elif target is QpState.RTS:
            expect_state(qp, QpState.RTS, QpState.RTR, QpState.RTS)
            settings = self._shared(attrs)
            kind.to_rts(qp, attrs)
            qp.attrs.update(settings)
            qp.state = QpState.RTS
        else:
            raise NotSupported(f"{target.name} is not an MRC QP state", "qp_state")
        return self._attrs(qp)

    def _shared(self, attrs: dict[str, Any]) -> dict[str, int]:
        psn_window = self._runtime.pool.default.config.max_psn_window
        return shared(attrs, max_mpr(psn_window))

    def _to_rtr(self, qp: QpRecord, kind: QpKind, attrs: dict[str, Any]) -> None:
        expect_state(qp, QpState.RTR, QpState.INIT)
        dest = int_field(attrs, "dest_qp_num", 2, U24)
        rq_psn = int_field(attrs, "rq_psn", 0, U24)
        peers = self._peer_addresses(attrs)
        settings = self._shared(attrs)
        kind.to_rtr(qp, dest, rq_psn, peers, settings.get("path_mtu"))
        qp.attrs.update(settings)
        qp.attrs.update(dest_qp_num=dest, rq_psn=rq_psn, dgids=[format_address(p) for p in peers])
        qp.state = QpState.RTR

    def _peer_addresses(self, attrs: dict[str, Any]) -> tuple[bytes, ...]:
        raw = attrs.get("dgids")
        if raw is None and attrs.get("dgid") is not None:
            raw = [attrs["dgid"]]
        if not isinstance(raw, list) or not raw:
            raise InvalidArgument("the peer's address on each plane is needed", "ah_attr.dgid")
        local = self._runtime.local_addresses
        if len(raw) != len(local):
            raise InvalidArgument(f"{len(raw)} addresses for {len(local)} planes", "ah_attr.dgid")
        packed = []
        for index, text in enumerate(raw):
            try:
                address = ipaddress.ip_address(text)
            except (ValueError, TypeError):
                raise InvalidArgument(
                    f"{text!r} is not an IP address", f"ah_attr.dgid[{index}]"
                ) from None
            if len(address.packed) != len(local[0]):
                raise InvalidArgument("not of this host's IP version", f"ah_attr.dgid[{index}]")
            packed.append(address.packed)
        return tuple(packed)

    def _attrs(self, qp: QpRecord) -> dict[str, Any]:
        roce = {} if qp.roce_profile is None else {"roce_profile": qp.roce_profile}
        return {
            "qp_num": qp.num,
            "qp_type": qp.qp_type.name,
            **roce,
            "qp_state": qp.state.name,
            "ev_profile_id": qp.ev_profile_id,
            "cc_profile_id": qp.cc_profile_id,
            "max_send_wr": qp.max_send_wr,
            "max_recv_wr": qp.max_recv_wr,
            "sq_sig_all": qp.sq_sig_all,
            "max_wimm": qp.attrs.get("max_wimm", MAX_WIMM),
            "max_wimm_dest": qp.attrs.get("max_wimm_dest", MAX_WIMM),
            **{k: v for k, v in qp.attrs.items() if k not in ("max_wimm", "max_wimm_dest")},
        }

    def query(self, message: Message) -> dict[str, Any]:
        return self._attrs(self._qp(message))

    def destroy(self, message: Message) -> dict[str, Any]:
        self._destroy(self._qp(message))
        return {}

    def _destroy(self, qp: QpRecord) -> None:
        self._disconnect(qp, "QP destroyed")
        self._runtime.pool.release_qp(qp.num)
        self._kinds[qp.qp_type].released(qp)
        qp.send_cq.users -= 1
        qp.recv_cq.users -= 1
        self._objects.qps.pop(qp.num, None)

    def _disconnect(self, qp: QpRecord, reason: str) -> None:
        """Close the core connection (its peer sees it fail)."""
        if qp.endpoint is None and qp.roce is None:
            return
        self._runtime.on_events(qp.num, None)
        self._runtime.pool.close(qp.num)
        qp.endpoint = qp.roce = None
        self._kinds[qp.qp_type].closed(qp)
        log.info("host API QP %#x closed: %s", qp.num, reason)

    def _reset(self, qp: QpRecord) -> None:
        """Back to RESET: the connection closes, queued work is dropped without completions
        (as verbs' RESET), the profiles are let go; the QP number stays."""
        self._disconnect(qp, "moved to RESET")
        self._kinds[qp.qp_type].released(qp)
        qp.sq.clear()
        qp.by_msn.clear()
        qp.rq.clear()
        qp.pending_imm.clear()
        qp.wimm_outstanding = 0
        qp.attrs.clear()
        qp.state = QpState.RESET
        self._outbox.push({"p": "qp", "qp": qp.num, "state": "RESET", "sq": qp.sq_done, "rq": 0})

    def _to_error(self, qp: QpRecord, reason: str, fatal: bool = False) -> None:
        """The QP enters ERR: its connection closes and every WR still queued completes with
        WR_FLUSH_ERR (in order, after any that completed); ``fatal`` raises QP_FATAL."""
        if qp.state is QpState.ERR:
            return
        qp.state = QpState.ERR
        self._disconnect(qp, reason)
        for rec in qp.sq:
            if not rec.done:
                rec.done, rec.status, rec.reason = True, FLUSH, reason
        qp.by_msn.clear()
        self._retire(qp)
        while qp.rq:
            wr_id = qp.rq.popleft()
            self._outbox.complete(
                qp.recv_cq,
                {
                    "w": [
                        wr_id,
                        int(FLUSH),
                        int(WcOpcode.RECV_RDMA_WITH_IMM),
                        qp.num,
                        0,
                        None,
                        reason,
                    ]
                },
            )
        self._outbox.push({"p": "qp", "qp": qp.num, "state": "ERR", "reason": reason})
        if fatal:
            self._outbox.async_event(EventType.QP_FATAL, qp.num, reason)

    # --- work requests --------------------------------------------------------------------

    def post_send(self, message: Message) -> None:
        qp = self._qp(message)
        wrs = list_field(message, "wr", MAX_WRS_PER_POST)
        for index, raw in enumerate(wrs):
            where = f"wr[{index}]"
            if qp.state is QpState.ERR:
                self._flush_post(qp, raw)
                continue
            try:
                self._post_one(qp, raw, where)
            except ApiError as exc:
                # The client checks all this before posting: only a client that did not is
                # here, and a NIC would fail the WR and put the QP in error.
                wr_id = raw[0] if isinstance(raw, list) and raw and type(raw[0]) is int else 0
                qp.sq.append(
                    SendRecord(
                        wr_id, WrOpcode.RDMA_WRITE, True, 0, True, WcStatus.LOC_QP_OP_ERR, str(exc)
                    )
                )
                self._to_error(qp, f"{where}: {exc}", fatal=True)
        self._runtime.service()

    def _flush_post(self, qp: QpRecord, raw: object) -> None:
        wr_id = raw[0] if isinstance(raw, list) and raw and type(raw[0]) is int else 0
        qp.sq.append(SendRecord(wr_id, WrOpcode.RDMA_WRITE, True, 0, True, FLUSH, "QP in ERR"))
        self._retire(qp)

    def _post_one(self, qp: QpRecord, raw: object, where: str) -> None:
        if not isinstance(raw, list) or len(raw) != 9:
            raise InvalidArgument(
                "a WR is [wr_id, opcode, addr, length, lkey, "
                "remote_addr, rkey, imm_data, send_flags]",
                where,
            )
        wr_id, opcode, addr, length, lkey, remote_addr, rkey, imm, flags = raw
        fields = dict(
            zip(
                ("wr_id", "opcode", "addr", "length", "lkey", "remote_addr", "rkey", "send_flags"),
                (wr_id, opcode, addr, length, lkey, remote_addr, rkey, flags),
                strict=True,
            )
        )
        for key, value in fields.items():
            if type(value) is not int or value < 0:
                raise InvalidArgument("must be an unsigned integer", f"{where}.{key}")
        if qp.state is not QpState.RTS:
            raise InvalidArgument(f"the QP is {qp.state.name}: post_send needs RTS", "qp_state")
        kind = enum_field(WrOpcode, opcode, f"{where}.opcode")
        if kind not in (WrOpcode.RDMA_WRITE, WrOpcode.RDMA_WRITE_WITH_IMM):
            raise NotSupported(
                f"{kind.name}: MRC posts RDMA WRITE (with immediate) only", f"{where}.opcode"
            )
        if len(qp.sq) >= qp.max_send_wr:
            raise OutOfResources(f"the send queue holds {qp.max_send_wr} WRs", where)
        with_imm = kind is WrOpcode.RDMA_WRITE_WITH_IMM
        if with_imm and (type(imm) is not int or not 0 <= imm <= U32):
            raise InvalidArgument(
                "WRITE with immediate needs a 32-bit imm_data", f"{where}.imm_data"
            )
        if with_imm and qp.wimm_outstanding >= qp.attrs.get("max_wimm", MAX_WIMM):
            raise OutOfResources("max_wimm WRITEs with immediate are outstanding", where)
        if rkey > U32 or remote_addr + length > U64 or length > U32:
            raise InvalidArgument("rkey is 32 bits, remote_addr + length 64", where)
        region = self._objects.local(qp.pd, lkey, addr, length, f"{where}.sg_list[0]")
        start = addr - region.va
        data = region.view[start : start + length]
        endpoint = qp.endpoint if qp.endpoint is not None else qp.roce
        assert endpoint is not None
        signaled = bool(flags & SendFlags.SIGNALED) or qp.sq_sig_all
        rec = SendRecord(wr_id, kind, signaled, length)
        try:
            msn = endpoint.post_write(qp.num, data, remote_addr, rkey, imm if with_imm else None)
        except (SendQueueFull, ConnectionClosed) as exc:
            rec.done, rec.status, rec.reason = True, FLUSH, str(exc)
            qp.sq.append(rec)
            self._retire(qp)
            return
        except ValueError as exc:
            raise InvalidArgument(str(exc), where) from None
        qp.sq.append(rec)
        qp.by_msn[msn] = rec
        if with_imm:
            qp.wimm_outstanding += 1

    def post_recv(self, message: Message) -> None:
        qp = self._qp(message)
        wrs = list_field(message, "wr", MAX_WRS_PER_POST)
        for index, raw in enumerate(wrs):
            where = f"wr[{index}]"
            if not isinstance(raw, list) or len(raw) != 2 or type(raw[0]) is not int:
                raise InvalidArgument("a receive WR is [wr_id, [[addr, length, lkey]...]]", where)
            wr_id, sges = raw
            if qp.state not in (QpState.INIT, QpState.RTR, QpState.RTS):
                raise InvalidArgument(
                    f"the QP is {qp.state.name}: post_recv needs INIT, RTR or RTS", "qp_state"
                )
            if not isinstance(sges, list) or len(sges) > 1:
                raise InvalidArgument("at most one SGE", f"{where}.sg_list")
            for sge in sges:
                if (
                    not isinstance(sge, list)
                    or len(sge) != 3
                    or any(type(v) is not int or v < 0 for v in sge)
                ):
                    raise InvalidArgument("an SGE is [addr, length, lkey]", f"{where}.sg_list[0]")
                self._objects.local(
                    qp.pd, sge[2], sge[0], sge[1], f"{where}.sg_list[0]", write=True
                )
            if len(qp.rq) >= qp.max_recv_wr:
                raise OutOfResources(f"the receive queue holds {qp.max_recv_wr} WRs", where)
            qp.rq.append(wr_id)
        while qp.rq and qp.pending_imm:
            self._deliver_imm(qp, *qp.pending_imm.popleft())

    # --- core events ------------------------------------------------------------------------

    def _on_event(self, qp: QpRecord, event: Event) -> None:
        if isinstance(event, MessageAcked):
            rec = qp.by_msn.pop(event.msn, None)
            if rec is not None:
                rec.done = True
                if rec.opcode is WrOpcode.RDMA_WRITE_WITH_IMM:
                    qp.wimm_outstanding -= 1
                self._retire(qp)
        elif isinstance(event, MessageReceived):
            if event.immediate is not None:
                if qp.rq:
                    self._deliver_imm(qp, event.length, event.immediate)
                elif len(qp.pending_imm) < qp.attrs.get("max_wimm_dest", MAX_WIMM):
                    qp.pending_imm.append((event.length, event.immediate))
                else:
                    self._to_error(
                        qp,
                        "a WRITE with immediate arrived with no receive posted "
                        "and max_wimm_dest already held",
                        fatal=True,
                    )
        elif isinstance(event, MessageFailed):
            # The receiver refused it (a remote access error, reported in the completion),
            # or the connection died (retries exhausted: the QP is lost, an async event too).
            refused = event.reason.startswith("receiver refused")
            rec = qp.by_msn.pop(event.msn, None)
            if rec is not None:
                rec.done = True
                rec.status = WcStatus.REM_ACCESS_ERR if refused else WcStatus.RETRY_EXC_ERR
                rec.reason = event.reason
            self._to_error(qp, f"message failed: {event.reason}", fatal=not refused)
        elif isinstance(event, ConnectionFailed):
            self._kinds[qp.qp_type].failed(qp, event.reason)
            self._to_error(qp, event.reason, fatal=True)
        else:
            self._kinds[qp.qp_type].other_event(qp, event)

    def _deliver_imm(self, qp: QpRecord, length: int, immediate: int) -> None:
        wr_id = qp.rq.popleft()
        self._outbox.complete(
            qp.recv_cq,
            {"w": [wr_id, 0, int(WcOpcode.RECV_RDMA_WITH_IMM), qp.num, length, immediate, ""]},
        )

    def _retire(self, qp: QpRecord) -> None:
        """Complete WRs in posting order (RC's guarantee), as far as they are done."""
        sq = qp.sq
        told = True
        while sq and sq[0].done:
            rec = sq.popleft()
            qp.sq_done += 1
            if rec.signaled or rec.status is not WcStatus.SUCCESS:
                self._outbox.complete(
                    qp.send_cq,
                    {
                        "w": [
                            rec.wr_id,
                            int(rec.status),
                            int(WcOpcode.RDMA_WRITE),
                            qp.num,
                            rec.length,
                            None,
                            rec.reason,
                        ],
                        "sq": [qp.num, qp.sq_done],
                    },
                )
                told = True
            else:
                told = False
        if not told:
            # One line per reactor turn however many acknowledgements it brought: a line per
            # unsignaled WRITE costs the agent and the client (often on one core) a write, a
            # read and a JSON round trip each.
            if not self._sq_moved:
                self._runtime.reactor.call_at(self._runtime.clock(), self._tell_sq)
            self._sq_moved[qp.num] = qp

    def _tell_sq(self) -> None:
        """How far each QP's send queue has moved (``_retire``), once for the turn."""
        moved, self._sq_moved = self._sq_moved, {}
        for number, qp in moved.items():
            if self._objects.qps.get(number) is qp:
                self._outbox.push({"p": "sq", "qp": number, "n": qp.sq_done})

    def release(self) -> None:
        """The client is gone: its QPs close (their peers see them fail)."""
        for qp in list(self._objects.qps.values()):
            self._destroy(qp)
