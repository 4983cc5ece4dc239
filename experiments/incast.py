"""``incast``: three senders into one receiver while a victim flow crosses the same spine
links, in a fabric with ECN marking and trimming and in one without.

The victim (``victim_source`` -> ``victim_destination``) runs for ``victim_duration_s``; at
``incast_at_s`` on its clock the ``senders`` each send ``incast_bytes`` to ``receiver`` at
once. By default the victim's destination shares the receiver's leaf, so every spine-to-leaf
hop into that leaf may carry both; whatever the hosts, the links they share are computed from
the topology (``shared_hops``) and a victim that shares none is refused before anything is
brought up. Switch-to-switch queues are slowed to ``fabric_rate_pps`` and the receiver's last
hop to ``receiver_rate_pps`` so that the switches' queues, not the two CPUs, are the
bottleneck: the incast's at the receiver's port, the victim's on the shared spine links.

Both modes run MRC with ``evs`` EVs; what differs is the fabric (one bring-up each, see
``topology_variant``): ``ecn_trim_on`` marks ECN on fabric ports and trims at
``trim_threshold``; ``ecn_trim_off`` does neither, so full queues drop at the tail and the
senders learn of congestion only from SACK gaps and timeouts. A sender that overruns the
receiver's port wastes the shared spine links on packets that are then lost there; that is
what a victim suffers from in a fabric without those signals.

Figures: the victim's goodput over time, the incast's span shaded, and the incast's
completion time (from launching its transfers until the last one finished), per mode; the
summary gives, per mode, the victim's goodput before and during the incast, its shortfall
(the bytes it fell short of its level before the incast, over the incast's span: windows of
different lengths compare by it), the completion time, and the trims and ECN marks the
switches counted (to show "off" was off; None where the target cannot count them), each as
mean and spread over the seeds with each seed's pair beside them.

The on/off comparison is made only where the target has something to switch: on a target
that neither trims nor marks ECN (a kernel switch on a kernel without RED or codel) both
fabrics are the same, and the summary says "not applicable" and what the target lacked
instead of giving a ratio; both modes still run, and their difference is then the run-to-run
spread of one fabric. Where the target marks ECN but does not trim, the comparison is ECN's
alone, and says so.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from experiments import plots
from experiments.bottleneck import OverallBottleneck, overall_bottleneck, phrase
from experiments.capabilities import TargetFacts
from experiments.counters import congestion_signals
from experiments.experiment import Experiment
from experiments.json_form import FLAT, PREFIXED, key
from experiments.metrics import (
    failed_transfer,
    goodput_series,
    shortfall_bytes,
    transfer_metrics,
    window_goodput,
)
from experiments.paths import fabric_hops
from experiments.records import Failure, Runs, Transfer
from experiments.stats import SeedPair, Spread, describe, mbit, seed_pairs, two_places
from experiments.timeline import Series
from experiments.topology_variant import HostQueue, Variant
from testbed.agents import TransferFailed, TransferSpec
from testbed.session import Testbed
from topologies.model import Topology

NAME = "incast"
DEFAULT_TOPOLOGY = "leaf-spine-4x4"
#: The victim's goodput before this time is its start-up, not its level.
BASELINE_FROM_S = 1.0
#: How often the runner looks whether the incast is due or the victim has ended.
POLL_S = 0.05
#: What the summary says instead of an on/off ratio on a target with nothing to switch.
NOT_APPLICABLE = "not applicable: no trimming or ECN on this target/kernel"


class Fabric(StrEnum):
    """A mode: the fabric with ECN marking and trimming, or without either."""

    ECN_TRIM_ON = "ecn_trim_on"
    ECN_TRIM_OFF = "ecn_trim_off"


MODES = (Fabric.ECN_TRIM_ON, Fabric.ECN_TRIM_OFF)


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``); hosts are names, senders a comma list."""

    receiver: str = "h1"
    senders: str = "h5,h9,h13"
    victim_source: str = "h6"
    victim_destination: str = "h2"
    #: Bytes each sender sends to the receiver.
    incast_bytes: int = 131072
    victim_duration_s: float = 18.0
    incast_at_s: float = 3.0
    bin_s: float = 0.25
    evs: int = 256
    message_size: int = 16384
    fabric_rate_pps: int = 100
    receiver_rate_pps: int = 100
    queue_depth: int = 32
    trim_threshold: int = 24
    ecn_min: int = 8
    ecn_max: int = 20
    lldp_interval_ms: int = 100

    @property
    def sender_hosts(self) -> tuple[str, ...]:
        return tuple(name.strip() for name in self.senders.split(",") if name.strip())

    def check(self) -> None:
        """ValueError for settings that cannot make an incast with a victim."""
        senders = self.sender_hosts
        if not senders or len(set(senders)) != len(senders):
            raise ValueError(f"senders must name distinct hosts, got {self.senders!r}")
        hosts = (self.receiver, self.victim_source, self.victim_destination, *senders)
        if len(set(hosts)) != len(hosts):
            raise ValueError(
                "receiver, senders, victim_source and victim_destination must all differ"
            )
        if not 0 < self.incast_at_s < self.victim_duration_s:
            raise ValueError("need 0 < incast_at_s < victim_duration_s")
        if min(self.incast_bytes, self.evs, self.message_size, self.fabric_rate_pps) < 1:
            raise ValueError("incast_bytes, evs, message_size and fabric_rate_pps must be >= 1")
        if self.receiver_rate_pps < 1 or self.bin_s <= 0:
            raise ValueError("receiver_rate_pps must be >= 1 and bin_s positive")
        if not self.ecn_min <= self.ecn_max < self.queue_depth:
            raise ValueError("need ecn_min <= ecn_max < queue_depth")
        if not self.trim_threshold < self.queue_depth:
            raise ValueError("trim_threshold must be below queue_depth")


