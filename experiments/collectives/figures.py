"""The collective experiment's figures over every mode and seed, its figure files and its
summary.txt lines: per mode the job's figures as mean and spread over seeds, failures and
recovery; per scenario MRC over single-path bus bandwidth, and the strongest RoCE on bus
bandwidth with MRC's ratio to it (a failed job's bus bandwidth counts as 0)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): the backend must be chosen first

from collective.report import Failure
from experiments import plots
from experiments.bottleneck import OverallBottleneck, overall_bottleneck
from experiments.capabilities import TargetFacts
from experiments.collectives.modes import CollectiveMode, Params, Scenario
from experiments.collectives.run import NORMAL_FACTOR, CollectiveRun, CollectiveSeries
from experiments.headlines import with_failures
from experiments.json_form import FLAT, PREFIXED, TEXT, key
from experiments.link_overhead import overhead_of
from experiments.records import Run, Runs
from experiments.stats import SeedPair, Spread, describe, seed_pairs, two_places
from experiments.strongest import AgainstStrongest, against_strongest
from experiments.transports import MRC, SINGLE, is_roce


@dataclass(frozen=True)
class SeedFailure:
    """A job that failed, in which seed: when, on which rank, why."""

    seed: int = field(metadata=TEXT)
    failure: Failure = field(metadata=FLAT)


@dataclass(frozen=True)
class ModeFigures:
    """One mode over its seeds: the job's time per iteration, bus bandwidth (and its share
    of what the links allow), completion time, network-wait share, the event's slowdown and
    the iterations until back to normal; failures, whether every job was verified, what
    limited the runs."""

    mode: CollectiveMode = field(metadata=FLAT)
    time_per_iteration: Spread = field(metadata=key("time_per_iteration_s", PREFIXED))
    busbw: Spread = field(metadata=key("busbw_Bps", PREFIXED))
    busbw_of_allowed: Spread = field(metadata=PREFIXED)
    job_completion: Spread = field(metadata=key("job_completion_s", PREFIXED))
    network_wait_share: Spread = field(metadata=PREFIXED)
    slowdown: Spread = field(metadata=PREFIXED)
    recovery_iterations: Spread = field(metadata=PREFIXED)
    #: The fabric links' bytes: payload, data headers, the rest (SACKs, probes, LLDP), and
    #: other frames per data frame (experiments.link_overhead; MRC's modes only).
    link_payload_share: Spread = field(metadata=PREFIXED)
    link_header_share: Spread = field(metadata=PREFIXED)
    link_other_share: Spread = field(metadata=PREFIXED)
    other_frames_per_data_frame: Spread = field(metadata=PREFIXED)
    failures: tuple[SeedFailure, ...]
    verified: bool
    bottleneck: OverallBottleneck


@dataclass(frozen=True)
class BusbwRatio:
    """MRC's bus bandwidth over single path's in one scenario, seed by seed."""

    busbw_ratio: Spread = field(metadata=PREFIXED)


@dataclass(frozen=True)
class CollectiveFigures:
    """Every mode's figures, MRC over single path per scenario, MRC against the strongest
    RoCE on bus bandwidth per scenario, each seed's modes."""

    modes: Mapping[CollectiveMode, ModeFigures] = field(metadata=FLAT)
    mrc_over_single_busbw: Mapping[Scenario, BusbwRatio]
    #: Per scenario, over the contenders' mean bus bandwidth: the strongest RoCE, MRC's ratio
    #: to it and every RoCE's value (scenarios that ran no RoCE are left out).
    mrc_against_strongest_roce_busbw: Mapping[Scenario, AgainstStrongest]
    pairs: tuple[SeedPair[CollectiveMode], ...]


