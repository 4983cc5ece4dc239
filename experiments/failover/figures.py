"""The failover experiment's figures over every mode and seed, its figure files and its
summary.txt lines.

Per mode: bytes lost (MRC: must be 0, and every MRC transfer must complete; a RoCE transfer
whose retries ran out failed, a result, with its error and the time it failed recorded), the
longest stall (the longest run of ``bin_s`` bins with nothing confirmed), and the time from
the cut until the flows' goodput together is back to 90 % of its level before the cut
(``metrics.recovery_time``), as mean, min, max and stdev over the seeds with each seed's
pair beside them.

A cut that missed a flow's path says nothing of how its transport survives one, so each mode
also counts the seeds whose traffic the cut hit (``experiments.failover.exposure``) and gives
its deaths, stalls and recoveries over the exposed runs apart from the others. RoCE is judged
by whether it died and by its stall: per routing policy and placement, the strongest RoCE
contender on the share of seeds it survived, and on its longest stall and its recovery over
exposed runs, with MRC's ratio to it (``experiments.strongest``). Figures: goodput over time
with the cut, the restore and any failure marked, one per routing policy and placement.
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
from experiments.headlines import goodput, with_failures
from experiments.json_form import FLAT, PREFIXED, TEXT, key
from experiments.placements import Placement
from experiments.records import Run, Runs
from experiments.stats import SeedPair, Spread, describe, mbit, seed_pairs, two_places
from experiments.strongest import AgainstStrongest, against_strongest
from experiments.transports import is_roce


@dataclass(frozen=True)
class SeedFailure:
    """A flow that failed, and in which seed."""

    seed: int = field(metadata=TEXT)
    failure: FlowFailure = field(metadata=FLAT)


@dataclass(frozen=True)
class ExposureFigures:
    """A mode's runs of one exposure (the cut hit their traffic, or did not): how many seeds,
    in how many a transfer died and how long after the cut, the longest stall (in every run,
    and in the runs no transfer died in) and the recovery."""

    seeds: int
    died_seeds: int
    failed_after_cut: Spread = field(metadata=key("failed_after_cut_s", PREFIXED))
    longest_stall: Spread = field(metadata=key("longest_stall_s", PREFIXED))
    #: A dead transfer's stall ends at its death, so a transport that dies sooner would
    #: seem to stall less: its stall is judged over the runs it lived through.
    survived_longest_stall: Spread = field(metadata=key("survived_longest_stall_s", PREFIXED))
    recovery: Spread = field(metadata=key("recovery_s", PREFIXED))


@dataclass(frozen=True)
class ModeFigures:
    """One mode over its seeds: bytes lost (and the failed transfers whose loss is not
    known), whether all completed, the failures and how long after the cut they came, each
    seed's recovery and longest stall with their spread, goodput, and what limited the runs;
    in how many seeds a transfer died (and the share that survived), how many the cut hit,
    missed or left unknown, and the figures of the hit and the missed apart."""

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
    died_seeds: int
    #: The share of seeds in which every transfer completed.
    survival_share: float
    exposed_seeds: int
    unexposed_seeds: int
    exposure_unknown_seeds: int
    when_exposed: ExposureFigures
    when_unexposed: ExposureFigures


@dataclass(frozen=True)
class SeedCut:
    """What one seed's runs cut, mode by mode, and whether it hit each mode's traffic."""

    seed: int = field(metadata=TEXT)
    cut: Mapping[FailoverMode, str | None] = field(metadata=TEXT)
    exposed: Mapping[FailoverMode, bool | None]


#: The measures RoCE is judged by (see ``_against_strongest``).
SURVIVAL_SHARE = "survival_share"
LONGEST_STALL_EXPOSED = "longest_stall_exposed_survived_s"
RECOVERY_EXPOSED = "recovery_exposed_s"


@dataclass(frozen=True)
class FailoverFigures:
    """Every mode's figures, each seed's modes side by side, each seed's cut, and per routing
    policy and placement (``static-remote``) the strongest RoCE contender on each measure
    with MRC's ratio to it."""

    modes: Mapping[FailoverMode, ModeFigures] = field(metadata=FLAT)
    pairs: tuple[SeedPair[FailoverMode], ...]
    #: How the runs' cuts were chosen (``random``, ``busiest``).
    cut_choice: str | None
    cuts: tuple[SeedCut, ...]
    against_strongest: Mapping[str, Mapping[str, AgainstStrongest]]