def modes_of(params: Params) -> tuple[Fabric, ...]:
    """Both fabrics, whatever the parameters."""
    del params
    return MODES


def variant(params: Params, mode: Fabric) -> Variant:
    """Slowed fabric and receiver port; ECN and trimming only in ``ecn_trim_on``."""
    return Variant(
        fabric_rate_pps=params.fabric_rate_pps,
        fabric_queue_depth=params.queue_depth,
        trim_threshold=params.trim_threshold,
        ecn_thresholds=(params.ecn_min, params.ecn_max),
        lldp_interval_ms=params.lldp_interval_ms,
        host_queues=(HostQueue(params.receiver, params.receiver_rate_pps, params.queue_depth),),
        ecn_and_trimming=mode == Fabric.ECN_TRIM_ON,
    )


def check_topology(topology: Topology, params: Params) -> None:
    """ValueError unless every host named exists and the victim shares a link with the
    incast."""
    hosts = {host.name for host in topology.hosts}
    named = (params.receiver, params.victim_source, params.victim_destination)
    unknown = [name for name in (*named, *params.sender_hosts) if name not in hosts]
    if unknown:
        raise ValueError(f"{topology.name} has no host {', '.join(map(repr, unknown))}")
    shared_hops(topology, params)


def shared_hops(topology: Topology, params: Params) -> list[str]:
    """The switch-to-switch hops both the victim and some incast sender may cross; a
    ValueError when there are none (the victim would not be a victim)."""
    incast = frozenset().union(
        *(fabric_hops(topology, sender, params.receiver) for sender in params.sender_hosts)
    )
    shared = fabric_hops(topology, params.victim_source, params.victim_destination) & incast
    if not shared:
        raise ValueError(
            f"{topology.name}: the victim {params.victim_source}->{params.victim_destination} "
            f"shares no switch-to-switch link with the incast into {params.receiver}"
        )
    return sorted(shared)


