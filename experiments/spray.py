"""``spray``: a permutation across the fabric, one MRC QP over 256 EVs against one path and
against RoCE striped over 1, 4 and 16 QPs.

Every host sends ``flow_bytes`` (or for ``duration_s``) to one host on another leaf (a random
permutation drawn per seed), all at once. Switch-to-switch links are slowed to
``fabric_rate_pps`` so that the links, not the two CPUs running BMv2 and the agents, are the
bottleneck; the runner records each core's load and each link's utilisation, and a ratio
measured with a saturated core is labelled CPU-bound rather than passed off as a link
measure (:mod:`experiments.bottleneck`). With one EV per flow, ECMP puts some flows on the
same uplink and leaves others idle; spraying over 256 EVs loads every uplink evenly.

The modes are contenders (:mod:`experiments.transports`): ``mrc`` (one MRC QP over
``mrc_evs`` EVs), ``single`` (MRC on one EV: ECMP's one path) and RoCE as NCCL spreads it,
each flow striped message by message over N RC QPs on source ports of their own, so that
ECMP hashes them apart (``roce:adaptive:1qp``, ``:4qp``, ``:16qp``): the papers' comparison
of one MRC QP x 256 EVs with 16 RoCE QPs. A bare ``roce`` in ``transports`` stands for every
profile of ``roce_profiles`` at every count of ``roce_qps``.

Figures: per-flow goodput and per-spine-link load (packets forwarded onto each link, from the
next-hop member counters, or the ports' tx counters on a target without them; each record's
``link_counters`` says which) for every mode, seed 0. The summary gives the aggregate goodput
ratio MRC / single-path per seed (each seed's pair, in the order the modes ran) with its mean
and spread and what limited the runs; per mode the aggregate goodput, the max and min link
load and their ratio; and for aggregate goodput and for link-load balance (max/min packets
over the spine links) the strongest RoCE contender and MRC's ratio to it
(:mod:`experiments.strongest`).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from experiments import plots
from experiments.bottleneck import OverallBottleneck, overall_bottleneck, phrase
from experiments.capabilities import TargetFacts
from experiments.counters import MEMBER_COUNTERS, PORT_TX_COUNTERS, link_loads
from experiments.experiment import Experiment
from experiments.json_form import FLAT, PREFIXED, key
from experiments.metrics import failed_transfer, transfer_metrics
from experiments.progress import event
from experiments.records import Failure, Runs, Transfer
from experiments.stats import SeedPair, Spread, describe, mbit, seed_pairs, two_places
from experiments.strongest import AgainstStrongest, against_strongest
from experiments.topology_variant import Variant
from experiments.transports import (
    MAX_QPS,
    MRC,
    SINGLE,
    Contender,
    evs_used,
    is_roce,
    may_fail,
    parse_roce_profiles,
    parse_transports,
    requested_evs,
    transfer_options,
)
from hostenv.tbf import FRAME_BYTES
from testbed.agents import TransferFailed, TransferSpec
from testbed.session import Testbed
from topologies.model import Topology

NAME = "spray"
DEFAULT_TOPOLOGY = "leaf-spine-4x4"
#: A figure compared across seeds: a count or a share.
N = TypeVar("N", int, float)
#: Attempts at drawing a permutation in which nobody sends within its own leaf.
PERMUTATION_ATTEMPTS = 10_000


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``)."""

    #: How long each flow runs when flow_bytes is 0.
    duration_s: float = 10.0
    #: Bytes each flow sends (0: run for duration_s instead). A flow by duration still
    #: delivers the messages it posted ahead, up to the agent's largest window (4 MiB), which
    #: at the default rate takes well over a minute, longer the more flows share a link; a
    #: byte count bounds a run: 1 MiB takes MRC about 20 s at 50 packets/s.
    flow_bytes: int = 1 << 20
    #: Flows of the permutation that run (0: all; fewer keep a test-sized run light).
    flows: int = 0
    mrc_evs: int = 256
    #: The contenders, comma-separated: ``mrc``, ``single``, RoCE labels (``roce:nccl:4qp``);
    #: a bare ``roce`` is every profile of ``roce_profiles`` at every count of ``roce_qps``.
    transports: str = "mrc,single,roce"
    #: The RoCE a load-balance comparison is signed for: ``adaptive``, NCCL's settings on a
    #: NIC with selective repeat and an RTT-derived timer. Sixteen flows at once on slowed
    #: links overflow queues, and where RoCE's data is not kept from congestion drops (linux:
    #: no PFC, no ECN) a RoCE whose drops each cost a 4.3 s (nccl) or 67 ms (perftest)
    #: go-back-N timeout loses on recovery, not on how its QPs spread over the spines;
    #: adaptive is the RoCE whose drops cost least, which leaves the paths to compare (in a
    #: lossless class the profiles spread alike). ``make experiment ROCE=`` runs others.
    roce_profiles: str = "adaptive"
    #: QPs each RoCE flow is striped over, one contender per count (NCCL's
    #: ``NCCL_IB_QPS_PER_CONNECTION``; the papers compare with 16).
    roce_qps: str = "1,4,16"
    #: Packets/s of every switch-to-switch link: low enough that on this project's 2-core
    #: machine the links, not the CPUs, limit every run on both targets (BMv2 forwards in
    #: user space, ~2x the CPU per packet of the agents and the kernel together); the
    #: measurements behind the choice are in docs/experiments.md.
    fabric_rate_pps: int = 50
    fabric_queue_depth: int = 32
    trim_threshold: int = 24
    ecn_min: int = 8
    ecn_max: int = 20
    message_size: int = 16384
    lldp_interval_ms: int = 100

    def check(self) -> None:
        """ValueError for settings that cannot work."""
        if self.duration_s <= 0 or self.fabric_rate_pps < 1 or min(self.flows, self.flow_bytes) < 0:
            raise ValueError(
                "duration_s and fabric_rate_pps must be positive, flows and flow_bytes >= 0"
            )
        if not self.ecn_min <= self.ecn_max < self.fabric_queue_depth:
            raise ValueError("need ecn_min <= ecn_max < fabric_queue_depth")
        if not self.trim_threshold < self.fabric_queue_depth:
            raise ValueError("trim_threshold must be below fabric_queue_depth")
        modes_of(self)


