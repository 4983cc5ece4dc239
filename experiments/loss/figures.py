"""The loss experiment's figures over every mode and seed (goodput, measured loss,
retention of the lossless goodput, MRC over each RoCE contender and over the strongest one at
each rate), its figure file and its summary.txt lines."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from experiments import plots
from experiments.bottleneck import OverallBottleneck, overall_bottleneck
from experiments.capabilities import TargetFacts
from experiments.json_form import FLAT, PREFIXED, TEXT, key
from experiments.loss.modes import LossMode, Params, contenders_of, rate_text
from experiments.loss.run import LossRun, LossSeries
from experiments.records import Run, Runs
from experiments.stats import SeedPair, Spread, describe, mbit, seed_pairs, three_places, two_places
from experiments.strongest import AgainstStrongest, against_strongest
from experiments.transports import MRC, is_roce


@dataclass(frozen=True)
class SeedFailure:
    """A transfer that failed, in which seed, and when."""

    seed: int = field(metadata=TEXT)
    error: str | None
    failed_at_s: float | None


@dataclass(frozen=True)
class ModeFigures:
    """One mode over its seeds: goodput and the loss measured, bytes lost, whether all
    completed, failures, and what limited the runs."""

    mode: LossMode = field(metadata=FLAT)
    goodput: Spread = field(metadata=key("goodput_bps", PREFIXED))
    measured_loss: Spread = field(metadata=key("measured_loss_percent", PREFIXED))
    bytes_lost: int
    completed: bool
    failures: tuple[SeedFailure, ...]
    bottleneck: OverallBottleneck


@dataclass(frozen=True)
class Retention:
    """A transport's goodput at a rate over its own lossless goodput, seed by seed."""

    retention: Spread = field(metadata=PREFIXED)


@dataclass(frozen=True)
class Ratio:
    """MRC's goodput over a RoCE contender's at a rate, seed by seed."""

    ratio: Spread = field(metadata=PREFIXED)


@dataclass(frozen=True)
class Strongest:
    """At one rate: the RoCE contender with the highest mean goodput, MRC's ratio to it over
    the means, and the same ratio seed by seed."""

    against: AgainstStrongest = field(metadata=FLAT)
    ratio: Spread = field(metadata=key("mrc_over_strongest_per_seed", PREFIXED))


@dataclass(frozen=True)
class LossFigures:
    """Every mode's figures; per transport and rate (as :func:`rate_text` writes it) the
    retention of its lossless goodput; per RoCE contender and rate MRC over it, and per rate
    the strongest RoCE contender and MRC over it, or why they were not measured; what the
    target's fabric gives RoCE; each seed's modes side by side."""

    modes: Mapping[LossMode, ModeFigures] = field(metadata=FLAT)
    retention: Mapping[str, Mapping[str, Retention]] | str
    mrc_over_roce: Mapping[str, Mapping[str, Ratio]] | str
    strongest_roce: Mapping[str, Strongest] | str
    roce_fabric: str
    pairs: tuple[SeedPair[LossMode], ...]


def summarize(runs: Runs[LossMode, LossRun], facts: TargetFacts) -> LossFigures:
    """Per mode its goodput and measured loss (mean and spread) and failures; per transport
    and rate the goodput and the retention of its own lossless goodput; MRC over RoCE per
    rate; each seed's modes side by side."""
    figures: dict[LossMode, ModeFigures] = {}
    transports: list[str] = []
    rates: list[float] = []
    goodput: dict[tuple[str, float], dict[int, float]] = {}
    for mode, seeds in runs.items():
        if mode.transport not in transports:
            transports.append(mode.transport)
        if mode.loss_rate_percent not in rates:
            rates.append(mode.loss_rate_percent)
        per_seed = {seed: _goodput(run) for seed, run in seeds.items()}
        goodput[(mode.transport, mode.loss_rate_percent)] = per_seed
        transfers = [t for run in seeds.values() for t in run.transfers.values()]
        figures[mode] = ModeFigures(
            mode=mode,
            goodput=Spread.of(per_seed.values()),
            measured_loss=Spread.of(run.record.loss.measured_percent for run in seeds.values()),
            bytes_lost=sum(t.bytes_lost or 0 for t in transfers),
            completed=all(t.completed for t in transfers),
            failures=tuple(
                SeedFailure(seed, t.error, t.failed_at_s)
                for seed, run in seeds.items()
                for t in run.transfers.values()
                if not t.completed
            ),
            bottleneck=overall_bottleneck(run.bottleneck for run in seeds.values()),
        )
    lossless = next((rate for rate in rates if rate == 0), None)
    retention: Mapping[str, Mapping[str, Retention]] | str = (
        {
            transport: {
                rate_text(rate): Retention(
                    Spread.of(
                        _ratios(goodput.get((transport, rate), {}), goodput[(transport, lossless)])
                    )
                )
                for rate in rates
            }
            for transport in transports
        }
        if lossless is not None
        else "not measured: no 0 % rate among rates_percent"
    )
    roces = [transport for transport in transports if is_roce(transport)]
    unmeasured = "not measured: needs mrc and a roce"
    mrc_over_roce: Mapping[str, Mapping[str, Ratio]] | str = unmeasured
    strongest: Mapping[str, Strongest] | str = unmeasured
    if MRC in transports and roces:
        ratios: dict[str, dict[str, Ratio]] = {
            roce: {
                rate_text(rate): Ratio(
                    Spread.of(_ratios(goodput.get((MRC, rate), {}), goodput.get((roce, rate), {})))
                )
                for rate in rates
            }
            for roce in roces
        }
        best: dict[str, Strongest] = {}
        for rate in rates:
            means = {
                transport: figures[LossMode(transport, rate)].goodput.mean
                for transport in transports
                if LossMode(transport, rate) in figures
            }
            against = against_strongest(
                f"goodput at {rate_text(rate)} %", means, higher_is_better=True
            )
            seed_ratios = (
                Spread.of([])
                if against.strongest is None
                else ratios[against.strongest][rate_text(rate)].ratio
            )
            best[rate_text(rate)] = Strongest(against, seed_ratios)
        mrc_over_roce, strongest = ratios, best
    pairs = seed_pairs(runs, {"goodput_bps": _goodput})
    return LossFigures(figures, retention, mrc_over_roce, strongest, facts.roce_class, pairs)


