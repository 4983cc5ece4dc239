"""The controller experiment over every transport and seed: the takeover's time and writes,
the cut's time to its last write under the new primary, bytes lost and transfers completed;
the figure draws the two times per transport."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from experiments import plots
from experiments.capabilities import TargetFacts
from experiments.controller_failure.run import (
    ControllerParams,
    ControllerRunRecord,
    ControllerSeries,
)
from experiments.json_form import FLAT, PREFIXED, key
from experiments.records import Runs
from experiments.stats import Spread, describe, two_places


@dataclass(frozen=True)
class TransportFigures:
    """One transport over its seeds."""

    runs: int
    completed: int
    bytes_lost: int
    #: Transfers whose loss is unknown (they failed before reporting).
    bytes_lost_unknown: int
    takeover: Spread = field(metadata=key("takeover_s", PREFIXED))
    #: Writes every takeover made together, and the most one made (0 when nothing changed).
    takeover_writes: int
    takeover_writes_max: int
    cut_to_write: Spread = field(metadata=key("cut_to_write_s", PREFIXED))
    #: When each failed transfer failed on its run's clock (the kill and the cut are at
    #: ``kill_at_s`` and ``cut_at_s``): a death before the kill is not the controller's.
    failures: tuple[str, ...]
    problems: tuple[str, ...]


@dataclass(frozen=True)
class ControllerFigures:
    """Every transport's figures."""

    transports: Mapping[str, TransportFigures] = field(metadata=FLAT)


def summarize(runs: Runs[str, ControllerRunRecord], facts: TargetFacts) -> ControllerFigures:
    """Per transport: completed, bytes lost, takeover time and writes, cut to last write."""
    del facts  # measured alike on every target
    return _figures(runs)


def _figures(runs: Runs[str, ControllerRunRecord]) -> ControllerFigures:
    figures = {}
    for transport, seeds in runs.items():
        records = [run.record for run in seeds.values()]
        transfers = [t for record in records for t in record.transfers.values()]
        writes = [r.takeover_writes for r in records if r.takeover_writes is not None]
        figures[transport] = TransportFigures(
            runs=len(records),
            completed=sum(1 for t in transfers if t.completed),
            bytes_lost=sum(t.bytes_lost or 0 for t in transfers),
            bytes_lost_unknown=sum(1 for t in transfers if t.bytes_lost is None),
            takeover=Spread.of(r.takeover_s for r in records),
            takeover_writes=sum(writes),
            takeover_writes_max=max(writes, default=0),
            cut_to_write=Spread.of(r.cut_to_write_s for r in records),
            failures=tuple(
                f"seed {seed} at {t.failure.failed_at_s} s: {t.failure.error[:80]}"
                for seed, run in seeds.items()
                for t in run.record.transfers.values()
                if t.failure is not None
            ),
            problems=tuple(p for r in records for p in r.problems),
        )
    return ControllerFigures(figures)


def text(figures: ControllerFigures) -> list[str]:
    """summary.txt's lines: one per transport."""
    lines = []
    for transport, f in figures.transports.items():
        lines.append(
            f"{transport}: takeover {describe(f.takeover, two_places, f.runs, 's')}, "
            f"{f.takeover_writes} writes on takeover (most in one: {f.takeover_writes_max}); "
            f"cut to last write {describe(f.cut_to_write, two_places, f.runs, 's')}; "
            f"{f.completed}/{f.runs} completed, {f.bytes_lost} bytes lost"
            + (f" ({f.bytes_lost_unknown} unknown)" if f.bytes_lost_unknown else "")
        )
        lines.extend(f"  problem: {problem}" for problem in f.problems)
        lines.extend(f"  failed {failure}" for failure in f.failures)
    return lines


def draw(
    directory: Path,
    runs: Runs[str, ControllerRunRecord],
    series: Mapping[str, Mapping[int, ControllerSeries]],
    params: ControllerParams,
) -> list[str]:
    """``controller-times.png``: per transport, the takeover time and the time from the cut
    to the new primary's last write, mean with min-max whiskers over the seeds."""
    del series, params
    figures = _figures(runs)
    name = "controller-times.png"
    measures = ("kill -> other primary everywhere", "cut -> its last write")
    figure, axes = plots.plt.subplots(figsize=(7, 4))
    width = 0.8 / max(1, len(figures.transports))
    for offset, (transport, f) in enumerate(figures.transports.items()):
        spreads = (f.takeover, f.cut_to_write)
        means = [s.mean or 0.0 for s in spreads]
        below = [_whisker(s)[0] for s in spreads]
        above = [_whisker(s)[1] for s in spreads]
        axes.bar(
            [i + offset * width for i in range(len(measures))],
            means,
            width=width,
            yerr=[below, above],
            capsize=4,
            label=transport,
            color=plots.colour_of(transport),
        )
    axes.set_xticks([i + width * (len(figures.transports) - 1) / 2 for i in range(len(measures))])
    axes.set_xticklabels(measures)
    axes.set_ylabel("seconds (mean, min-max over seeds)")
    axes.set_title("The acting controller killed, then a link cut")
    axes.grid(axis="y", alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(directory / name, dpi=110)
    plots.plt.close(figure)
    return [name]


def _whisker(spread: Spread) -> tuple[float, float]:
    """How far the min and the max lie from the mean (0 where no seed gave a value)."""
    if spread.mean is None or spread.min is None or spread.max is None:
        return 0.0, 0.0
    return spread.mean - spread.min, spread.max - spread.mean