def parse_qp_counts(text: str) -> tuple[int, ...]:
    """``1,4,16`` -> the QP counts, each once, in the order given."""
    counts = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        if not part.isdigit() or not 1 <= int(part) <= MAX_QPS:
            raise ValueError(f"roce_qps: {part!r} is no QP count in 1..{MAX_QPS}")
        counts.append(int(part))
    if not counts:
        raise ValueError("roce_qps: no QP count given (e.g. 1,4,16)")
    if len(set(counts)) != len(counts):
        raise ValueError(f"roce_qps: a QP count is listed twice: {text}")
    return tuple(counts)


def modes_of(params: Params) -> tuple[str, ...]:
    """The contenders' labels in the order given, a bare ``roce`` as every profile of
    ``roce_profiles`` striped over every count of ``roce_qps`` (``roce:adaptive:16qp``)."""
    profiles = parse_roce_profiles(params.roce_profiles)
    counts = parse_qp_counts(params.roce_qps)
    labels: list[str] = []
    for part in (p.strip() for p in params.transports.split(",") if p.strip()):
        contender = Contender.parse(part)
        if contender.is_roce and part == contender.transport:
            labels += [
                str(Contender(contender.transport, profile, qps))
                for profile in profiles
                for qps in counts
            ]
        else:
            labels.append(str(contender))
    # the labels checked as any experiment's: one at least, none twice
    return parse_transports(",".join(labels))


def planned_s(params: Params, mode: str) -> float | None:
    """A run by duration lasts ``duration_s`` (and then some, see ``flow_bytes``); one by
    bytes lasts as long as its flows take, which only the runs made tell."""
    del mode
    return None if params.flow_bytes else params.duration_s


