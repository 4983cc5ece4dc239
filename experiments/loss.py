"""``loss``: goodput against random loss on the fabric's links, per transport.

One transfer from ``source`` to ``destination`` (on different leaves) for ``duration_s``,
once per transport (``mrc``, ``single``, ``roce``: see :mod:`experiments.transports`) and
loss rate (``rates_percent``): every fabric link drops each UDP 4791 frame crossing it, in
either direction (data and acknowledgements), with that probability; LLDP and the side
channel are never dropped (``testbed.mininet.link_loss``: nftables in the patch panel, the
same on both targets). A data packet crosses two fabric links from leaf to leaf, so its
chance of being lost on the way is about twice the rate. The modes are
``TRANSPORT@RATE%`` (``mrc@1%``), rate by rate, and share one bring-up: the loss is set
before each run and removed after it, and each run records the frames its rules saw and
dropped (the loss it got, not only the rate it asked for).

Per transport and rate: goodput as mean and spread over seeds; each transport's
*retention*, its goodput at a rate over its own lossless goodput in the same seed (a 0 rate
must be among the rates); MRC over RoCE at each rate, per seed. Figure ``loss.png``:
goodput and retention against the rate. A RoCE transfer that fails (its retries ran out)
is a result, with its error and when; MRC must complete and lose nothing at every rate.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from experiments import plots
from experiments.bottleneck import OverallBottleneck, overall_bottleneck
from experiments.capabilities import TargetFacts
from experiments.experiment import Experiment
from experiments.fabric_loss import FabricLoss, fabric_loss
from experiments.json_form import FLAT, PREFIXED, TEXT, key
from experiments.metrics import failed_transfer, transfer_metrics
from experiments.placements import leaves_of
from experiments.records import AgentFailure, Run, Runs, Transfer
from experiments.stats import (
    SeedPair,
    Spread,
    describe,
    mbit,
    seed_pairs,
    three_places,
    two_places,
)
from experiments.timeline import RunClock, Series, flow_series, longest_stall
from experiments.topology_variant import Variant
from experiments.transports import (
    MAY_FAIL,
    MRC,
    ROCE,
    SINGLE,
    missing_support,
    parse_routing,
    parse_transports,
)
from testbed.agents import TransferFailed, TransferSpec
from testbed.session import Testbed
from topologies.model import Topology

NAME = "loss"
DEFAULT_TOPOLOGY = "leaf-spine"
#: The highest rate a run may ask for, in percent: above it no transport moves data.
MAX_RATE_PERCENT = 50.0


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``)."""

    duration_s: float = 10.0
    #: Loss rates on every fabric link, in percent, comma-separated.
    rates_percent: str = "0,0.1,0.5,1,2,5"
    transports: str = "mrc,single,roce"
    source: str = "h1"
    destination: str = "h3"
    mrc_evs: int = 256
    message_size: int = 65536
    bin_s: float = 0.5
    lldp_interval_ms: int = 50
    #: RoCE's local ACK timeout as verbs encodes it (4.096 us x 2^14 = 67 ms) and its retries.
    roce_timeout: int = 14
    roce_retry_cnt: int = 7
    #: The controller's routing policy ("": its default); loss never cuts a link.
    routing: str = ""

    def check(self) -> None:
        """ValueError for settings that cannot work."""
        if self.duration_s <= 0 or self.bin_s <= 0 or self.mrc_evs < 1 or self.message_size < 1:
            raise ValueError("duration_s, bin_s, mrc_evs and message_size must be positive")
        if self.routing:
            parse_routing(self.routing)
        modes_of(self)

    def rates(self) -> tuple[float, ...]:
        """The rates in percent, each once, in the order given."""
        return parse_rates(self.rates_percent)


def parse_rates(text: str) -> tuple[float, ...]:
    """``0,0.1,1`` -> (0.0, 0.1, 1.0); ValueError for a rate outside 0..MAX_RATE_PERCENT."""
    rates = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"loss rate {part!r} is not a number (percent)") from None
        if not 0 <= value <= MAX_RATE_PERCENT:
            raise ValueError(f"loss rate {part} % is outside 0..{MAX_RATE_PERCENT:g} %")
        rates.append(value)
    if not rates:
        raise ValueError("no loss rate given (rates_percent, e.g. 0,1,5)")
    if len(set(rates)) != len(rates):
        raise ValueError(f"a loss rate is listed twice: {text}")
    return tuple(rates)


