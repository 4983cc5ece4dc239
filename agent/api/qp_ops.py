"""The application's QP operations in the agent: a QP's state machine (RESET -> INIT -> RTR ->
RTS, ERR), its work requests, and the core's events turned into completions.

A QP's connection opens at RTR on the endpoint its CC profile's configuration runs; posted
WRITEs are read straight from the client's mapped region; completions leave in posting order.
An RC QP (``QpType.RC``, the testbed's extension) is the agent's RoCEv2 baseline instead: no
EV or CC profile, and its connection opens at RTS, where the RoCE core gets both PSNs at once
and verbs' ``timeout`` and ``retry_cnt`` (``agent.roce.config``).
"""

from __future__ import annotations

import dataclasses
import ipaddress
import logging
from typing import Any

from agent.api.errors import ApiError, InvalidArgument, NotFound, NotSupported, OutOfResources
from agent.api.qp_timing import (
    DEFAULT_RETRY_LINEAR,
    MTU_256,
    MTU_4096,
    active_mtu,
    mtu_bytes,
    retry_budget,
)
from agent.api.requests import (
    U24,
    U32,
    U64,
    enum_field,
    int_field,
    list_field,
    opt_int_field,
    required,
)
from agent.api.resources import (
    CORE_TO_CTL,
    FLUSH,
    MAX_QPS,
    MAX_WIMM,
    MAX_WRS_PER_POST,
    QpRecord,
    SendRecord,
)
from agent.api.session import SessionBase
from agent.api.types import (
    CtlEvState,
    Ev,
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
    ConnectionSpec,
    Event,
    MessageAcked,
    MessageFailed,
    MessageReceived,
    SendQueueFull,
)
from agent.core.events import EvStateChanged
from agent.io.addresses import format_address
from agent.io.json_lines import Message
from agent.roce import RoceConfig, RoceQpSpec
from agent.roce.config import MAX_RETRY_CNT, MAX_TIMEOUT_EXPONENT

log = logging.getLogger(__name__)

#: What an RC QP's failure reason (``agent.roce.requester``) says, and the status its oldest
#: unfinished WRITE completes with (anything else: its retries ran out).
_ROCE_NAK_STATUS = (
    ("remote access error", WcStatus.REM_ACCESS_ERR),
    ("invalid request", WcStatus.REM_INV_REQ_ERR),
    ("remote operational error", WcStatus.REM_OP_ERR),
)