def variant(params: Params, mode: str) -> Variant:
    """The same network for every mode (they differ only in the agents' transfers)."""
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


@dataclass(frozen=True)
class SprayRun:
    """One run's record: each flow's transfer, the EVs each used, the flows' goodput
    together, and the packets each spine link carried (None: unread), from which counters,
    with their extremes."""

    transfers: Mapping[str, Transfer]
    evs: int | None
    aggregate_goodput_bps: float
    link_packets: Mapping[str, int | None]
    link_counters: tuple[str, ...]
    link_packets_max: int | None
    link_packets_min: int | None
    links_unread: tuple[str, ...]


#: A run's time series: the packets each spine link carried (a run has no other samples).
SpraySeries = dict[str, Mapping[str, int | None]]


def roce_line_rate(params: Params) -> float:
    """The port rate a RoCE QP's NIC is given (bits/s): one fabric link's, a host's fair share
    of its leaf's uplinks, as a NIC port matches the fabric's links. A QP's DCQCN scales with
    it (``--roce-line-rate``); at its 10 Gbit/s default the floor alone is 25 times a slowed
    link, so no CNP could bring it down to the link and the queue would set its pace."""
    return float(params.fabric_rate_pps * FRAME_BYTES * 8)


def run_mode(
    testbed: Testbed, params: Params, mode: str, seed: int
) -> tuple[SprayRun, SpraySeries]:
    """Every flow of the seed's permutation at once, each a transfer of the mode's contender."""
    pairs = permutation(testbed.topology, seed)[: params.flows or None]
    specs = [
        TransferSpec(
            source,
            destination,
            total_bytes=params.flow_bytes or None,
            duration_s=None if params.flow_bytes else params.duration_s,
            evs=requested_evs(mode, params.mrc_evs),
            message_size=params.message_size,
            **transfer_options(mode),
            roce_line_rate=roce_line_rate(params) if is_roce(mode) else None,
        )
        for source, destination in pairs
    ]
    before = testbed.status()
    event("%d flows of the seed's permutation at once", len(specs))
    outcomes = testbed.transfer_all(specs)
    after = testbed.status()
    transfers = {}
    for spec, outcome in zip(specs, outcomes, strict=True):
        name = f"{spec.source}->{spec.destination}"
        if isinstance(outcome, TransferFailed):
            transfers[name] = failed_transfer(Failure(str(outcome)))
        else:
            transfers[name] = transfer_metrics(outcome, params.flow_bytes or None)
    loads = link_loads(testbed.topology, before, after)
    known = [load for load in loads.packets.values() if load is not None]
    record = SprayRun(
        transfers=transfers,
        evs=evs_used(mode, params.mrc_evs),
        aggregate_goodput_bps=sum(t.goodput_bps for t in transfers.values()),
        link_packets=loads.packets,
        link_counters=loads.sources,
        link_packets_max=max(known) if known else None,
        link_packets_min=min(known) if known else None,
        links_unread=tuple(sorted(link for link, load in loads.packets.items() if load is None)),
    )
    return record, {"link_packets": loads.packets}


def link_balance(record: SprayRun) -> float | None:
    """How unevenly a run loaded the spine links: the most packets a link carried over the
    fewest (1: even). None when unread, when a link carried none (unbounded), or when a flow
    failed: a run cut short by a dead QP measured no spread of its load."""
    if any(transfer.failure is not None for transfer in record.transfers.values()):
        return None
    if record.link_packets_max is None or not record.link_packets_min:
        return None
    return record.link_packets_max / record.link_packets_min


@dataclass(frozen=True)
class ModeFigures:
    """One mode over its seeds: aggregate goodput, the link load extremes, their ratio and the
    counters they came from, and the CPU and link loads behind them."""

    aggregate_goodput: Spread = field(metadata=key("aggregate_goodput_bps", PREFIXED))
    link_packets_max: int | None
    link_packets_min: int | None
    #: Each run's max/min link load (:func:`link_balance`) over seeds.
    link_balance: Spread = field(metadata=key("link_load_max_over_min", PREFIXED))
    #: The mean over cores, the machine's busy share (the verdict looks at each core).
    cpu_busy_fraction_max: float
    busiest_core_max: float | None
    busiest_link_utilisation_max: float | None
    link_counters: tuple[str, ...]


