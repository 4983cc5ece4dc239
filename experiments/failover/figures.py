"""The failover experiment's figures over every mode and seed, its figure files and its
summary.txt lines.

Per mode: bytes lost (MRC: must be 0, and every MRC transfer must complete; a RoCE transfer
whose retries ran out failed, a result, with its error and the time it failed recorded), the
longest stall (the longest run of ``bin_s`` bins with nothing confirmed), and the time from
the cut until the flows' goodput together is back to 90 % of its level before the cut
(``metrics.recovery_time``), as mean, min, max and stdev over the seeds with each seed's
pair beside them. Figures: goodput over time with the cut, the restore and any failure
marked, one per routing policy and placement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from controller.intent.policy import RoutingPolicy
from experiments import plots
from experiments.bottleneck import OverallBottleneck, overall_bottleneck
from experiments.capabilities import TargetFacts
from experiments.failover.modes import FailoverMode, Params
from experiments.failover.run import ALL_FLOWS, FailoverRun, FailoverSeries, FlowFailure
from experiments.json_form import FLAT, PREFIXED, TEXT, key
from experiments.placements import Placement
from experiments.records import Run, Runs
from experiments.stats import SeedPair, Spread, describe, mbit, seed_pairs, two_places


@dataclass(frozen=True)
class SeedFailure:
    """A flow that failed, and in which seed."""

    seed: int = field(metadata=TEXT)
    failure: FlowFailure = field(metadata=FLAT)


@dataclass(frozen=True)
class ModeFigures:
    """One mode over its seeds: bytes lost (and the failed transfers whose loss is not
    known), whether all completed, the failures and how long after the cut they came, each
    seed's recovery and longest stall with their spread, goodput, and what limited the runs."""

    mode: FailoverMode = field(metadata=FLAT)
    bytes_lost: int
    bytes_lost_unknown: int
    completed: bool
    failures: tuple[SeedFailure, ...]
    failed_after_cut: Spread = field(metadata=key("failed_after_cut_s", PREFIXED))
    recovery_s: tuple[float | None, ...]
    recovery: Spread = field(metadata=key("recovery_s", PREFIXED))
    longest_stall_s: tuple[float | None, ...]
    longest_stall: Spread = field(metadata=key("longest_stall_s", PREFIXED))
    goodput: Spread = field(metadata=key("goodput_bps", PREFIXED))
    bottleneck: OverallBottleneck


@dataclass(frozen=True)
class FailoverFigures:
    """Every mode's figures, and each seed's modes side by side."""

    modes: Mapping[FailoverMode, ModeFigures] = field(metadata=FLAT)
    pairs: tuple[SeedPair[FailoverMode], ...]


def summarize(runs: Runs[FailoverMode, FailoverRun], facts: TargetFacts) -> FailoverFigures:
    """Per mode: bytes lost, completed, failures with their time, recovery time and longest
    stall per seed with mean and spread, goodput likewise, and what limited the runs; each
    seed's modes side by side."""
    del facts  # a cut and a recovery are measured alike on every target
    figures: dict[FailoverMode, ModeFigures] = {}
    for mode, seeds in runs.items():
        transfers = [t for run in seeds.values() for t in run.transfers.values()]
        recoveries = tuple(run.record.recovery_s for run in seeds.values())
        stalls = tuple(run.record.longest_stall_s for run in seeds.values())
        failures = tuple(
            SeedFailure(seed, failure)
            for seed, run in seeds.items()
            for failure in run.record.failed
        )
        figures[mode] = ModeFigures(
            mode=mode,
            bytes_lost=sum(t.bytes_lost or 0 for t in transfers),
            bytes_lost_unknown=sum(1 for t in transfers if t.bytes_lost is None),
            completed=all(t.completed for t in transfers),
            failures=failures,
            failed_after_cut=Spread.of(f.failure.after_cut_s for f in failures),
            recovery_s=recoveries,
            recovery=Spread.of(recoveries),
            longest_stall_s=stalls,
            longest_stall=Spread.of(stalls),
            goodput=Spread.of(_run_goodput(run) for run in seeds.values()),
            bottleneck=overall_bottleneck(run.bottleneck for run in seeds.values()),
        )
    pairs = seed_pairs(
        runs,
        {
            "recovery_s": lambda run: run.record.recovery_s,
            "longest_stall_s": lambda run: run.record.longest_stall_s,
            "goodput_bps": _run_goodput,
        },
    )
    return FailoverFigures(figures, pairs)