def rate_text(percent: float) -> str:
    """A loss rate as modes, keys and figures write it: ``0.1``, ``5``."""
    return f"{percent:g}"


@dataclass(frozen=True)
class LossMode:
    """One mode: a transport (``experiments.transports``) at a loss rate on every fabric
    link, in percent. Its label is ``TRANSPORT@RATE%`` (``mrc@1%``)."""

    transport: str
    loss_rate_percent: float

    def __str__(self) -> str:
        return f"{self.transport}@{rate_text(self.loss_rate_percent)}%"

    @classmethod
    def parse(cls, label: str) -> LossMode:
        """The mode a label names (a mode key of summary.json); ValueError if it names none."""
        transport, at, rate = label.partition("@")
        if not at or not rate.endswith("%"):
            raise ValueError(f"{label!r} is no loss mode (TRANSPORT@RATE%)")
        return cls(transport, float(rate.removesuffix("%")))


def modes_of(params: Params) -> tuple[LossMode, ...]:
    """Every transport at every rate, rate by rate: the transports compared at one rate run
    side by side."""
    transports = parse_transports(params.transports)
    return tuple(LossMode(t, rate) for rate in params.rates() for t in transports)


def may_fail(mode: LossMode) -> bool:
    """A RoCE transfer whose retries run out fails: a result (see experiments.transports)."""
    return mode.transport in MAY_FAIL


def missing(params: Params) -> list[str]:
    """What this tree's agent and controller lack for the parameters' modes."""
    routings = (parse_routing(params.routing),) if params.routing else ()
    return missing_support(parse_transports(params.transports), routings)


def check_topology(topology: Topology, params: Params) -> None:
    """Both hosts exist and sit on different leaves (the loss is on fabric links)."""
    hosts = {host.name for host in topology.hosts}
    for host in (params.source, params.destination):
        if host not in hosts:
            raise ValueError(f"no host {host!r} in {topology.name} (hosts: {sorted(hosts)})")
    if set(leaves_of(topology, [params.source])) & set(leaves_of(topology, [params.destination])):
        raise ValueError(
            f"{params.source} and {params.destination} share a leaf: their traffic would "
            "cross no fabric link"
        )


def variant(params: Params, mode: LossMode) -> Variant:
    """One network for every mode (the loss is set per run, in the patch panel)."""
    del mode
    routing = parse_routing(params.routing) if params.routing else None
    return Variant(lldp_interval_ms=params.lldp_interval_ms, routing=routing)


@dataclass(frozen=True)
class LossRun:
    """One run's record: its mode, the routing policy asked for (None: the controller's
    default), the transfer, the loss the rules applied, and what makes the run not the
    experiment it claims to be (``problems``)."""

    mode: LossMode = field(metadata=FLAT)
    routing: str | None
    evs: int | None
    transfers: Mapping[str, Transfer]
    loss: FabricLoss
    problems: tuple[str, ...]


#: A run's time series: its one transfer's.
LossSeries = dict[str, Series]


