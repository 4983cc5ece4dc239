"""``spray``: a permutation across the fabric, single path versus 256 EVs.

Every host sends to one host on another leaf (a random permutation drawn per seed), all at
once, for ``duration_s`` (or ``flow_bytes`` each). Switch-to-switch links are slowed to
``fabric_rate_pps`` so that the links, not the two CPUs running BMv2 and the agents, are the
bottleneck (the summary records the CPU load to show it). With one EV per flow, ECMP puts
some flows on the same uplink and leaves others idle; spraying over 256 EVs loads every
uplink evenly.

Figures: per-flow goodput and per-spine-link load (packets forwarded onto each link, from the
next-hop member counters, or the ports' tx counters on a target without them; each record's
``link_counters`` says which) for each mode, seed 0; the summary gives the aggregate goodput ratio
MRC / single-path per seed with its mean and spread, and the max and min link load per mode.
"""

from __future__ import annotations

import random
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import plots
from experiments.counters import MEMBER_COUNTERS, PORT_TX_COUNTERS, link_loads
from experiments.cpu import cpu_load, cpu_times
from experiments.experiment import Experiment
from experiments.metrics import failed_transfer_metrics, transfer_metrics
from experiments.topology_variant import Variant
from testbed.agents import TransferFailed, TransferSpec
from testbed.session import Testbed
from topologies.model import Topology