def _run_goodput(run: Run[FailoverRun]) -> float:
    return float(sum(t.goodput_bps for t in run.transfers.values()))


def draw(
    directory: Path,
    runs: Runs[FailoverMode, FailoverRun],
    series: Mapping[FailoverMode, Mapping[int, FailoverSeries]],
    params: Params,
) -> list[str]:
    """Goodput over time of seed 0, one figure per routing policy and placement (every
    transport in it), the cut, the restore and each failure marked."""
    groups: dict[tuple[RoutingPolicy, Placement], list[FailoverMode]] = {}
    for mode in runs:
        groups.setdefault((mode.routing, mode.placement), []).append(mode)
    names = []
    for (routing, placement), modes in groups.items():
        name = (
            "goodput.png"
            if len(groups) == 1
            else f"goodput-{str(routing).replace(':', '')}-{placement}.png"
        )
        lines: dict[str, list[dict[str, float]]] = {}
        markers: dict[str, float] = {}
        for mode in modes:
            run, points = runs[mode][0].record, series[mode][0]
            evs = run.evs
            label = (
                f"{mode.transport} ({evs} EV{'' if evs == 1 else 's'})" if evs else mode.transport
            )
            lines[label] = points.get(ALL_FLOWS) or next(iter(points.values()), [])
            for failure in run.failed:
                if failure.failed_at_s is not None:
                    markers[f"{mode.transport} failed"] = failure.failed_at_s
        first = runs[modes[0]][0].record
        if first.cut_s is not None:
            markers["cut"] = first.cut_s
        if first.restore_s is not None:
            markers["restore"] = first.restore_s
        flows = ", ".join(f"{s} -> {d}" for s, d in params.flow_pairs())
        plots.goodput_over_time(
            directory / name,
            f"failover ({routing} routing, {placement} cut): {flows} "
            f"({params.bin_s * 1000:.0f} ms bins)",
            lines,
            markers,
        )
        names.append(name)
    return names


def text(figures: FailoverFigures) -> list[str]:
    """summary.txt lines: per mode its recovery, stall, goodput, losses and failures as
    "mean (min-max) over N seeds", then each seed's modes in the order they ran."""
    lines = []
    seeds = len(figures.pairs)
    for mode, f in figures.modes.items():
        lost = f"{f.bytes_lost}" + (
            f" (+ {f.bytes_lost_unknown} failed transfer(s) not counted)"
            if f.bytes_lost_unknown
            else ""
        )
        lines.append(
            f"{mode}: back to 90 % after the cut: "
            f"{describe(f.recovery, two_places, seeds, 's')}; longest stall "
            f"{describe(f.longest_stall, two_places, seeds, 's')}; goodput "
            f"{describe(f.goodput, mbit, seeds, 'Mbit/s')}; bytes lost {lost}, "
            f"completed {'yes' if f.completed else 'NO'}"
        )
        if f.failures:
            lines.append(
                f"{mode}: failed in {len(f.failures)} transfer(s), "
                f"{describe(f.failed_after_cut, two_places, len(f.failures), 's')} "
                f"after the cut: {f.failures[0].failure.error}"
            )
    for pair in figures.pairs:
        recovered = ", ".join(
            f"{mode} {'never' if r is None else f'{two_places(r)} s'}"
            for mode, r in pair.values["recovery_s"].items()
        )
        lines.append(f"seed {pair.seed} ({' then '.join(map(str, pair.order))}): {recovered}")
    return lines