def summarize(runs: Runs[FailoverMode, FailoverRun], facts: TargetFacts) -> FailoverFigures:
    """Per mode: bytes lost, completed, failures with their time, recovery time and longest
    stall per seed with mean and spread, goodput likewise, what limited the runs, deaths and
    exposure; each seed's modes side by side and its cut; the strongest RoCE per measure."""
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
        exposures = [run.record.exposed for run in seeds.values()]
        died = sum(1 for run in seeds.values() if run.record.failed)
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
            died_seeds=died,
            survival_share=1 - died / len(seeds),
            exposed_seeds=exposures.count(True),
            unexposed_seeds=exposures.count(False),
            exposure_unknown_seeds=exposures.count(None),
            when_exposed=_exposure_figures(seeds, exposed=True),
            when_unexposed=_exposure_figures(seeds, exposed=False),
        )
    pairs = seed_pairs(
        runs,
        {
            "recovery_s": lambda run: run.record.recovery_s,
            "longest_stall_s": lambda run: run.record.longest_stall_s,
            "goodput_bps": _run_goodput,
        },
    )
    choices = {run.record.cut_choice for seeds in runs.values() for run in seeds.values()}
    return FailoverFigures(
        figures,
        pairs,
        cut_choice=", ".join(sorted(choices)) or None,
        cuts=_seed_cuts(runs),
        against_strongest=_against_strongest(figures),
    )


def _exposure_figures(seeds: Mapping[int, Run[FailoverRun]], *, exposed: bool) -> ExposureFigures:
    """The figures of a mode's runs whose traffic the cut hit (``exposed``) or missed."""
    chosen = [run.record for run in seeds.values() if run.record.exposed is exposed]
    return ExposureFigures(
        seeds=len(chosen),
        died_seeds=sum(1 for record in chosen if record.failed),
        failed_after_cut=Spread.of(
            failure.after_cut_s for record in chosen for failure in record.failed
        ),
        longest_stall=Spread.of(record.longest_stall_s for record in chosen),
        survived_longest_stall=Spread.of(
            record.longest_stall_s for record in chosen if not record.failed
        ),
        recovery=Spread.of(record.recovery_s for record in chosen),
    )


def _seed_cuts(runs: Runs[FailoverMode, FailoverRun]) -> tuple[SeedCut, ...]:
    """Each seed's cut and exposure, mode by mode (a drawn cut is the same in every mode)."""
    seeds = sorted({seed for by_seed in runs.values() for seed in by_seed})
    return tuple(
        SeedCut(
            seed,
            {mode: by_seed[seed].record.cut for mode, by_seed in runs.items() if seed in by_seed},
            {
                mode: by_seed[seed].record.exposed
                for mode, by_seed in runs.items()
                if seed in by_seed
            },
        )
        for seed in seeds
    )


def _against_strongest(
    figures: Mapping[FailoverMode, ModeFigures],
) -> dict[str, dict[str, AgainstStrongest]]:
    """Per routing policy and placement with a RoCE contender: the strongest RoCE on the
    share of seeds survived, on the longest stall over the exposed runs it survived and on
    the recovery over exposed runs (means; lower is better), with MRC's ratio to it."""
    groups: dict[str, list[ModeFigures]] = {}
    for mode, figure in figures.items():
        groups.setdefault(f"{mode.routing}-{mode.placement}", []).append(figure)
    judged = {}
    for group, members in groups.items():
        if not any(is_roce(f.mode.transport) for f in members):
            continue
        judged[group] = {
            SURVIVAL_SHARE: against_strongest(
                SURVIVAL_SHARE,
                {f.mode.transport: f.survival_share for f in members},
                higher_is_better=True,
            ),
            LONGEST_STALL_EXPOSED: against_strongest(
                LONGEST_STALL_EXPOSED,
                {f.mode.transport: f.when_exposed.survived_longest_stall.mean for f in members},
                higher_is_better=False,
            ),
            RECOVERY_EXPOSED: against_strongest(
                RECOVERY_EXPOSED,
                {f.mode.transport: f.when_exposed.recovery.mean for f in members},
                higher_is_better=False,
            ),
        }
    return judged


def _run_goodput(run: Run[FailoverRun]) -> float:
    return float(sum(t.goodput_bps for t in run.transfers.values()))


def draw(
    directory: Path,
    runs: Runs[FailoverMode, FailoverRun],
    series: Mapping[FailoverMode, Mapping[int, FailoverSeries]],
    params: Params,
) -> list[str]:
    """Goodput over time of seed 0, one figure per routing policy and placement (every
    contender in it, labelled with whether the cut hit its path), the cut, the restore and
    each failure marked."""
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
            lines[_line_label(mode, run)] = points.get(ALL_FLOWS) or next(iter(points.values()), [])
            for failure in run.failed:
                if failure.failed_at_s is not None:
                    markers[f"{mode.transport} failed"] = failure.failed_at_s
        first = runs[modes[0]][0].record
        if first.cut_s is not None:
            markers["cut"] = first.cut_s
        if first.restore_s is not None:
            markers["restore"] = first.restore_s
        flows = ", ".join(f"{s} -> {d}" for s, d in params.flow_pairs())
        cuts = {runs[mode][0].record.cut for mode in modes}
        cut = f" {cuts.pop()}" if len(cuts) == 1 and None not in cuts else ""
        plots.goodput_over_time(
            directory / name,
            f"failover ({routing} routing, {params.cut_choice} {placement} cut{cut}): {flows} "
            f"({params.bin_s * 1000:.0f} ms bins)",
            lines,
            markers,
        )
        names.append(name)
    return names