def summarize_runs(
    runs: Runs[CollectiveMode, CollectiveRun], facts: TargetFacts
) -> CollectiveFigures:
    """Per mode the job's figures as mean and spread over seeds, failures, recovery; MRC over
    single-path bus bandwidth per scenario."""
    del facts  # cuts, loss and ECMP behave alike on every target
    modes: dict[CollectiveMode, ModeFigures] = {}
    for mode, seeds in runs.items():
        records = [run.record for run in seeds.values()]
        jobs = [record.job for record in records]
        splits = [
            None if is_roce(mode.transport) else overhead_of(run.link_utilisation, payload)
            for run in seeds.values()
            for payload in (run.record.payload_bytes,)
        ]
        modes[mode] = ModeFigures(
            mode=mode,
            time_per_iteration=Spread.of(j.time_per_iteration_s for j in jobs),
            busbw=Spread.of(j.busbw_Bps for j in jobs),
            busbw_of_allowed=Spread.of(r.busbw_of_allowed for r in records),
            job_completion=Spread.of(j.job_completion_s for j in jobs),
            network_wait_share=Spread.of(j.network_wait_share for j in jobs),
            slowdown=Spread.of(r.recovery.slowdown for r in records),
            recovery_iterations=Spread.of(r.recovery.iterations for r in records),
            link_payload_share=Spread.of(None if o is None else o.payload_share for o in splits),
            link_header_share=Spread.of(None if o is None else o.header_share for o in splits),
            link_other_share=Spread.of(None if o is None else o.other_share for o in splits),
            other_frames_per_data_frame=Spread.of(
                None if o is None else o.other_frames_per_data_frame for o in splits
            ),
            failures=tuple(
                SeedFailure(seed, run.record.job.failure)
                for seed, run in seeds.items()
                if run.record.job.failure is not None
            ),
            verified=all(job.ok for job in jobs),
            bottleneck=overall_bottleneck(run.bottleneck for run in seeds.values()),
        )
    ratios = {}
    for scenario in sorted({mode.scenario for mode in runs}):
        mrc = runs.get(CollectiveMode(MRC, scenario))
        single = runs.get(CollectiveMode(SINGLE, scenario))
        if mrc is None or single is None:
            continue
        values = []
        for seed, run in mrc.items():
            top = run.record.job.busbw_Bps
            bottom = single[seed].record.job.busbw_Bps if seed in single else None
            values.append(top / bottom if top and bottom else None)
        ratios[scenario] = BusbwRatio(Spread.of(values))
    pairs = seed_pairs(runs, {"job_completion_s": _job_completion})
    return CollectiveFigures(modes, ratios, against_roce(runs), pairs)


def against_roce(runs: Runs[CollectiveMode, CollectiveRun]) -> dict[Scenario, AgainstStrongest]:
    """Per scenario that ran RoCE, the strongest RoCE contender on bus bandwidth and MRC's
    ratio to it, each contender's value its mean over seeds with a failed job's as 0: a job
    that died trained nothing, whatever its iterations before did."""
    compared = {}
    for scenario in sorted({mode.scenario for mode in runs}):
        values = {
            mode.transport: Spread.of(_delivered_busbw(run) for run in seeds.values()).mean
            for mode, seeds in runs.items()
            if mode.scenario == scenario
        }
        if any(is_roce(label) for label in values):
            compared[scenario] = against_strongest(
                f"busbw, {scenario}", values, higher_is_better=True
            )
    return compared


def _delivered_busbw(run: Run[CollectiveRun]) -> float | None:
    job = run.record.job
    return 0.0 if job.failed else job.busbw_Bps


def _job_completion(run: Run[CollectiveRun]) -> float | None:
    return run.record.job.job_completion_s


