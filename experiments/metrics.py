"""What one transfer achieved, from the agent's perf result (``mrc-perf --json``'s fields).

``bytes_sent`` counts what the application posted (every message is ``message_size`` bytes;
a ``--bytes`` run's last one may be shorter), ``bytes_delivered`` what the receiver reported
as completed messages, and ``bytes_lost`` their difference: a reliable transport must make it
0 however the network behaves. Retransmissions are counted separately, by cause: they are
the price of a loss, not a loss.
"""

from __future__ import annotations

from collections.abc import Sequence

from experiments.documents import PerfResult
from experiments.records import AgentCounters, Failure, Transfer

#: Bins averaged when deciding whether goodput has recovered: single 100 ms bins on BMv2
#: swing widely, so one lucky bin must not count as recovery.
RECOVERY_WINDOW_BINS = 3
#: Goodput counts as recovered at this fraction of its level before the cut.
RECOVERY_FRACTION = 0.9


def transfer_metrics(result: PerfResult, total_bytes: int | None = None) -> Transfer:
    """A transfer's figures from the agent's perf result (its JSON, as the agent sent it)."""
    connection = result.get("connection") or {}
    receiver = result.get("receiver") or {}
    posted = int(connection.get("messages_posted", 0))
    sent = posted * int(result["message_size"])
    if total_bytes is not None:
        sent = min(sent, total_bytes)
    delivered = int(receiver.get("bytes_received", 0))
    acked = int(connection.get("messages_acked", 0))
    completed = (
        posted > 0
        and acked == posted
        and int(connection.get("messages_failed", 0)) == 0
        and int(receiver.get("messages_received", 0)) == posted
    )
    return Transfer(
        bytes_sent=sent,
        bytes_delivered=delivered,
        bytes_lost=sent - delivered,
        completed=completed,
        goodput_bps=float(result["goodput_bps"]),
        retransmits=dict(connection.get("retransmits", {})),
        retransmits_total=int(connection.get("retransmits_total", 0)),
        counters=AgentCounters(
            spurious_losses=int(connection.get("spurious_losses", 0)),
            evs_reinstated=int(connection.get("evs_reinstated", 0)),
            trims_seen=int(connection.get("trims_seen", 0)),
            ecn_echoes=int(connection.get("ecn_echoes", 0)),
            timeouts=int(connection.get("timeouts", 0)),
            tail_probes=int(connection.get("tail_probes", 0)),
            ev_probes_sent=int(connection.get("ev_probes_sent", 0)),
            data_packets_sent=int(connection.get("data_packets_sent", 0)),
            duplicates_received=int(
                (receiver.get("connection") or {}).get("duplicates_received", 0)
            ),
        ),
    )


def failed_transfer(failure: Failure) -> Transfer:
    """The figures of a transfer that never produced a result: nothing is known delivered."""
    return Transfer(
        bytes_sent=None,
        bytes_delivered=0,
        bytes_lost=None,
        completed=False,
        goodput_bps=0.0,
        retransmits={},
        retransmits_total=0,
        failure=failure,
    )


def goodput_series(result: PerfResult) -> list[dict[str, float]]:
    """The transfer's samples as ``{"t_s": end of the bin, "goodput_bps": ...}``."""
    return [
        {"t_s": float(sample["elapsed_s"]), "goodput_bps": float(sample["goodput_bps"])}
        for sample in result.get("intervals", [])
    ]


def recovery_time(
    series: Sequence[dict[str, float]], cut_s: float, baseline_from_s: float
) -> float | None:
    """Seconds from ``cut_s`` until goodput, averaged over ``RECOVERY_WINDOW_BINS`` bins, is
    back to ``RECOVERY_FRACTION`` of its mean between ``baseline_from_s`` and the cut (counted
    to the end of the first bin of that window, so a flow that never dipped shows one bin);
    None when it never is, or when there was no level before the cut to compare with."""
    before = [p["goodput_bps"] for p in series if baseline_from_s < p["t_s"] <= cut_s]
    if not before or sum(before) == 0:
        return None
    target = RECOVERY_FRACTION * sum(before) / len(before)
    after = [p for p in series if p["t_s"] > cut_s]
    for end in range(RECOVERY_WINDOW_BINS, len(after) + 1):
        window = after[end - RECOVERY_WINDOW_BINS : end]
        if sum(p["goodput_bps"] for p in window) / len(window) >= target:
            return window[0]["t_s"] - cut_s
    return None


def window_goodput(
    series: Sequence[dict[str, float]], start_s: float, end_s: float, bin_s: float
) -> float | None:
    """Mean goodput of the ``bin_s`` bins lying wholly between ``start_s`` and ``end_s`` (a
    bin's ``t_s`` is its end); None when no bin fits, e.g. a window shorter than a bin."""
    inside = [p["goodput_bps"] for p in series if p["t_s"] - bin_s >= start_s and p["t_s"] <= end_s]
    return sum(inside) / len(inside) if inside else None


def shortfall_bytes(
    series: Sequence[dict[str, float]],
    level_bps: float,
    start_s: float,
    end_s: float,
    bin_s: float,
) -> float | None:
    """Bytes a flow fell short of ``level_bps`` over the bins lying wholly between
    ``start_s`` and ``end_s`` (bins above the level count against it); None when no bin
    fits. Unlike a mean over the window, this compares windows of different lengths: a
    short deep dip and a long shallow one cost what they cost."""
    inside = [p["goodput_bps"] for p in series if p["t_s"] - bin_s >= start_s and p["t_s"] <= end_s]
    if not inside:
        return None
    return sum(level_bps - goodput for goodput in inside) * bin_s / 8
