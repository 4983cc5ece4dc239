"""The veth benchmark's figures from its runs: each tool's median goodput per phase, the
headline ratios of those medians and whether they meet the targets, each repeat's own ratios,
and each repeat's pairs with their spread and the order they ran in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from tools.bench_agent.schedule import PHASES
from tools.counterbalance import paired_summary, spread

#: The targets the agent is held to.
TARGET_RATIO_TO_IPERF3 = 0.5
TARGET_LOSS_RETENTION = 0.8

#: Each phase's runs of each tool, in repeat order.
Runs = dict[str, dict[str, list[dict[str, Any]]]]


@dataclass
class RunRecord:
    """What the benchmark measured, as it went."""

    tools: list[str]
    #: phase -> tool -> the runs kept, each with its repeat and sequence number.
    runs: Runs = field(init=False)
    #: ``run_order`` of every repeat.
    orders: list[list[tuple[str, list[str]]]] = field(default_factory=list)
    #: Every kept run, in the order it was made.
    made: list[dict[str, Any]] = field(default_factory=list)
    #: Runs measured again because the hypervisor took too much of a core, with their place.
    retried: list[dict[str, Any]] = field(default_factory=list)
    #: Packets the nftables loss rule dropped over all lossy phases.
    drops: int = 0

    def __post_init__(self) -> None:
        self.runs = {phase: {name: [] for name in self.tools} for phase in PHASES}

    def add(
        self,
        repeat: int,
        phase: str,
        tool: str,
        kept: dict[str, Any],
        set_aside: list[dict[str, Any]],
    ) -> None:
        """One run kept, and the runs set aside before it."""
        sequence = len(self.made)
        self.made.append({"repeat": repeat, "phase": phase, "tool": tool})
        self.runs[phase][tool].append({"repeat": repeat, "sequence": sequence, **kept})
        self.retried.extend(
            {"tool": tool, "phase": phase, "repeat": repeat, **run} for run in set_aside
        )


def summarize(record: RunRecord, counted_drops: bool, steal_limit: float) -> dict[str, Any]:
    """The report's figures, in the report's order; ``counted_drops`` when the loss was the
    nftables rule's, whose drops the lossy phase then reports."""
    result: dict[str, Any] = {}
    for phase in PHASES:
        phase_result: dict[str, Any] = {
            name: {
                "goodput_bps": _median([r["goodput_bps"] for r in samples]),
                "spread": spread([float(r["goodput_bps"]) for r in samples]),
                "runs": samples,
            }
            for name, samples in record.runs[phase].items()
        }
        if phase == "lossy" and counted_drops:
            phase_result["nftables_drops"] = record.drops
        result[phase] = phase_result
    lossless_mrc = result["lossless"]["mrc_perf"]["goodput_bps"]
    lossless_iperf = result["lossless"]["iperf3_udp"]["goodput_bps"]
    lossy_mrc = result["lossy"]["mrc_perf"]["goodput_bps"]
    ratio = _share(lossless_mrc, lossless_iperf)
    retention = _share(lossy_mrc, lossless_mrc)
    result["ratio_to_iperf3_lossless"] = ratio
    result["loss_retention"] = retention
    # Context, not a target: what the same loss rule leaves of iperf3's own goodput. iperf3
    # resends nothing, so this is the loss itself plus what the rule costs: on a veth pair the
    # receiving namespace's input, the rule included, runs on the sender's core.
    result["iperf3_loss_retention"] = _share(
        result["lossy"]["iperf3_udp"]["goodput_bps"], lossless_iperf
    )
    result["per_repeat"] = per_repeat(record.runs)
    # The order every run was made in, and each repeat's pairs with their spread: the
    # headline figures above are ratios of medians; ``paired`` gives the median of the
    # repeats' own ratios beside them, and by which side ran first.
    result["run_order"] = record.made
    result["paired"] = paired(record.runs, record.orders)
    result["steal_limit"] = steal_limit
    # Runs measured again because the hypervisor took more than ``steal_limit`` of a core,
    # each with its tool and phase.
    result["retried_for_steal"] = record.retried
    result["targets"] = {
        "ratio_to_iperf3_lossless": {
            "target": TARGET_RATIO_TO_IPERF3,
            "measured": ratio,
            "met": ratio >= TARGET_RATIO_TO_IPERF3,
        },
        "loss_retention": {
            "target": TARGET_LOSS_RETENTION,
            "measured": retention,
            "met": retention >= TARGET_LOSS_RETENTION,
        },
    }
    return result


def paired(runs: Runs, orders: list[list[tuple[str, list[str]]]]) -> dict[str, Any]:
    """Each repeat's pairs and their spread (``tools.counterbalance.paired_summary``), with
    the order each pair ran in: mrc-perf against iperf3 lossless, and each tool lossy against
    lossless. ``runs`` as ``per_repeat`` takes them; ``orders`` holds ``run_order`` of every
    repeat."""

    def goodput(phase: str, tool: str, repeat: int) -> float:
        return float(runs[phase][tool][repeat]["goodput_bps"])

    def tool_pairs(phase: str) -> list[dict[str, Any]]:
        return [
            {
                "order": [t for t in dict(order)[phase] if t in ("mrc_perf", "iperf3_udp")],
                "mrc_perf": goodput(phase, "mrc_perf", repeat),
                "iperf3_udp": goodput(phase, "iperf3_udp", repeat),
            }
            for repeat, order in enumerate(orders)
        ]

    def phase_pairs(tool: str) -> list[dict[str, Any]]:
        return [
            {
                "order": [phase for phase, _ in order],
                "lossy": goodput("lossy", tool, repeat),
                "lossless": goodput("lossless", tool, repeat),
            }
            for repeat, order in enumerate(orders)
        ]

    return {
        "ratio_to_iperf3_lossless": paired_summary(
            tool_pairs("lossless"), "mrc_perf", "iperf3_udp"
        ),
        "loss_retention": paired_summary(phase_pairs("mrc_perf"), "lossy", "lossless"),
        "iperf3_loss_retention": paired_summary(phase_pairs("iperf3_udp"), "lossy", "lossless"),
    }


def per_repeat(runs: Runs) -> dict[str, list[float]]:
    """Each repeat's own ratio to iperf3 and loss retention (and iperf3's own retention under
    the same loss rule, for context), from runs that sat next to each other in time: how far
    apart these lie shows how much the machine moved during the benchmark (the headline
    figures are ratios of medians over all repeats)."""
    lossless, lossy = runs["lossless"], runs["lossy"]
    return {
        "ratio_to_iperf3_lossless": _paired_shares(lossless["mrc_perf"], lossless["iperf3_udp"]),
        "loss_retention": _paired_shares(lossy["mrc_perf"], lossless["mrc_perf"]),
        "iperf3_loss_retention": _paired_shares(lossy["iperf3_udp"], lossless["iperf3_udp"]),
    }


def _paired_shares(parts: list[dict[str, Any]], wholes: list[dict[str, Any]]) -> list[float]:
    """Each run's goodput as a share of its counterpart's in the same repeat."""
    return [
        _share(part["goodput_bps"], whole["goodput_bps"])
        for part, whole in zip(parts, wholes, strict=True)
    ]


def _share(part: float, whole: float) -> float:
    """``part / whole``, 0 where there is no ``whole`` (a tool that moved nothing)."""
    return part / whole if whole else 0.0


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2
