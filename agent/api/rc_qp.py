"""What is RC's in an RC QP's life (``QpType.RC``, the testbed's extension): the agent's RoCEv2
baseline (``agent.roce``) behind the same host API. It has one path and DCQCN, so no EV or CC
profile; it is made with a RoCE profile (``agent.roce.profiles``: the NIC and settings it
models, perftest's by default), and its connection opens at RTS, where the RoCE core gets both
PSNs at once and verbs' ``timeout`` and ``retry_cnt`` (the profile's unless RTS gives them); a
NAK or exhausted retries fail its oldest unfinished WRITE with the matching status, as a NIC's
do.
"""

from __future__ import annotations

import dataclasses
import ipaddress
from typing import Any

from agent.api.errors import InvalidArgument
from agent.api.qp_kind import Deliver
from agent.api.qp_timing import active_mtu, mtu_bytes
from agent.api.requests import U24, int_field, opt_int_field
from agent.api.resources import QpRecord
from agent.api.types import QpState, QpType, WcStatus
from agent.core import Event
from agent.io.json_lines import Message
from agent.io.runtime import AgentRuntime
from agent.roce import RoceConfig, RoceQpSpec
from agent.roce.config import MAX_RETRY_CNT, MAX_TIMEOUT_EXPONENT
from agent.roce.profiles import DEFAULT_PROFILE, profile_named, profile_names

#: What an RC QP's failure reason (``agent.roce.requester``) says, and the status its oldest
#: unfinished WRITE completes with (anything else: its retries ran out).
_ROCE_NAK_STATUS = (
    ("remote access error", WcStatus.REM_ACCESS_ERR),
    ("invalid request", WcStatus.REM_INV_REQ_ERR),
    ("remote operational error", WcStatus.REM_OP_ERR),
)


def roce_profile_field(message: Message, qp_type: QpType) -> str | None:
    """The RoCE profile ``api.qp.create`` asks for, checked: an RC QP's (the default when it
    names none), none for an MRC QP (``InvalidArgument`` if it names one)."""
    raw = message.get("roce_profile")
    if qp_type is not QpType.RC:
        if raw is not None:
            raise InvalidArgument("an MRC QP runs no RoCE profile", "roce_profile")
        return None
    if raw is None:
        return DEFAULT_PROFILE
    if raw not in profile_names():
        raise InvalidArgument(
            f"unknown RoCE profile {raw!r}: choose {', '.join(profile_names())}", "roce_profile"
        )
    return str(raw)


class RcQpKind:
    """RC QPs (``agent.api.qp_kind.QpKind``)."""

    def __init__(self, runtime: AgentRuntime, deliver: Deliver) -> None:
        self._runtime = runtime
        self._deliver = deliver

    def max_send_wr(self) -> int:
        return RoceConfig().send_queue_depth

    def to_init(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        ev_id = opt_int_field(attrs, "ev_profile_id")
        cc_id = opt_int_field(attrs, "cc_profile_id")
        for key, value in (("ev_profile_id", ev_id), ("cc_profile_id", cc_id)):
            if value:
                raise InvalidArgument("an RC QP has one path and DCQCN: no profiles", key)

    def to_rtr(
        self,
        qp: QpRecord,
        dest: int,
        rq_psn: int,
        peers: tuple[bytes, ...],
        path_mtu: int | None,
    ) -> None:
        """Nothing opens yet: the RoCE core opens a QP with both PSNs, at RTS (the peer's
        writes before then are not answered, and its requester retries); the QP keeps the
        peer and ``path_mtu`` until then."""

    def to_rts(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        """The RoCE connection opens with the QP's profile and verbs' ``timeout`` (4.096 us x
        2**timeout) and ``retry_cnt`` (OCP's linear count; no exponential retries) where
        given, the profile's where not."""
        if qp.state is QpState.RTS:
            for key in ("sq_psn", "timeout", "retry_linear", "retry_exp"):
                if attrs.get(key) is not None:
                    raise InvalidArgument("an RC QP takes it on the way to RTS only", key)
        else:
            self._connect(qp, attrs)

    def _connect(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        sq_psn = int_field(attrs, "sq_psn", 0, U24)
        config = profile_named(qp.roce_profile or DEFAULT_PROFILE).config(RoceConfig())
        timeout = config.timeout
        if attrs.get("timeout") is not None:
            timeout = int_field(attrs, "timeout", 0, MAX_TIMEOUT_EXPONENT)
        retry_cnt = config.retry_cnt
        if attrs.get("retry_linear") is not None:
            retry_cnt = int_field(attrs, "retry_linear", 0, MAX_RETRY_CNT, "retry.linear_cnt")
        if attrs.get("retry_exp"):
            raise InvalidArgument("an RC QP retries retry_cnt times only", "retry.exp_cnt")
        pool = self._runtime.pool
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
        self._runtime.on_events(qp.num, lambda event: self._deliver(qp, event))

    def other_event(self, qp: QpRecord, event: Event) -> None:
        """The RoCE core reports messages and failure only."""

    def failed(self, qp: QpRecord, reason: str) -> None:
        """The RoCE core says why before failing the QP's writes: its oldest unfinished
        WRITE completes with that error."""
        status = next((s for text, s in _ROCE_NAK_STATUS if text in reason), None)
        for rec in qp.sq:
            if not rec.done:
                rec.done, rec.reason = True, reason
                rec.status = WcStatus.RETRY_EXC_ERR if status is None else status
                return

    def closed(self, qp: QpRecord) -> None:
        """Nothing of RC's: it has no EV states."""

    def released(self, qp: QpRecord) -> None:
        """Nothing of RC's: it holds no profile."""