class QpSession(SessionBase):
    """A session's QP operations (``mrc.h``)."""

    # --- QPs ------------------------------------------------------------------------------------

    def _qp(self, message: Message) -> QpRecord:
        num = int_field(message, "qp", 0, U24, "qp_num")
        qp = self.qps.get(num)
        if qp is None:
            raise NotFound(f"no QP {num:#x} in this context", "qp_num")
        return qp

    def op_qp_create(self, _request: int, message: Message) -> dict[str, Any]:
        if len(self.qps) >= MAX_QPS:
            raise OutOfResources(f"at most {MAX_QPS} QPs", "qp")
        pd = self._pd(message)
        send_cq = self._cq(message, "send_cq")
        recv_cq = self._cq(message, "recv_cq")
        qp_type = enum_field(QpType, message.get("qp_type", QpType.MRC.name), "qp_type")
        limit = self.runtime.pool.default.config.max_unconfirmed_messages
        if qp_type is QpType.RC:
            limit = RoceConfig().send_queue_depth
        max_send_wr = int_field(message, "max_send_wr", 1, limit, "cap.max_send_wr")
        max_recv_wr = int_field(message, "max_recv_wr", 0, MAX_WIMM, "cap.max_recv_wr")
        if int_field(message, "max_send_sge", 0, 1, "cap.max_send_sge") > 1:
            raise NotSupported("one SGE per WR", "cap.max_send_sge")
        int_field(message, "max_recv_sge", 0, 1, "cap.max_recv_sge")
        num = self.runtime.pool.allocate_qp(self.runtime.pool.default)
        qp = QpRecord(
            num, pd, send_cq, recv_cq, max_send_wr, max_recv_wr, bool(message.get("sq_sig_all"))
        )
        qp.qp_type = qp_type
        send_cq.users += 1
        recv_cq.users += 1
        self.qps[num] = qp
        return {
            "qp_num": num,
            "max_send_wr": max_send_wr,
            "max_recv_wr": max_recv_wr,
            "qp_type": qp_type.name,
        }

    def op_qp_modify(self, _request: int, message: Message) -> dict[str, Any]:
        qp = self._qp(message)
        target = enum_field(QpState, required(message, "qp_state"), "qp_state")
        attrs = message.get("attrs") or {}
        if not isinstance(attrs, dict):
            raise InvalidArgument("must be an object", "attrs")
        current = message.get("cur_qp_state")
        if current is not None and enum_field(QpState, current, "cur_qp_state") is not qp.state:
            raise InvalidArgument(f"the QP is {qp.state.name}", "cur_qp_state")
        if target is QpState.ERR:
            self.to_error(qp, "moved to ERR by the application")
        elif target is QpState.RESET:
            self._reset(qp)
        elif target is QpState.INIT:
            self._to_init(qp, attrs)
        elif target is QpState.RTR:
            self._to_rtr(qp, attrs)
        elif target is QpState.RTS:
            self._to_rts(qp, attrs)
        else:
            raise NotSupported(f"{target.name} is not an MRC QP state", "qp_state")
        return self._qp_attrs(qp)

    def _expect(self, qp: QpRecord, target: QpState, *allowed: QpState) -> None:
        if qp.state not in allowed:
            before = " or ".join(s.name for s in allowed)
            raise InvalidArgument(
                f"{target.name} follows {before}, and the QP is {qp.state.name}", "qp_state"
            )

    def _to_init(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        self._expect(qp, QpState.INIT, QpState.RESET, QpState.INIT)
        if attrs.get("qp_hint") is not None:
            raise NotSupported("QP hints are not offered (max_qp_hint 0)", "qp_hint")
        ev_id = opt_int_field(attrs, "ev_profile_id")
        cc_id = opt_int_field(attrs, "cc_profile_id")
        if qp.qp_type is QpType.RC:
            for key, value in (("ev_profile_id", ev_id), ("cc_profile_id", cc_id)):
                if value:
                    raise InvalidArgument("an RC QP has one path and DCQCN: no profiles", key)
            qp.state = QpState.INIT
            return
        if qp.state is QpState.INIT and (ev_id is not None or cc_id is not None):
            self.service.registry.release(qp.num)
            qp.binding = None
        ev_id = qp.ev_profile_id if ev_id is None else ev_id
        cc_id = qp.cc_profile_id if cc_id is None else cc_id
        if qp.binding is None:
            ipv6 = self.runtime.ipv6
            qp.binding = self.service.registry.bind(qp.num, ev_id, cc_id, ipv6)
        qp.ev_profile_id, qp.cc_profile_id = ev_id, cc_id
        for key in ("cap",):
            if key in attrs:
                qp.attrs[key] = int_field(attrs, key, 0, U32)
        qp.state = QpState.INIT

    def _to_rtr(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        self._expect(qp, QpState.RTR, QpState.INIT)
        dest = int_field(attrs, "dest_qp_num", 2, U24)
        rq_psn = int_field(attrs, "rq_psn", 0, U24)
        peers = self._peer_addresses(attrs)
        for key, high in (("max_wimm_dest", MAX_WIMM), ("mpr_dest", 255)):
            if attrs.get(key) is not None:
                qp.attrs[key] = int_field(attrs, key, 0, high)
        if attrs.get("path_mtu") is not None:
            qp.attrs["path_mtu"] = int_field(attrs, "path_mtu", MTU_256, MTU_4096)
        if qp.qp_type is QpType.RC:
            # The RoCE core opens a QP with both PSNs: at RTS (the peer's writes before then
            # are not answered, and its requester retries).
            qp.attrs.update(
                dest_qp_num=dest, rq_psn=rq_psn, dgids=[format_address(p) for p in peers]
            )
            qp.state = QpState.RTR
            return
        assert qp.binding is not None
        binding = qp.binding
        homes = None
        if binding.evs is not None:
            homes = tuple((ev.port - 1, value) for ev, value in binding.evs)
            for ev, value in binding.evs:
                qp.ev_of[(ev.port - 1, value)] = ev
                qp.wire_of[ev] = (ev.port - 1, value)
                qp.ev_states[ev] = CtlEvState.GOOD
        pool = self.runtime.pool
        config = binding.config
        if "path_mtu" in qp.attrs:
            link = pool.default.config.payload_size
            payload = min(mtu_bytes(qp.attrs["path_mtu"]), link)
            if payload != config.payload_size:
                config = dataclasses.replace(config, payload_size=payload)
        endpoint = pool.endpoint_for(config)
        chosen = homes
        exact_paths = False
        if chosen is None and self.runtime.choose_evs is not None:
            # AUTO in structured EV mode: EVs that name the paths to the peer, not random ones.
            chosen = self.runtime.choose_evs(peers, config.ev_set_size)
            exact_paths = chosen is not None
        spec = ConnectionSpec(
            qp.num,
            dest,
            peers,
            send_psn=0,
            receive_psn=rq_psn,
            evs=chosen,
            ev_min_active=binding.min_active,
            ev_standin_when_starved=exact_paths,
            ev_events=True,
            pd=qp.pd,
        )
        try:
            pool.connect(endpoint, spec)
        except ValueError as exc:
            raise InvalidArgument(str(exc), "dest_qp_num") from None
        qp.endpoint = endpoint
        if homes is None:
            # AUTO: the QP's own random EVs, known from the start so that a controller can
            # list and deny them on the live QP (their later changes come as events).
            for plane, value, state in endpoint.ev_states(qp.num):
                ev = Ev.stev(value, plane + 1)
                qp.ev_of[(plane, value)] = ev
                qp.wire_of[ev] = (plane, value)
                qp.ev_states[ev] = CORE_TO_CTL[state]
        qp.attrs.update(dest_qp_num=dest, rq_psn=rq_psn, dgids=[format_address(p) for p in peers])
        self.runtime.on_events(qp.num, lambda event: self._on_event(qp, event))
        now = self.runtime.clock()
        for ev in binding.denied:
            where = qp.wire_of.get(ev)
            if where is not None:
                endpoint.deny_ev(qp.num, where[0], where[1], now)
        qp.state = QpState.RTR

    def _peer_addresses(self, attrs: dict[str, Any]) -> tuple[bytes, ...]:
        raw = attrs.get("dgids")
        if raw is None and attrs.get("dgid") is not None:
            raw = [attrs["dgid"]]
        if not isinstance(raw, list) or not raw:
            raise InvalidArgument("the peer's address on each plane is needed", "ah_attr.dgid")
        if len(raw) != self.service.planes:
            raise InvalidArgument(
                f"{len(raw)} addresses for {self.service.planes} planes", "ah_attr.dgid"
            )
        packed = []
        for index, text in enumerate(raw):
            try:
                address = ipaddress.ip_address(text)
            except (ValueError, TypeError):
                raise InvalidArgument(
                    f"{text!r} is not an IP address", f"ah_attr.dgid[{index}]"
                ) from None
            if len(address.packed) != len(self.runtime.local_addresses[0]):
                raise InvalidArgument("not of this host's IP version", f"ah_attr.dgid[{index}]")
            packed.append(address.packed)
        return tuple(packed)

    def _to_rts(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        if qp.qp_type is QpType.RC:
            self._rc_to_rts(qp, attrs)
            return
        if qp.state is QpState.RTS:
            if attrs.get("sq_psn") is not None:
                raise InvalidArgument("the send PSN is set on the way to RTS only", "sq_psn")
        else:
            self._expect(qp, QpState.RTS, QpState.RTR)
            sq_psn = int_field(attrs, "sq_psn", 0, U24)
            assert qp.endpoint is not None
            qp.endpoint.set_send_psn(qp.num, sq_psn)
            qp.attrs["sq_psn"] = sq_psn
        for key, high in (
            ("max_wimm", MAX_WIMM),
            ("mpr", 255),
            ("timeout", 24),
            ("retry_linear", 7),
            ("retry_exp", 25),
        ):
            if attrs.get(key) is not None:
                qp.attrs[key] = int_field(attrs, key, 0, high)
        if "timeout" in qp.attrs:
            assert qp.endpoint is not None
            budget = retry_budget(
                qp.attrs["timeout"],
                qp.attrs.get("retry_linear", DEFAULT_RETRY_LINEAR),
                qp.attrs.get("retry_exp", 0),
            )
            qp.endpoint.set_peer_timeout(qp.num, budget)
        qp.state = QpState.RTS

    def _rc_to_rts(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        """RTR -> RTS of an RC QP: its RoCE connection opens with verbs' ``timeout`` (4.096 us
        x 2**timeout) and ``retry_cnt`` (OCP's linear count; no exponential retries)."""
        if qp.state is QpState.RTS:
            for key in ("sq_psn", "timeout", "retry_linear", "retry_exp"):
                if attrs.get(key) is not None:
                    raise InvalidArgument("an RC QP takes it on the way to RTS only", key)
        else:
            self._expect(qp, QpState.RTS, QpState.RTR)
            sq_psn = int_field(attrs, "sq_psn", 0, U24)
            config = RoceConfig()
            timeout = config.timeout
            if attrs.get("timeout") is not None:
                timeout = int_field(attrs, "timeout", 0, MAX_TIMEOUT_EXPONENT)
            retry_cnt = config.retry_cnt
            if attrs.get("retry_linear") is not None:
                retry_cnt = int_field(attrs, "retry_linear", 0, MAX_RETRY_CNT, "retry.linear_cnt")
            if attrs.get("retry_exp"):
                raise InvalidArgument("an RC QP retries retry_cnt times only", "retry.exp_cnt")
            pool = self.runtime.pool
            payload = pool.default.config.payload_size
            if "path_mtu" in qp.attrs:
                payload = min(payload, mtu_bytes(qp.attrs["path_mtu"]))
            config = dataclasses.replace(
                config,
                pmtu=mtu_bytes(active_mtu(payload)),
                timeout=timeout,
                retry_cnt=retry_cnt,
                send_queue_depth=qp.max_send_wr,
                dscp=pool.default.config.dscp,
            )
            peer = ipaddress.ip_address(qp.attrs["dgids"][0]).packed
            spec = RoceQpSpec(
                qp.num, qp.attrs["dest_qp_num"], peer, sq_psn, qp.attrs["rq_psn"], config, qp.pd
            )
            try:
                pool.connect_roce(spec)
            except ValueError as exc:
                raise InvalidArgument(str(exc), "dest_qp_num") from None
            qp.roce = pool.roce
            qp.attrs.update(sq_psn=sq_psn, timeout=timeout, retry_linear=retry_cnt)
            self.runtime.on_events(qp.num, lambda event: self._on_event(qp, event))
        if attrs.get("max_wimm") is not None:
            qp.attrs["max_wimm"] = int_field(attrs, "max_wimm", 0, MAX_WIMM)
        qp.state = QpState.RTS

    def _qp_attrs(self, qp: QpRecord) -> dict[str, Any]:
        return {
            "qp_num": qp.num,
            "qp_type": qp.qp_type.name,
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

    def op_qp_query(self, _request: int, message: Message) -> dict[str, Any]:
        return self._qp_attrs(self._qp(message))

    def op_qp_destroy(self, _request: int, message: Message) -> dict[str, Any]:
        qp = self._qp(message)
        self._destroy(qp)
        return {}

    def _destroy(self, qp: QpRecord) -> None:
        self._disconnect(qp, "QP destroyed")
        self.runtime.pool.release_qp(qp.num)
        self.service.registry.release(qp.num)
        qp.send_cq.users -= 1
        qp.recv_cq.users -= 1
        self.qps.pop(qp.num, None)

    def _disconnect(self, qp: QpRecord, reason: str) -> None:
        """Close the core connection (its peer sees it fail) and forget the QP's EVs."""
        if qp.endpoint is None and qp.roce is None:
            return
        self.runtime.on_events(qp.num, None)
        self.runtime.pool.close(qp.num)
        qp.endpoint = qp.roce = None
        for ev in list(qp.ev_states):
            qp.ev_states.pop(ev)
            self.service.report(qp.ev_profile_id, ev)
        log.info("host API QP %#x closed: %s", qp.num, reason)

    def _reset(self, qp: QpRecord) -> None:
        """Back to RESET: the connection closes, queued work is dropped without completions
        (as verbs' RESET), the profiles are let go; the QP number stays."""
        self._disconnect(qp, "moved to RESET")
        self.service.registry.release(qp.num)
        qp.binding = None
        qp.sq.clear()
        qp.by_msn.clear()
        qp.rq.clear()
        qp.pending_imm.clear()
        qp.wimm_outstanding = 0
        qp.attrs.clear()
        qp.ev_of.clear()
        qp.wire_of.clear()
        qp.state = QpState.RESET
        self.push({"p": "qp", "qp": qp.num, "state": "RESET", "sq": qp.sq_done, "rq": 0})

    def to_error(self, qp: QpRecord, reason: str, fatal: bool = False) -> None:
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
            self._complete(
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
        self.push({"p": "qp", "qp": qp.num, "state": "ERR", "reason": reason})
        if fatal:
            self.async_event(EventType.QP_FATAL, qp.num, reason)

    # --- work requests --------------------------------------------------------------------

    def op_post_send(self, _request: int, message: Message) -> None:
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
                self.to_error(qp, f"{where}: {exc}", fatal=True)
        self.runtime.service()

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
        region = self.local(qp.pd, lkey, addr, length, f"{where}.sg_list[0]")
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

    def op_post_recv(self, _request: int, message: Message) -> None:
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
                self.local(qp.pd, sge[2], sge[0], sge[1], f"{where}.sg_list[0]", write=True)
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
                    self.to_error(
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
            self.to_error(qp, f"message failed: {event.reason}", fatal=not refused)
        elif isinstance(event, ConnectionFailed):
            if qp.roce is not None:
                self._fail_oldest(qp, event.reason)
            self.to_error(qp, event.reason, fatal=True)
        elif isinstance(event, EvStateChanged):
            self.service.ev_changed(qp, event)

    @staticmethod
    def _fail_oldest(qp: QpRecord, reason: str) -> None:
        """An RC QP entered its error state (the RoCE core says so before failing its
        writes): its oldest unfinished WRITE completes with the error, as a NIC's does."""
        status = next((s for text, s in _ROCE_NAK_STATUS if text in reason), None)
        for rec in qp.sq:
            if not rec.done:
                rec.done, rec.reason = True, reason
                rec.status = WcStatus.RETRY_EXC_ERR if status is None else status
                return

    def _deliver_imm(self, qp: QpRecord, length: int, immediate: int) -> None:
        wr_id = qp.rq.popleft()
        self._complete(
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
                self._complete(
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
                self.runtime.reactor.call_at(self.runtime.clock(), self._tell_sq)
            self._sq_moved[qp.num] = qp

    def _tell_sq(self) -> None:
        """How far each QP's send queue has moved (``_retire``), once for the turn."""
        moved, self._sq_moved = self._sq_moved, {}
        for number, qp in moved.items():
            if self.qps.get(number) is qp:
                self.push({"p": "sq", "qp": number, "n": qp.sq_done})

    def release(self) -> None:
        """The client is gone: its QPs close first (their peers see them fail)."""
        for qp in list(self.qps.values()):
            self._destroy(qp)
        super().release()