def victim_name(params: Params) -> str:
    return f"victim:{params.victim_source}->{params.victim_destination}"


def incast_name(sender: str, params: Params) -> str:
    return f"incast:{sender}->{params.receiver}"


class _VictimClock:
    """The victim transfer's clock, estimated from its samples' arrival (never late by more
    than their delivery delay), and the moment the incast is due on it."""

    def __init__(self, due_s: float) -> None:
        self.due_s = due_s
        self.due = threading.Event()
        self._start: float | None = None

    def on_sample(self, sample: dict[str, Any]) -> None:
        elapsed = float(sample["elapsed_s"])
        start = time.monotonic() - elapsed
        self._start = start if self._start is None else min(self._start, start)
        if elapsed >= self.due_s:
            self.due.set()

    def now(self) -> float:
        assert self._start is not None
        return time.monotonic() - self._start

    def wait_until_due(self, victim: Future[dict[str, Any]]) -> bool:
        """True once the incast is due; False when the victim ended before that."""
        while not self.due.wait(POLL_S):
            if victim.done():
                return False
        return True


@dataclass(frozen=True)
class IncastRun:
    """One run's record: each transfer (the victim's and each sender's), the EVs, the hops
    the victim shares with the incast, when the incast started and ended on the victim's
    clock (end None: it never started) and how long it took to complete (None: not every
    sender completed), each sender's time, the victim's goodput over its run, before and
    during the incast, and its shortfall, and the trims and ECN marks the switches counted
    (None where a switch could not count them)."""

    transfers: Mapping[str, Transfer]
    evs: int
    victim: str
    shared_hops: tuple[str, ...]
    incast_start_s: float
    incast_end_s: float | None
    incast_completion_s: float | None
    incast_transfer_seconds: Mapping[str, float | None]
    victim_goodput_bps: float
    victim_goodput_bps_before: float | None
    victim_goodput_bps_during: float | None
    victim_shortfall_bytes: float | None
    switch_signals: Mapping[str, int | None]


#: A run's time series: the victim's.
IncastSeries = dict[str, Series]


def run_mode(
    testbed: Testbed, params: Params, mode: Fabric, seed: int
) -> tuple[IncastRun, IncastSeries]:
    """The victim, with the incast launched into it at ``incast_at_s``."""
    del mode, seed  # the fabric makes the mode; each run draws fresh EVs, the seed labels it
    shared = shared_hops(testbed.topology, params)
    victim_spec = TransferSpec(
        params.victim_source,
        params.victim_destination,
        duration_s=params.victim_duration_s,
        evs=params.evs,
        message_size=params.message_size,
        interval_s=params.bin_s,
    )
    incast_specs = [
        TransferSpec(
            sender,
            params.receiver,
            total_bytes=params.incast_bytes,
            evs=params.evs,
            message_size=params.message_size,
        )
        for sender in params.sender_hosts
    ]
    clock = _VictimClock(params.incast_at_s)
    before = testbed.status()
    # Not a ``with`` block: on Ctrl-C that would wait out the victim's whole run before the
    # testbed's teardown; the teardown stops the agents, which ends the victim's thread.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="incast-victim")
    try:
        victim = pool.submit(testbed.transfer, victim_spec, clock.on_sample)
        if clock.wait_until_due(victim):
            start_s = clock.now()
            outcomes = testbed.transfer_all(incast_specs)
            end_s: float | None = clock.now()
        else:
            start_s, end_s = params.incast_at_s, None
            never = TransferFailed("not started: the victim flow ended before the incast was due")
            outcomes = [never] * len(incast_specs)
        try:
            victim_outcome: dict[str, Any] | TransferFailed = victim.result()
        except TransferFailed as failure:
            victim_outcome = failure
    finally:
        pool.shutdown(wait=False)
    after = testbed.status()
    return _record(params, shared, victim_outcome, outcomes, (start_s, end_s), before, after)