def run_mode(
    testbed: Testbed, params: Params, mode: LossMode, seed: int
) -> tuple[LossRun, LossSeries]:
    """One transfer at the mode's loss rate; its record (with the loss the rules applied)
    and its time series."""
    del seed  # each run draws fresh EVs and fresh random drops; the seed labels it
    clock = RunClock()
    samples: list[dict[str, Any]] = []

    def on_sample(sample: dict[str, Any]) -> None:
        clock.observe(0, sample)
        samples.append(sample)

    spec = TransferSpec(
        params.source,
        params.destination,
        duration_s=params.duration_s,
        evs=params.mrc_evs if mode.transport == MRC else None,
        message_size=params.message_size,
        interval_s=params.bin_s,
        transport=mode.transport,
        roce_timeout=params.roce_timeout,
        roce_retry_cnt=params.roce_retry_cnt,
    )
    name = f"{params.source}->{params.destination}"
    testbed.set_fabric_loss(mode.loss_rate_percent / 100)
    launched = time.monotonic()
    try:
        result: dict[str, Any] | TransferFailed = testbed.transfer(spec, on_sample)
    except TransferFailed as failure:
        result = failure
    finally:
        directions, lldp = testbed.fabric_loss_counters()
        testbed.clear_fabric_loss()
    points = flow_series(samples, 0.0)
    if isinstance(result, TransferFailed):
        transfer = failed_transfer(
            AgentFailure(
                error=str(result),
                failed_at_s=clock.failed_at(result.at, launched),
                error_code=result.code,
                bytes_confirmed=int(samples[-1]["total_bytes"]) if samples else 0,
            )
        )
    else:
        transfer = transfer_metrics(result)
    transfer = dataclasses.replace(
        transfer, longest_stall_s=longest_stall(points, transfer.failed_at_s)
    )
    loss = fabric_loss(directions, lldp, per_direction=True)
    problems = []
    if not directions:
        problems.append("the loss rules were not in place (no counters read)")
    elif loss.frames_seen == 0:
        problems.append("no UDP 4791 frame crossed a fabric link")
    record = LossRun(
        mode=mode,
        routing=params.routing or None,
        evs={MRC: params.mrc_evs, SINGLE: 1}.get(mode.transport),
        transfers={name: transfer},
        loss=loss,
        problems=tuple(problems),
    )
    return record, {name: points}


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
    """MRC's goodput over RoCE's at a rate, seed by seed."""

    ratio: Spread = field(metadata=PREFIXED)


@dataclass(frozen=True)
class LossFigures:
    """Every mode's figures; per transport and rate (as :func:`rate_text` writes it) the
    retention of its lossless goodput, and per rate MRC over RoCE, or why either was not
    measured; each seed's modes side by side."""

    modes: Mapping[LossMode, ModeFigures] = field(metadata=FLAT)
    retention: Mapping[str, Mapping[str, Retention]] | str
    mrc_over_roce: Mapping[str, Ratio] | str
    pairs: tuple[SeedPair[LossMode], ...]


def summarize(runs: Runs[LossMode, LossRun], facts: TargetFacts) -> LossFigures:
    """Per mode its goodput and measured loss (mean and spread) and failures; per transport
    and rate the goodput and the retention of its own lossless goodput; MRC over RoCE per
    rate; each seed's modes side by side."""
    del facts  # random loss is applied alike on every target (the patch panel)
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
    mrc_over_roce: Mapping[str, Ratio] | str = (
        {
            rate_text(rate): Ratio(
                Spread.of(_ratios(goodput.get((MRC, rate), {}), goodput.get((ROCE, rate), {})))
            )
            for rate in rates
        }
        if MRC in transports and ROCE in transports
        else "not measured: needs transports mrc and roce"
    )
    pairs = seed_pairs(runs, {"goodput_bps": _goodput})
    return LossFigures(figures, retention, mrc_over_roce, pairs)


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
    transports = parse_transports(params.transports)
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
    if isinstance(figures.mrc_over_roce, str):
        lines.append(f"MRC / RoCE: {figures.mrc_over_roce}")
    else:
        lines.append(
            "MRC / RoCE goodput: "
            + "; ".join(
                f"{rate} %: {describe(r.ratio, two_places, seeds)}"
                for rate, r in figures.mrc_over_roce.items()
            )
        )
    for pair in figures.pairs:
        lines.append(f"seed {pair.seed}: {' then '.join(map(str, pair.order))}")
    return lines


EXPERIMENT: Experiment[Params, LossMode, LossRun, LossSeries, LossFigures] = Experiment(
    name=NAME,
    default_topology=DEFAULT_TOPOLOGY,
    params_type=Params,
    modes_of=modes_of,
    variant=variant,
    run_mode=run_mode,
    summarize=summarize,
    draw=draw,
    text=text,
    check_topology=check_topology,
    may_fail=may_fail,
    missing=missing,
)