def _line_label(mode: FailoverMode, run: FailoverRun) -> str:
    """A contender's line: its label, its EVs, whether the cut hit its path."""
    notes = [] if run.evs is None else [f"{run.evs} EV{'' if run.evs == 1 else 's'}"]
    if run.exposed is not None:
        notes.append("path cut" if run.exposed else "path not cut")
    return f"{mode.transport} ({', '.join(notes)})" if notes else mode.transport


def headline(record: FailoverRun) -> str:
    """A run's key figure for its progress line: how long after the cut the flows' goodput
    was back to 90 % (``metrics.recovery_time``, as summary.txt gives it), their goodput, and
    any failure."""
    if record.cut_s is None:
        back = "nothing cut" + (f" ({record.uncut})" if record.uncut else "")
    elif record.recovery_s is None:
        back = "never back to 90 % after the cut"
    else:
        back = f"back to 90 % {two_places(record.recovery_s)} s after the cut"
    return with_failures(f"{back}, {goodput(record.transfers)}", record.transfers)


def text(figures: FailoverFigures) -> list[str]:
    """summary.txt lines: per mode its recovery, stall, goodput, losses and failures as
    "mean (min-max) over N seeds", then each seed's modes in the order they ran, each seed's
    cut and whose traffic it hit, per mode its runs hit and missed apart, and the strongest
    RoCE per measure with MRC's ratio to it."""
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
    lines += [_cut_line(seed_cut, figures.cut_choice) for seed_cut in figures.cuts]
    lines += [_exposure_line(mode, f) for mode, f in figures.modes.items()]
    for group, measures in figures.against_strongest.items():
        routing, placement = group.rsplit("-", 1)
        lines.append(f"strongest RoCE, {routing} routing, {placement} cut:")
        lines += [f"  {measure.line(unit=_UNITS[name])}" for name, measure in measures.items()]
    return lines


_UNITS = {SURVIVAL_SHARE: "", LONGEST_STALL_EXPOSED: " s", RECOVERY_EXPOSED: " s"}


def _cut_line(seed_cut: SeedCut, choice: str | None) -> str:
    """``seed 0: random cut s3:2-l2; path cut: mrc-static-remote yes, ...``, or each mode's
    cut where they differ (a busiest cut follows each mode's own traffic)."""
    cuts = set(seed_cut.cut.values())
    if len(cuts) == 1:
        hit = ", ".join(f"{mode} {_hit(seed_cut.exposed[mode])}" for mode in seed_cut.cut)
        return f"seed {seed_cut.seed}: {choice} cut {cuts.pop() or 'none'}; path cut: {hit}"
    each = ", ".join(
        f"{mode} {cut or 'none'} (path cut: {_hit(seed_cut.exposed[mode])})"
        for mode, cut in seed_cut.cut.items()
    )
    return f"seed {seed_cut.seed}: {choice} cuts: {each}"


def _hit(exposed: bool | None) -> str:
    return "unknown" if exposed is None else "yes" if exposed else "no"


def _exposure_line(mode: FailoverMode, f: ModeFigures) -> str:
    """A mode's deaths, and its runs the cut hit and missed apart."""
    seeds = f.exposed_seeds + f.unexposed_seeds + f.exposure_unknown_seeds
    return (
        f"{mode}: died in {f.died_seeds} of {seeds} seed(s); the cut hit its traffic in "
        f"{f.exposed_seeds}, missed it in {f.unexposed_seeds}, unknown in "
        f"{f.exposure_unknown_seeds}; hit: {_exposure_text(f.when_exposed)}; missed: "
        f"{_exposure_text(f.when_unexposed)}"
    )


def _exposure_text(g: ExposureFigures) -> str:
    if g.seeds == 0:
        return "no seed"
    died = f"died in {g.died_seeds} of {g.seeds}"
    if g.failed_after_cut.seeds:
        died += (
            f" ({describe(g.failed_after_cut, two_places, g.failed_after_cut.seeds, 's')} "
            "after the cut)"
        )
    stall = describe(g.longest_stall, two_places, g.seeds, "s")
    if g.died_seeds:
        lived = g.seeds - g.died_seeds
        survived = describe(g.survived_longest_stall, two_places, lived, "s") if lived else "-"
        stall += f" (to the death where it died; {survived} where it lived)"
    recovery = describe(g.recovery, two_places, g.seeds, "s")
    return f"{died}, longest stall {stall}, back to 90 % {recovery}"
