"""A RoCE transfer over several QPs (``--qps N``), as NCCL spreads a peer's traffic.

NCCL opens several connections to a peer (one per channel, ``NCCL_IB_QPS_PER_CONNECTION`` QPs
each) and, by default, sends each message whole on the next QP in turn
(``NCCL_IB_SPLIT_DATA_ON_QPS`` 0) rather than splitting every message over all of them. A
transfer here does the same:

* *QPs.* N RoCE RC QPs, each a full QP of its own (``agent.roce``): its own PSNs, retries and
  DCQCN rate, and its own UDP source port, drawn when it is created, so the fabric's ECMP hash
  puts the QPs on paths of their own, independently.
* *Planes.* QP *i* sends from plane *i* mod *planes* to the peer's address on that plane, on
  both sides: a multi-plane host uses every plane, as NCCL uses every NIC.
* *Striping.* Messages go round-robin: message *k* on QP *k* mod N, whole (a message on a QP
  whose send queue is full waits for it, as a work request on a full queue does).
* *Completion.* The transfer is done when every message is acknowledged, on whichever QP;
  one QP failing (retries used up, a refused write) fails the transfer, as one failed work
  request fails a collective.

Statistics of the QPs together read as one connection's: counts summed, and each QP one "EV"
(its source port) of the set; their RoCE state likewise (``merged_roce_stats``).
"""

from __future__ import annotations

from collections.abc import Sequence

from agent.core import ConnectionStats, RetransmitCause
from agent.io.endpoints import EndpointPool
from agent.io.side_channel import QpOffer
from agent.roce import RoceConfig, RoceQpSpec, RoceStats


def plane_of(index: int, planes: int) -> int:
    """The plane QP ``index`` of a transfer runs on: round-robin over ``planes``."""
    return index % planes


def connect_striped(
    pool: EndpointPool,
    local: Sequence[QpOffer],
    remote: Sequence[QpOffer],
    remote_planes: Sequence[bytes],
    config: RoceConfig,
) -> None:
    """Open QP *i* of ``local`` towards QP *i* of ``remote`` on plane *i* mod *planes*.
    ``ValueError`` (the QPs opened so far closed again) if one cannot be opened."""
    if len(local) != len(remote):
        raise ValueError(f"{len(local)} QPs offered, {len(remote)} answered")
    opened: list[int] = []
    try:
        for index, ((qp, psn), (peer_qp, peer_psn)) in enumerate(zip(local, remote, strict=True)):
            plane = plane_of(index, len(remote_planes))
            spec = RoceQpSpec(qp, peer_qp, remote_planes[plane], psn, peer_psn, config, 0, plane)
            pool.connect_roce(spec)
            opened.append(qp)
    except ValueError:
        for qp in opened:
            pool.close(qp)
        raise


def merged_stats(stats: Sequence[ConnectionStats]) -> ConnectionStats:
    """The statistics of a transfer's QPs as one connection's: counts and windows summed, the
    slowest QP's RTT and RTO (what a stall is judged by), every QP's "EV"; the first QP's
    number."""
    if len(stats) == 1:
        return stats[0]
    first = stats[0]
    srtts = [s.srtt for s in stats if s.srtt is not None]
    min_rtts = [s.min_rtt for s in stats if s.min_rtt is not None]
    return ConnectionStats(
        qp=first.qp,
        messages_posted=sum(s.messages_posted for s in stats),
        messages_acked=sum(s.messages_acked for s in stats),
        messages_failed=sum(s.messages_failed for s in stats),
        messages_received=sum(s.messages_received for s in stats),
        data_packets_sent=sum(s.data_packets_sent for s in stats),
        data_bytes_sent=sum(s.data_bytes_sent for s in stats),
        packets_acked=sum(s.packets_acked for s in stats),
        bytes_acked=sum(s.bytes_acked for s in stats),
        data_packets_received=sum(s.data_packets_received for s in stats),
        data_bytes_received=sum(s.data_bytes_received for s in stats),
        duplicates_received=sum(s.duplicates_received for s in stats),
        retransmits={c: sum(s.retransmits.get(c, 0) for s in stats) for c in RetransmitCause},
        losses={c: sum(s.losses.get(c, 0) for s in stats) for c in RetransmitCause},
        spurious_losses=sum(s.spurious_losses for s in stats),
        evs_reinstated=sum(s.evs_reinstated for s in stats),
        timeouts=sum(s.timeouts for s in stats),
        spurious_timeouts=sum(s.spurious_timeouts for s in stats),
        tail_probes=sum(s.tail_probes for s in stats),
        completion_probes=sum(s.completion_probes for s in stats),
        trims_seen=sum(s.trims_seen for s in stats),
        trims_lasthop_seen=sum(s.trims_lasthop_seen for s in stats),
        trims_received=sum(s.trims_received for s in stats),
        nacks_other=sum(s.nacks_other for s in stats),
        ecn_echoes=sum(s.ecn_echoes for s in stats),
        ecn_marks_received=sum(s.ecn_marks_received for s in stats),
        writes_rejected=sum(s.writes_rejected for s in stats),
        ev_probes_sent=sum(s.ev_probes_sent for s in stats),
        ev_probes_answered=sum(s.ev_probes_answered for s in stats),
        srtt=max(srtts) if srtts else None,
        min_rtt=min(min_rtts) if min_rtts else None,
        rttvar=max(s.rttvar for s in stats),
        rto=max(s.rto for s in stats),
        reorder_window=max(s.reorder_window for s in stats),
        reorder_multiplier=max(s.reorder_multiplier for s in stats),
        cwnd=sum(s.cwnd for s in stats),
        bytes_in_flight=sum(s.bytes_in_flight for s in stats),
        evs=tuple(ev for s in stats for ev in s.evs),
    )


def merged_roce_stats(stats: Sequence[RoceStats]) -> RoceStats:
    """The RC and DCQCN state of a transfer's QPs as one: ``ERROR`` if any QP is (with the
    first error), counters and rates summed (the rate the transfer is sent at), the most
    retries, the longest timer and the highest alpha; the first QP's number, source port and
    DCQCN stage."""
    if len(stats) == 1:
        return stats[0]
    first = stats[0]
    errors = [s.error for s in stats if s.error is not None]
    rtos = [s.rto for s in stats if s.rto is not None]
    return RoceStats(
        qp=first.qp,
        state="ERROR" if errors else first.state,
        error=errors[0] if errors else None,
        src_port=first.src_port,
        local_ack_timeout=first.local_ack_timeout,
        retry_cnt=first.retry_cnt,
        selective_repeat=first.selective_repeat,
        adaptive_retransmission=first.adaptive_retransmission,
        rto=max(rtos) if rtos else None,
        retries=max(s.retries for s in stats),
        go_backs=sum(s.go_backs for s in stats),
        naks_received=sum(s.naks_received for s in stats),
        naks_sent=sum(s.naks_sent for s in stats),
        acks_received=sum(s.acks_received for s in stats),
        acks_sent=sum(s.acks_sent for s in stats),
        duplicate_acks=sum(s.duplicate_acks for s in stats),
        out_of_sequence=sum(s.out_of_sequence for s in stats),
        out_of_order_kept=sum(s.out_of_order_kept for s in stats),
        cnps_received=sum(s.cnps_received for s in stats),
        cnps_sent=sum(s.cnps_sent for s in stats),
        rate=sum(s.rate for s in stats),
        target_rate=sum(s.target_rate for s in stats),
        alpha=max(s.alpha for s in stats),
        stage=first.stage,
    )