def _goodput(run: Run[LossRun]) -> float:
    return float(sum(t.goodput_bps for t in run.transfers.values()))


def _ratios(top: Mapping[int, float], bottom: Mapping[int, float]) -> list[float | None]:
    """Per seed ``top / bottom``; None where either lacks the seed or the bottom is 0."""
    return [
        top[seed] / bottom[seed] if seed in top and seed in bottom and bottom[seed] else None
        for seed in sorted(set(top) | set(bottom))
    ]


def draw(
    directory: Path,
    runs: Runs[LossMode, LossRun],
    series: Mapping[LossMode, Mapping[int, LossSeries]],
    params: Params,
) -> list[str]:
    """loss.png: goodput and retention against the loss rate, one line per transport, each
    point the mean with its min-max over seeds."""
    del series
    figures = summarize(runs, TargetFacts("any", trimming=False, ecn_marking=None, ecn_by=None))
    rates = params.rates()
    ran = {mode.transport for mode in runs}
    transports = [t for t in contenders_of(params) if t in ran]
    goodput = {
        t: [_bounds(_goodput_of(figures, LossMode(t, rate)), 1e-6) for rate in rates]
        for t in transports
    }
    retention = None
    if not isinstance(figures.retention, str):
        kept = figures.retention
        retention = {
            t: [_bounds(kept[t][rate_text(rate)].retention, 1.0) for rate in rates]
            for t in transports
        }
    failures = {t: [_failures_of(figures, LossMode(t, rate)) for rate in rates] for t in transports}
    plots.against_loss(
        directory / "loss.png",
        f"loss: {params.source} -> {params.destination}, every fabric link dropping UDP 4791 "
        f"at the rate, {params.duration_s:g} s per run",
        [rate_text(rate) for rate in rates],
        goodput,
        retention,
        failures,
    )
    return ["loss.png"]


def _goodput_of(figures: LossFigures, mode: LossMode) -> Spread | None:
    mode_figures = figures.modes.get(mode)
    return None if mode_figures is None else mode_figures.goodput


def _failures_of(figures: LossFigures, mode: LossMode) -> int:
    mode_figures = figures.modes.get(mode)
    return 0 if mode_figures is None else len(mode_figures.failures)


def _bounds(spread: Spread | None, scale: float) -> tuple[float, float, float] | None:
    if spread is None or spread.mean is None or spread.min is None or spread.max is None:
        return None
    return (spread.mean * scale, spread.min * scale, spread.max * scale)


def text(figures: LossFigures) -> list[str]:
    """summary.txt lines: per mode goodput and measured loss; per transport its retention at
    each rate; MRC / RoCE at each rate; each seed's order."""
    lines = []
    seeds = len(figures.pairs)
    for mode, f in figures.modes.items():
        failed = f" FAILED {len(f.failures)}x: {f.failures[0].error}" if f.failures else ""
        lines.append(
            f"{mode}: goodput {describe(f.goodput, mbit, seeds, 'Mbit/s')}; loss measured "
            f"{describe(f.measured_loss, three_places, seeds, '%')}; "
            f"bytes lost {f.bytes_lost}{failed}"
        )
    if isinstance(figures.retention, str):
        lines.append(f"retention: {figures.retention}")
    else:
        for transport, by_rate in figures.retention.items():
            kept = "; ".join(
                f"{rate} %: {describe(r.retention, two_places, seeds)}"
                for rate, r in by_rate.items()
            )
            lines.append(f"{transport} keeps of its lossless goodput: {kept}")
    if isinstance(figures.mrc_over_roce, str) or isinstance(figures.strongest_roce, str):
        lines.append(f"MRC / RoCE: {figures.mrc_over_roce}")
    else:
        for strongest in figures.strongest_roce.values():
            lines.append(
                f"{strongest.against.line(' Mbit/s', 1e-6)}; seed by seed "
                f"{describe(strongest.ratio, two_places, seeds)}"
            )
        for roce, ratios in figures.mrc_over_roce.items():
            lines.append(
                f"MRC / {roce} goodput: "
                + "; ".join(
                    f"{rate} %: {describe(r.ratio, two_places, seeds)}"
                    for rate, r in ratios.items()
                )
            )
    for pair in figures.pairs:
        lines.append(f"seed {pair.seed}: {' then '.join(map(str, pair.order))}")
    return lines