NAME = "spray"
DEFAULT_TOPOLOGY = "leaf-spine-4x4"
#: Attempts at drawing a permutation in which nobody sends within its own leaf.
PERMUTATION_ATTEMPTS = 10_000


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``)."""

    duration_s: float = 10.0
    #: Bytes each flow sends instead of running for duration_s (0: by duration). A flow by
    #: duration still delivers the messages it posted ahead, up to the agent's largest
    #: window (4 MiB), which on links of 100 packets/s takes tens of seconds; a byte count
    #: keeps a test-sized run short.
    flow_bytes: int = 0
    #: Flows of the permutation that run (0: all; fewer keep a test-sized run light).
    flows: int = 0
    mrc_evs: int = 256
    fabric_rate_pps: int = 100
    fabric_queue_depth: int = 32
    trim_threshold: int = 24
    ecn_min: int = 8
    ecn_max: int = 20
    message_size: int = 16384
    lldp_interval_ms: int = 100

    def check(self) -> None:
        if self.duration_s <= 0 or self.fabric_rate_pps < 1 or min(self.flows, self.flow_bytes) < 0:
            raise ValueError(
                "duration_s and fabric_rate_pps must be positive, flows and flow_bytes >= 0"
            )
        if not self.ecn_min <= self.ecn_max < self.fabric_queue_depth:
            raise ValueError("need ecn_min <= ecn_max < fabric_queue_depth")
        if not self.trim_threshold < self.fabric_queue_depth:
            raise ValueError("trim_threshold must be below fabric_queue_depth")


def variant(params: Params, mode: str) -> Variant:
    """The same network for both modes (they differ only in the agents' EVs)."""
    del mode
    return Variant(
        fabric_rate_pps=params.fabric_rate_pps,
        fabric_queue_depth=params.fabric_queue_depth,
        trim_threshold=params.trim_threshold,
        ecn_thresholds=(params.ecn_min, params.ecn_max),
        lldp_interval_ms=params.lldp_interval_ms,
    )


def permutation(topology: Topology, seed: int) -> list[tuple[str, str]]:
    """(source, destination) for every host, each host receiving once, never within a leaf."""
    leaf = {host.name: host.nics[0].switch for host in topology.hosts}
    hosts = sorted(leaf, key=lambda name: (len(name), name))
    rng = random.Random(seed)
    for _ in range(PERMUTATION_ATTEMPTS):
        receivers = hosts[:]
        rng.shuffle(receivers)
        if all(leaf[s] != leaf[r] for s, r in zip(hosts, receivers, strict=True)):
            return list(zip(hosts, receivers, strict=True))
    raise ValueError(f"{topology.name}: no permutation avoids sending within a leaf")


def run_mode(testbed: Testbed, params: Params, mode: str, seed: int) -> tuple[dict, dict]:
    """Every flow of the seed's permutation at once in ``mode``."""
    pairs = permutation(testbed.topology, seed)[: params.flows or None]
    specs = [
        TransferSpec(
            source,
            destination,
            total_bytes=params.flow_bytes or None,
            duration_s=None if params.flow_bytes else params.duration_s,
            evs=params.mrc_evs if mode == "mrc" else 1,
            message_size=params.message_size,
        )
        for source, destination in pairs
    ]
    before, cpu_before = testbed.status(), cpu_times()
    outcomes = testbed.transfer_all(specs)
    cpu_after, after = cpu_times(), testbed.status()
    transfers = {}
    for spec, outcome in zip(specs, outcomes, strict=True):
        name = f"{spec.source}->{spec.destination}"
        if isinstance(outcome, TransferFailed):
            transfers[name] = failed_transfer_metrics(str(outcome))
        else:
            transfers[name] = transfer_metrics(outcome, params.flow_bytes or None)
    loads = link_loads(testbed.topology, before, after)
    known = [load for load in loads.packets.values() if load is not None]
    record = {
        "transfers": transfers,
        "evs": specs[0].evs,
        "aggregate_goodput_bps": sum(t["goodput_bps"] for t in transfers.values()),
        "link_packets": loads.packets,
        "link_counters": list(loads.sources),
        "link_packets_max": max(known) if known else None,
        "link_packets_min": min(known) if known else None,
        "links_unread": sorted(link for link, load in loads.packets.items() if load is None),
        "cpu": cpu_load(cpu_before, cpu_after),
    }
    return record, {"link_packets": loads.packets}


def summarize(runs: dict[str, dict[str, dict]]) -> dict[str, Any]:
    """Goodput ratio MRC / single per seed (mean, spread), link load extremes, CPU load."""
    ratios = []
    for seed, mrc in runs["mrc"].items():
        single = runs["single"][seed]["aggregate_goodput_bps"]
        ratios.append(mrc["aggregate_goodput_bps"] / single if single > 0 else None)
    known = [r for r in ratios if r is not None]
    figures: dict[str, Any] = {
        "goodput_ratio_mrc_over_single": ratios,
        "goodput_ratio_mean": statistics.fmean(known) if known else None,
        "goodput_ratio_min": min(known) if known else None,
        "goodput_ratio_max": max(known) if known else None,
        "goodput_ratio_stdev": statistics.stdev(known) if len(known) > 1 else 0.0,
    }
    for mode, seeds in runs.items():
        figures[mode] = {
            "aggregate_goodput_bps_mean": statistics.fmean(
                r["aggregate_goodput_bps"] for r in seeds.values()
            ),
            "link_packets_max": _extreme(max, [r["link_packets_max"] for r in seeds.values()]),
            "link_packets_min": _extreme(min, [r["link_packets_min"] for r in seeds.values()]),
            "cpu_busy_fraction_max": max(r["cpu"]["busy_fraction"] for r in seeds.values()),
            "link_counters": sorted(
                {source for r in seeds.values() for source in r.get("link_counters", ())}
            ),
        }
    return figures


def _extreme(pick: Any, values: list[int | None]) -> int | None:
    known = [v for v in values if v is not None]
    return pick(known) if known else None


def draw(directory: Path, runs: dict, series: dict, params: Params) -> list[str]:
    """flows.png (per-flow goodput) and links.png (per-link packets), seed 0, both modes."""
    del series, params
    flows = list(runs["mrc"]["0"]["transfers"])
    plots.grouped_bars(
        directory / "flows.png",
        "spray: per-flow goodput, seed 0",
        "goodput (Mbit/s)",
        flows,
        {
            mode: [runs[mode]["0"]["transfers"][f]["goodput_bps"] / 1e6 for f in flows]
            for mode in runs
        },
    )
    links = list(runs["mrc"]["0"]["link_packets"])
    plots.grouped_bars(
        directory / "links.png",
        "spray: packets forwarded onto each spine link (both directions), seed 0\n"
        f"from {_counters_phrase(runs['mrc']['0'].get('link_counters', []))}",
        "packets",
        links,
        {mode: [runs[mode]["0"]["link_packets"][link] or 0 for link in links] for mode in runs},
    )
    return ["flows.png", "links.png"]


#: How each counter source reads in a figure title or a summary line.
COUNTER_PHRASES = {
    MEMBER_COUNTERS: "next-hop member counters, load offered at ingress",
    PORT_TX_COUNTERS: "port tx counters, packets the link carried",
}


def _counters_phrase(sources: list[str]) -> str:
    """The counter sources a link load came from, in words ("unread" when none was)."""
    return "; ".join(COUNTER_PHRASES.get(s, s) for s in sources) or "counters unread"


def text(figures: dict[str, Any]) -> list[str]:
    mean = figures["goodput_ratio_mean"]
    lines = [
        f"aggregate goodput MRC / single: mean {'-' if mean is None else f'{mean:.2f}'}, "
        f"min {figures['goodput_ratio_min']}, max {figures['goodput_ratio_max']}, "
        f"stdev {figures['goodput_ratio_stdev']:.3f} (target >= 1.3; reported, not asserted)"
    ]
    for mode in ("mrc", "single"):
        f = figures[mode]
        lines.append(
            f"{mode:<7} aggregate {f['aggregate_goodput_bps_mean'] / 1e6:.3f} Mbit/s; link load "
            f"max {f['link_packets_max']} min {f['link_packets_min']} packets "
            f"({_counters_phrase(f['link_counters'])}); CPU busy "
            f"{f['cpu_busy_fraction_max'] * 100:.0f} %"
        )
    return lines


EXPERIMENT = Experiment(
    name=NAME,
    default_topology=DEFAULT_TOPOLOGY,
    params_type=Params,
    variant=variant,
    run_mode=run_mode,
    summarize=summarize,
    draw=draw,
    text=text,
    # LLDP probes queue behind the data on the slowed links and arrive late: the controller
    # would take that for cuts and reprogram the fabric over and over. Nothing is cut here.
    discovery=False,
)