def _record(
    params: Params,
    shared: list[str],
    victim: dict[str, Any] | TransferFailed,
    incast: Sequence[dict[str, Any] | TransferFailed],
    span: tuple[float, float | None],
    before: dict[str, Any],
    after: dict[str, Any],
) -> tuple[IncastRun, IncastSeries]:
    start_s, end_s = span
    transfers: dict[str, Transfer] = {}
    incast_seconds: dict[str, float | None] = {}
    for sender, outcome in zip(params.sender_hosts, incast, strict=True):
        name = incast_name(sender, params)
        if isinstance(outcome, TransferFailed):
            transfers[name] = failed_transfer(Failure(str(outcome)))
            incast_seconds[name] = None
        else:
            transfers[name] = transfer_metrics(outcome, params.incast_bytes)
            incast_seconds[name] = float(outcome["seconds"])
    name = victim_name(params)
    series: Series
    if isinstance(victim, TransferFailed):
        transfers[name], series = failed_transfer(Failure(str(victim))), []
    else:
        transfers[name], series = transfer_metrics(victim), goodput_series(victim)
    incast_done = end_s is not None and all(
        transfers[incast_name(s, params)].completed for s in params.sender_hosts
    )
    before_bps = window_goodput(series, BASELINE_FROM_S, start_s, params.bin_s)
    record = IncastRun(
        transfers=transfers,
        evs=params.evs,
        victim=name,
        shared_hops=tuple(shared),
        incast_start_s=start_s,
        incast_end_s=end_s,
        incast_completion_s=end_s - start_s if incast_done and end_s is not None else None,
        incast_transfer_seconds=incast_seconds,
        victim_goodput_bps=transfers[name].goodput_bps,
        victim_goodput_bps_before=before_bps,
        victim_goodput_bps_during=None
        if end_s is None
        else window_goodput(series, start_s, end_s, params.bin_s),
        victim_shortfall_bytes=None
        if end_s is None or before_bps is None
        else shortfall_bytes(series, before_bps, start_s, end_s, params.bin_s),
        switch_signals=congestion_signals(before, after),
    )
    return record, {name: series}


@dataclass(frozen=True)
class ModeFigures:
    """One fabric over its seeds: bytes lost, whether all completed, the victim's goodput
    before and during the incast and over its run, its shortfall, the incast's completion
    time per seed, the switches' trims and ECN marks (None: not counted), and what limited
    the runs."""

    bytes_lost: int
    completed: bool
    victim_goodput_before: Spread = field(metadata=key("victim_goodput_bps_before", PREFIXED))
    victim_goodput_during: Spread = field(metadata=key("victim_goodput_bps_during", PREFIXED))
    victim_goodput: Spread = field(metadata=key("victim_goodput_bps", PREFIXED))
    victim_shortfall: Spread = field(metadata=key("victim_shortfall_bytes", PREFIXED))
    incast_completion_s: tuple[float | None, ...]
    incast_completion: Spread = field(metadata=key("incast_completion_s", PREFIXED))
    trims: int | None
    ecn_marks: int | None
    bottleneck: OverallBottleneck


@dataclass(frozen=True)
class Comparison:
    """Whether the on/off comparison means anything on the run's target: ``applicable``,
    what it compares (``trimming``, ``ECN marking``: what the target can switch on), what
    the target lacked (``reason`` says it in words; None when the target does both), and
    the target's own account of what it lacks."""

    applicable: bool
    compares: tuple[str, ...]
    lacked: tuple[str, ...]
    reason: str | None
    target_lacks: tuple[str, ...]


@dataclass(frozen=True)
class IncastFigures:
    """Each fabric's figures, each seed's pair, and the on/off ratios of the means where the
    target can make the comparison (None where it cannot, or a mean is missing)."""

    modes: Mapping[Fabric, ModeFigures] = field(metadata=FLAT)
    pairs: tuple[SeedPair[Fabric], ...]
    on_off_comparison: Comparison
    victim_during_incast_on_over_off: float | None
    victim_shortfall_off_over_on: float | None
    incast_completion_off_over_on: float | None