@dataclass(frozen=True)
class SprayFigures:
    """The goodput ratio MRC / single per seed with its spread and what limited the runs
    behind it (a ratio of runs that saturated a core is no link measure); MRC against the
    strongest RoCE contender on aggregate goodput and on link-load balance; each seed's pair;
    each mode's figures."""

    goodput_ratio_mrc_over_single: tuple[float | None, ...]
    goodput_ratio: Spread = field(metadata=PREFIXED)
    goodput_ratio_bottleneck: str
    bottleneck: OverallBottleneck
    #: Over the modes' means: the RoCE contender with the most aggregate goodput, and the one
    #: whose links were loaded most evenly (lowest max/min), each with MRC's ratio to it.
    goodput_against_strongest_roce: AgainstStrongest
    link_balance_against_strongest_roce: AgainstStrongest
    pairs: tuple[SeedPair[str], ...]
    modes: Mapping[str, ModeFigures] = field(metadata=FLAT)


def summarize(runs: Runs[str, SprayRun], facts: TargetFacts) -> SprayFigures:
    """Goodput ratio MRC / single per seed with its mean and spread and what limited the runs
    behind it; MRC against the strongest RoCE; each seed's pair; per mode goodput, link load
    extremes and balance, CPU and link loads."""
    del facts  # ECMP spreads by source port on every target
    ratios = []
    singles = runs.get(SINGLE, {})
    for seed, mrc in runs.get(MRC, {}).items():
        single = singles[seed].record.aggregate_goodput_bps if seed in singles else 0.0
        ratios.append(mrc.record.aggregate_goodput_bps / single if single > 0 else None)
    bottleneck = overall_bottleneck(
        run.bottleneck for seeds in runs.values() for run in seeds.values()
    )
    modes = {
        mode: ModeFigures(
            aggregate_goodput=Spread.of(r.record.aggregate_goodput_bps for r in seeds.values()),
            link_packets_max=_extreme(max, (r.record.link_packets_max for r in seeds.values())),
            link_packets_min=_extreme(min, (r.record.link_packets_min for r in seeds.values())),
            link_balance=Spread.of(link_balance(r.record) for r in seeds.values()),
            cpu_busy_fraction_max=max(r.cpu.busy_fraction or 0.0 for r in seeds.values()),
            busiest_core_max=_extreme(max, (r.cpu.busiest_core for r in seeds.values())),
            busiest_link_utilisation_max=_extreme(
                max, (r.bottleneck.busiest_link_utilisation for r in seeds.values())
            ),
            link_counters=tuple(
                sorted({source for r in seeds.values() for source in r.record.link_counters})
            ),
        )
        for mode, seeds in runs.items()
    }
    return SprayFigures(
        goodput_ratio_mrc_over_single=tuple(ratios),
        goodput_ratio=Spread.of(ratios),
        goodput_ratio_bottleneck=bottleneck.verdict,
        bottleneck=bottleneck,
        goodput_against_strongest_roce=against_strongest(
            "aggregate goodput",
            {mode: f.aggregate_goodput.mean for mode, f in modes.items()},
            higher_is_better=True,
        ),
        link_balance_against_strongest_roce=against_strongest(
            "link load max/min",
            {mode: f.link_balance.mean for mode, f in modes.items()},
            higher_is_better=False,
        ),
        pairs=seed_pairs(
            runs, {"aggregate_goodput_bps": lambda run: run.record.aggregate_goodput_bps}
        ),
        modes=modes,
    )


def _extreme(pick: Callable[[list[N]], N], values: Iterable[N | None]) -> N | None:
    known = [v for v in values if v is not None]
    return pick(known) if known else None


