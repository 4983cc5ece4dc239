"""The core's statistics snapshots as plain JSON objects (for replies, reports and --json).

The core hands out frozen dataclasses keyed by enums; tools, the control socket and the side
channel need JSON. One conversion here keeps the field names identical everywhere, so a
``--json`` report, a ``status`` reply and a receiver's ``farewell`` can be read the same way.
"""

from __future__ import annotations

from typing import Any

from agent.core import ConnectionStats, EvReport, RetransmitCause
from agent.roce import RoceStats
from wire.entropy import ev_flow_label, ev_source_port


def ev_report_to_json(ev: EvReport) -> dict[str, Any]:
    """One EV: plane, value, state name, whether it is the slot's home EV, uses, losses, trims
    and ECN echoes."""
    return {
        "plane": ev.plane,
        "ev": ev.ev,
        "source_port": ev_source_port(ev.ev),
        "flow_label": ev_flow_label(ev.ev),
        "state": ev.state.name,
        "home": ev.home,
        "uses": ev.uses,
        "losses": ev.losses,
        "trims": ev.trims,
        "ecn_echoes": ev.ecn_echoes,
    }


def causes_to_json(counts: dict[RetransmitCause, int]) -> dict[str, int]:
    """Counts by retransmit cause, every cause present (0 when none)."""
    return {cause.value: counts.get(cause, 0) for cause in RetransmitCause}


def connection_stats_to_json(stats: ConnectionStats, with_evs: bool = True) -> dict[str, Any]:
    """Every field of a connection snapshot; ``with_evs`` adds the per-EV table."""
    result: dict[str, Any] = {
        "qp": stats.qp,
        "messages_posted": stats.messages_posted,
        "messages_acked": stats.messages_acked,
        "messages_failed": stats.messages_failed,
        "messages_received": stats.messages_received,
        "data_packets_sent": stats.data_packets_sent,
        "data_bytes_sent": stats.data_bytes_sent,
        "packets_acked": stats.packets_acked,
        "bytes_acked": stats.bytes_acked,
        "data_packets_received": stats.data_packets_received,
        "data_bytes_received": stats.data_bytes_received,
        "duplicates_received": stats.duplicates_received,
        "retransmits": causes_to_json(stats.retransmits),
        "retransmits_total": stats.total_retransmits,
        "losses": causes_to_json(stats.losses),
        "spurious_losses": stats.spurious_losses,
        "evs_reinstated": stats.evs_reinstated,
        "timeouts": stats.timeouts,
        "spurious_timeouts": stats.spurious_timeouts,
        "tail_probes": stats.tail_probes,
        "completion_probes": stats.completion_probes,
        "trims_seen": stats.trims_seen,
        "trims_lasthop_seen": stats.trims_lasthop_seen,
        "trims_received": stats.trims_received,
        "nacks_other": stats.nacks_other,
        "ecn_echoes": stats.ecn_echoes,
        "ecn_marks_received": stats.ecn_marks_received,
        "writes_rejected": stats.writes_rejected,
        "ev_probes_sent": stats.ev_probes_sent,
        "ev_probes_answered": stats.ev_probes_answered,
        "srtt_s": stats.srtt,
        "min_rtt_s": stats.min_rtt,
        "rttvar_s": stats.rttvar,
        "rto_s": stats.rto,
        "reorder_window_s": stats.reorder_window,
        "reorder_multiplier": stats.reorder_multiplier,
        "cwnd_bytes": stats.cwnd,
        "bytes_in_flight": stats.bytes_in_flight,
        "ev_states": ev_state_counts(stats.evs),
    }
    if with_evs:
        result["evs"] = [ev_report_to_json(ev) for ev in stats.evs]
    return result


def ev_state_counts(evs: tuple[EvReport, ...]) -> dict[str, int]:
    """How many EVs of the set are in each state."""
    counts: dict[str, int] = {}
    for ev in evs:
        counts[ev.state.name] = counts.get(ev.state.name, 0) + 1
    return counts


def roce_stats_to_json(stats: RoceStats) -> dict[str, Any]:
    """A RoCE QP's RC and DCQCN state (rates in bits per second, as everywhere in reports)."""
    return {
        "qp": stats.qp,
        "state": stats.state,
        "error": stats.error,
        "source_port": stats.src_port,
        "local_ack_timeout_s": stats.local_ack_timeout,
        "retry_cnt": stats.retry_cnt,
        "selective_repeat": stats.selective_repeat,
        "adaptive_retransmission": stats.adaptive_retransmission,
        "rto_s": stats.rto,
        "retries": stats.retries,
        "go_backs": stats.go_backs,
        "naks_received": stats.naks_received,
        "naks_sent": stats.naks_sent,
        "acks_received": stats.acks_received,
        "acks_sent": stats.acks_sent,
        "duplicate_acks": stats.duplicate_acks,
        "out_of_sequence": stats.out_of_sequence,
        "out_of_order_kept": stats.out_of_order_kept,
        "cnps_received": stats.cnps_received,
        "cnps_sent": stats.cnps_sent,
        "rate_bps": stats.rate * 8,
        "target_rate_bps": stats.target_rate * 8,
        "alpha": stats.alpha,
        "dcqcn_stage": stats.stage,
    }