def summarize(runs: Runs[Fabric, IncastRun], facts: TargetFacts) -> IncastFigures:
    """Per mode: victim goodput before and during the incast, its shortfall, the incast's
    completion time (each as mean and spread over seeds), switch trims and ECN marks, what
    limited the runs; each seed's pair; and the on/off comparisons where the target can make
    them (:func:`comparison`)."""
    modes: dict[Fabric, ModeFigures] = {}
    for mode, seeds in runs.items():
        records = [run.record for run in seeds.values()]
        transfers = [t for record in records for t in record.transfers.values()]
        completions = tuple(record.incast_completion_s for record in records)
        modes[mode] = ModeFigures(
            bytes_lost=sum(t.bytes_lost or 0 for t in transfers),
            completed=all(t.completed for t in transfers),
            victim_goodput_before=Spread.of(r.victim_goodput_bps_before for r in records),
            victim_goodput_during=Spread.of(r.victim_goodput_bps_during for r in records),
            victim_goodput=Spread.of(r.victim_goodput_bps for r in records),
            victim_shortfall=Spread.of(r.victim_shortfall_bytes for r in records),
            incast_completion_s=completions,
            incast_completion=Spread.of(completions),
            trims=_total([r.switch_signals["trims"] for r in records]),
            ecn_marks=_total([r.switch_signals["ecn_marks"] for r in records]),
            bottleneck=overall_bottleneck(run.bottleneck for run in seeds.values()),
        )
    pairs = seed_pairs(
        runs,
        {
            "incast_completion_s": lambda run: run.record.incast_completion_s,
            "victim_shortfall_bytes": lambda run: run.record.victim_shortfall_bytes,
        },
    )
    verdict = comparison(facts)
    on, off = modes.get(Fabric.ECN_TRIM_ON), modes.get(Fabric.ECN_TRIM_OFF)

    def ratio(
        numerator: ModeFigures | None,
        denominator: ModeFigures | None,
        figure: Callable[[ModeFigures], Spread],
    ) -> float | None:
        if not verdict.applicable or numerator is None or denominator is None:
            return None
        return _ratio(figure(numerator).mean, figure(denominator).mean)

    return IncastFigures(
        modes=modes,
        pairs=pairs,
        on_off_comparison=verdict,
        victim_during_incast_on_over_off=ratio(on, off, lambda f: f.victim_goodput_during),
        victim_shortfall_off_over_on=ratio(off, on, lambda f: f.victim_shortfall),
        incast_completion_off_over_on=ratio(off, on, lambda f: f.incast_completion),
    )


def comparison(facts: TargetFacts) -> Comparison:
    """Whether the on/off comparison means anything on the run's target (see
    :class:`Comparison`)."""
    compares = tuple(
        name
        for name, present in (("trimming", facts.trimming), ("ECN marking", facts.ecn_marking))
        if present
    )
    lacked = tuple(
        name
        for name, present in (("trimming", facts.trimming), ("ECN marking", facts.ecn_marking))
        if not present
    )
    if not compares:
        reason: str | None = NOT_APPLICABLE
    elif lacked:
        reason = f"{' and '.join(compares)} only: no {' or '.join(lacked)} on this target/kernel"
    else:
        reason = None
    return Comparison(
        applicable=bool(compares),
        compares=compares,
        lacked=lacked,
        reason=reason,
        target_lacks=facts.lacks,
    )


def _total(values: list[int | None]) -> int | None:
    """The sum, or None when any seed's counters were unreadable (a partial sum would lie)."""
    return None if any(v is None for v in values) else sum(v for v in values if v is not None)