def draw(
    directory: Path,
    runs: Runs[str, SprayRun],
    series: Mapping[str, Mapping[int, SpraySeries]],
    params: Params,
) -> list[str]:
    """flows.png (per-flow goodput) and links.png (per-link packets), seed 0, every mode."""
    del series, params
    first = {mode: seeds[0].record for mode, seeds in runs.items() if 0 in seeds}
    some = next(iter(first.values()))
    flows = list(some.transfers)
    plots.grouped_bars(
        directory / "flows.png",
        "spray: per-flow goodput, seed 0",
        "goodput (Mbit/s)",
        flows,
        {mode: [run.transfers[f].goodput_bps / 1e6 for f in flows] for mode, run in first.items()},
    )
    links = list(some.link_packets)
    sources = sorted({source for run in first.values() for source in run.link_counters})
    plots.grouped_bars(
        directory / "links.png",
        "spray: packets forwarded onto each spine link (both directions), seed 0\n"
        f"from {_counters_phrase(sources)}",
        "packets",
        links,
        {mode: [run.link_packets[link] or 0 for link in links] for mode, run in first.items()},
    )
    return ["flows.png", "links.png"]


#: How each counter source reads in a figure title or a summary line.
COUNTER_PHRASES = {
    MEMBER_COUNTERS: "next-hop member counters, load offered at ingress",
    PORT_TX_COUNTERS: "port tx counters, packets the link carried",
}


def _counters_phrase(sources: Iterable[str]) -> str:
    """The counter sources a link load came from, in words ("unread" when none was)."""
    return "; ".join(COUNTER_PHRASES.get(s, s) for s in sources) or "counters unread"


def text(figures: SprayFigures) -> list[str]:
    """summary.txt lines: the ratio as "mean (min-max) over N seeds" with what limited it,
    each seed's pair in the order it ran, MRC against the strongest RoCE on goodput and on
    link-load balance, then each mode's goodput and loads."""
    pairs = figures.pairs
    lines = [
        "aggregate goodput MRC / single: "
        f"{describe(figures.goodput_ratio, two_places, len(pairs))} "
        f"[{phrase(figures.bottleneck)}] (target >= 1.3; reported, not asserted)"
    ]
    for pair in pairs:
        goodputs = ", ".join(
            f"{mode} {(bps or 0.0) / 1e6:.3f}"
            for mode, bps in pair.values["aggregate_goodput_bps"].items()
        )
        lines.append(f"seed {pair.seed} ({' then '.join(pair.order)}): {goodputs} Mbit/s")
    lines.append(figures.goodput_against_strongest_roce.line(" Mbit/s", 1e-6))
    lines.append(figures.link_balance_against_strongest_roce.line())
    width = max((len(mode) for mode in figures.modes), default=0)
    for mode, f in figures.modes.items():
        lines.append(
            f"{mode:<{width}} aggregate "
            f"{describe(f.aggregate_goodput, mbit, len(pairs), 'Mbit/s')}; link load "
            f"max {f.link_packets_max} min {f.link_packets_min} packets, max/min "
            f"{describe(f.link_balance, two_places, len(pairs))} "
            f"({_counters_phrase(f.link_counters)}); busiest link "
            f"{_percent(f.busiest_link_utilisation_max)} of its rate; busiest core "
            f"{_percent(f.busiest_core_max)}, all cores {f.cpu_busy_fraction_max * 100:.0f} %"
        )
    return lines


def _percent(share: float | None) -> str:
    return "unread" if share is None else f"{share * 100:.0f} %"


EXPERIMENT: Experiment[Params, str, SprayRun, SpraySeries, SprayFigures] = Experiment(
    name=NAME,
    default_topology=DEFAULT_TOPOLOGY,
    params_type=Params,
    modes_of=modes_of,
    variant=variant,
    run_mode=run_mode,
    summarize=summarize,
    draw=draw,
    text=text,
    # LLDP probes queue behind the data on the slowed links and would read as cuts: the
    # controller would reprogram the fabric over and over. Nothing is cut here.
    discovery=False,
    may_fail=may_fail,
    planned_s=planned_s,
)
