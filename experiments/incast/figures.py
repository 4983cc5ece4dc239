"""The incast experiment's figures over both fabrics and every seed, the on/off comparison
where the target can make it, its figure file and its summary.txt lines."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from experiments import plots
from experiments.bottleneck import OverallBottleneck, overall_bottleneck, phrase
from experiments.capabilities import TargetFacts
from experiments.headlines import with_failures
from experiments.incast.modes import MODES, Fabric, Params, victim_name
from experiments.incast.run import IncastRun, IncastSeries
from experiments.json_form import FLAT, PREFIXED, key
from experiments.records import Runs
from experiments.stats import SeedPair, Spread, describe, mbit, seed_pairs, two_places

#: What the summary says instead of an on/off ratio on a target with nothing to switch.
NOT_APPLICABLE = "not applicable: no trimming or ECN on this target/kernel"


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


def headline(record: IncastRun) -> str:
    """A run's key figure for its progress line: the victim's goodput before and during the
    incast and the incast's completion time, as summary.txt writes them, and any failure."""

    def goodput(bps: float | None) -> str:
        return "unmeasured" if bps is None else f"{mbit(bps)} Mbit/s"

    completion = record.incast_completion_s
    figure = (
        f"victim goodput {goodput(record.victim_goodput_bps_before)} before, "
        f"{goodput(record.victim_goodput_bps_during)} during the incast; incast completion "
        f"{'never' if completion is None else f'{two_places(completion)} s'}"
    )
    return with_failures(figure, record.transfers)


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