def _ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def draw(
    directory: Path,
    runs: Runs[Fabric, IncastRun],
    series: Mapping[Fabric, Mapping[int, IncastSeries]],
    params: Params,
) -> list[str]:
    """incast.png: seed 0's victim goodput over time per mode with the incast shaded, and
    the incast's completion time per mode."""
    victim = victim_name(params)
    first = {mode: seeds[0].record for mode, seeds in runs.items()}
    spans = {
        str(mode): (run.incast_start_s, run.incast_end_s)
        for mode, run in first.items()
        if run.incast_end_s is not None
    }
    plots.goodput_with_spans_and_durations(
        directory / "incast.png",
        f"incast: {params.senders.replace(',', ', ')} -> {params.receiver} "
        f"({params.incast_bytes // 1024} KiB each), victim {params.victim_source} -> "
        f"{params.victim_destination}; {params.evs} EVs, {params.bin_s * 1000:.0f} ms bins",
        {str(mode): series[mode][0][victim] for mode in runs},
        spans,
        {str(mode): run.incast_completion_s for mode, run in first.items()},
        "incast completion time (s)",
    )
    return ["incast.png"]


def text(figures: IncastFigures) -> list[str]:
    """summary.txt lines: per mode the victim's figures and the incast's completion time as
    "mean (min-max) over N seeds", each seed's pair, then the on/off comparison, or why it
    is not made."""
    lines = []
    seeds = len(figures.pairs)
    for mode in MODES:
        f = figures.modes[mode]
        lines.append(
            f"{mode:<12} victim goodput before "
            f"{describe(f.victim_goodput_before, mbit, seeds, 'Mbit/s')}, during the "
            f"incast {describe(f.victim_goodput_during, mbit, seeds, 'Mbit/s')}, short "
            f"of its level by {describe(f.victim_shortfall, _kib, seeds, 'KiB')}; "
            f"incast completion {describe(f.incast_completion, two_places, seeds, 's')} "
            f"[{phrase(f.bottleneck)}]; "
            f"switch trims {_count(f.trims)}, ECN marks {_count(f.ecn_marks)}; bytes lost "
            f"{f.bytes_lost}, completed {'yes' if f.completed else 'NO'}"
        )
    for pair in figures.pairs:
        completions = ", ".join(
            f"{mode} {'never' if c is None else f'{two_places(c)} s'}"
            for mode, c in pair.values["incast_completion_s"].items()
        )
        lines.append(
            f"seed {pair.seed} ({' then '.join(pair.order)}): incast completion {completions}"
        )
    verdict = figures.on_off_comparison
    if not verdict.applicable:
        lines.append(
            f"on / off: {verdict.reason} (both fabrics are the same here; their difference "
            "is run-to-run spread)"
        )
        return lines
    qualifier = "" if verdict.reason is None else f" ({verdict.reason})"
    lines.append(
        f"on / off{qualifier}: victim goodput during the incast "
        f"{_times(figures.victim_during_incast_on_over_off)}; off / on: victim shortfall "
        f"{_times(figures.victim_shortfall_off_over_on)}, incast completion time "
        f"{_times(figures.incast_completion_off_over_on)} (ratios of the means; reported, "
        "not asserted)"
    )
    return lines


def _count(value: int | None) -> str:
    return "not counted" if value is None else str(value)


def _times(ratio: float | None) -> str:
    return "-" if ratio is None else f"{ratio:.2f}x"


def _kib(count: float) -> str:
    return f"{count / 1024:.0f}"


EXPERIMENT: Experiment[Params, Fabric, IncastRun, IncastSeries, IncastFigures] = Experiment(
    name=NAME,
    default_topology=DEFAULT_TOPOLOGY,
    params_type=Params,
    modes_of=modes_of,
    variant=variant,
    run_mode=run_mode,
    summarize=summarize,
    draw=draw,
    text=text,
    # As in spray: LLDP probes queue behind the data on the slowed links and would read as
    # cuts. Nothing is cut here.
    discovery=False,
    check_topology=check_topology,
)