def draw(
    directory: Path,
    runs: Runs[CollectiveMode, CollectiveRun],
    series: Mapping[CollectiveMode, Mapping[int, CollectiveSeries]],
    params: Params,
) -> list[str]:
    """iterations.png: seed 0's iteration times per scenario, one line per transport, each
    transport's event marked in its colour; completion.png: job completion time per scenario
    and transport (mean over seeds; a failed job drawn as 0 and named in the summary)."""
    del series
    scenarios = list(dict.fromkeys(mode.scenario for mode in runs))
    transports = list(dict.fromkeys(mode.transport for mode in runs))
    figure, axes_list = plt.subplots(
        len(scenarios), 1, figsize=(9, 2.6 * len(scenarios)), squeeze=False
    )
    for axes, scenario in zip(axes_list[:, 0], scenarios, strict=True):
        for transport in transports:
            seeds = runs.get(CollectiveMode(transport, scenario), {})
            if 0 not in seeds:
                continue
            run = seeds[0].record
            records = run.job.per_iteration
            colour = plots.colour_of(transport)
            axes.plot(
                [r.end_s for r in records],
                [r.time_s for r in records],
                marker="o",
                markersize=3,
                label=transport,
                color=colour,
                linestyle=plots.line_style(transport, list(transports)),
            )
            if run.event.at_s is not None:
                axes.axvline(run.event.at_s, color=colour, linestyle="--", linewidth=1)
            if run.job.failure is not None:
                axes.axvline(run.job.failure.at_s, color=colour, linestyle=":")
        axes.set_title(f"{scenario}", fontsize=9)
        axes.set_ylabel("iteration (s)")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    axes_list[-1, 0].set_xlabel("time since the job started (s); dashed: the event")
    figure.suptitle(
        f"{params.collective} of {params.size} bytes, {params.fabric_rate_pps} packets/s fabric "
        "links: iteration times, seed 0",
        fontsize=10,
    )
    figure.tight_layout()
    figure.savefig(directory / "iterations.png", dpi=110)
    plt.close(figure)
    figures = summarize_runs(
        runs, TargetFacts("any", trimming=False, ecn_marking=None, ecn_by=None)
    )

    def completion(transport: str, scenario: Scenario) -> float:
        mode_figures = figures.modes.get(CollectiveMode(transport, scenario))
        return 0.0 if mode_figures is None else mode_figures.job_completion.mean or 0.0

    plots.grouped_bars(
        directory / "completion.png",
        f"{params.collective}: job completion time per scenario (mean over seeds)",
        "job completion (s)",
        [str(s) for s in scenarios],
        {t: [completion(t, s) for s in scenarios] for t in transports},
    )
    return ["iterations.png", "completion.png"]


def _seconds(value: float) -> str:
    return f"{value:.2f}"


def _mbyte(value: float) -> str:
    return f"{value / 1e6:.3f}"


def _percent(value: float) -> str:
    return f"{value * 100:.0f} %"


def headline(record: CollectiveRun) -> str:
    """A run's key figure for its progress line: the job's bus bandwidth and its share of what
    the links allow, as summary.txt writes them, and the job's failure if it failed."""
    busbw = record.job.busbw_Bps
    if busbw is None:
        figure = "no busbw (no iteration completed)"
    else:
        figure = f"busbw {_mbyte(busbw)} MB/s"
        if record.busbw_of_allowed is not None:
            figure += f" = {_percent(record.busbw_of_allowed)} of what the links allow"
    return with_failures(figure, record.transfers)


def text(figures: CollectiveFigures) -> list[str]:
    """summary.txt lines: per mode the job's figures, failures and recovery; the ratios."""
    seeds = len(figures.pairs) or 1
    lines = []
    for mode, f in figures.modes.items():
        failed = (
            f"; FAILED {len(f.failures)}x, first {f.failures[0].failure.at_s:.2f} s in: "
            f"{f.failures[0].failure.reason}"
            if f.failures
            else ""
        )
        lines.append(
            f"{mode}: iteration {describe(f.time_per_iteration, _seconds, seeds, 's')}; "
            f"busbw {describe(f.busbw, _mbyte, seeds, 'MB/s')} = "
            f"{describe(f.busbw_of_allowed, _percent, seeds)} of what the links allow; "
            f"job {describe(f.job_completion, _seconds, seeds, 's')}; waiting on the "
            f"network {describe(f.network_wait_share, _percent, seeds)}; "
            f"verified {'yes' if f.verified else 'NO'}{failed}"
        )
        if f.link_payload_share.mean is not None:
            lines.append(
                f"  link bytes: payload {describe(f.link_payload_share, _percent, seeds)}, "
                f"data headers {describe(f.link_header_share, _percent, seeds)}, the rest "
                f"(SACKs, probes, LLDP) {describe(f.link_other_share, _percent, seeds)}; "
                f"{describe(f.other_frames_per_data_frame, two_places, seeds)} other frames "
                "per data frame"
            )
        if f.slowdown.mean is not None:
            lines.append(
                f"  event: the iteration it hit took "
                f"{describe(f.slowdown, two_places, seeds)} x the ones before; back to "
                f"normal (<= {NORMAL_FACTOR} x) after "
                f"{describe(f.recovery_iterations, two_places, seeds)} more iteration(s)"
            )
    for scenario, ratio in figures.mrc_over_single_busbw.items():
        lines.append(
            f"MRC / single busbw, {scenario}: {describe(ratio.busbw_ratio, two_places, seeds)}"
            " (expected >= 1.3 clean; reported, not asserted)"
        )
    for compared in figures.mrc_against_strongest_roce_busbw.values():
        lines.append(compared.line(" MB/s", 1e-6))
    return lines
