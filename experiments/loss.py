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

import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import plots
from experiments.bottleneck import overall_bottleneck
from experiments.capabilities import TargetFacts
from experiments.experiment import Experiment
from experiments.metrics import failed_transfer_metrics, transfer_metrics
from experiments.placements import leaves_of
from experiments.stats import describe, mbit, seed_pairs, spread, three_places, two_places
from experiments.timeline import RunClock, flow_series, longest_stall
from experiments.topology_variant import Variant
from experiments.transports import (
    MAY_FAIL,
    MRC,
    ROCE,
    SINGLE,
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

    def rates(self) -> tuple[str, ...]:
        """The rates as written in mode names (``0.1``), each once, in the order given."""
        return parse_rates(self.rates_percent)


def parse_rates(text: str) -> tuple[str, ...]:
    """``0,0.1,1`` -> ("0", "0.1", "1"); ValueError for a rate outside 0..MAX_RATE_PERCENT."""
    rates = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            value = float(part)
        except ValueError:
            raise ValueError(f"loss rate {part!r} is not a number (percent)") from None
        if not 0 <= value <= MAX_RATE_PERCENT:
            raise ValueError(f"loss rate {part} % is outside 0..{MAX_RATE_PERCENT:g} %")
        rates.append(f"{value:g}")
    if not rates:
        raise ValueError("no loss rate given (rates_percent, e.g. 0,1,5)")
    if len(set(rates)) != len(rates):
        raise ValueError(f"a loss rate is listed twice: {text}")
    return tuple(rates)


def modes_of(params: Params) -> tuple[str, ...]:
    """``TRANSPORT@RATE%``, rate by rate: the transports compared at one rate run side by
    side."""
    transports = parse_transports(params.transports)
    return tuple(f"{t}@{rate}%" for rate in params.rates() for t in transports)


def split_mode(mode: str) -> tuple[str, str]:
    """A mode's (transport, rate in percent as written)."""
    transport, _, rate = mode.partition("@")
    return transport, rate.removesuffix("%")


def may_fail(mode: str) -> bool:
    """A RoCE transfer whose retries run out fails: a result (see experiments.transports)."""
    return split_mode(mode)[0] in MAY_FAIL


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


def variant(params: Params, mode: str) -> Variant:
    """One network for every mode (the loss is set per run, in the patch panel)."""
    del mode
    routing = parse_routing(params.routing) if params.routing else None
    return Variant(lldp_interval_ms=params.lldp_interval_ms, routing=routing)


def run_mode(testbed: Testbed, params: Params, mode: str, seed: int) -> tuple[dict, dict]:
    """One transfer at the mode's loss rate; its record (with the loss the rules applied)
    and its time series."""
    del seed  # each run draws fresh EVs and fresh random drops; the seed labels it
    transport, rate = split_mode(mode)
    clock = RunClock()
    samples: list[dict[str, Any]] = []

    def on_sample(sample: dict[str, Any]) -> None:
        clock.observe(0, sample)
        samples.append(sample)

    spec = TransferSpec(
        params.source,
        params.destination,
        duration_s=params.duration_s,
        evs=params.mrc_evs if transport == MRC else None,
        message_size=params.message_size,
        interval_s=params.bin_s,
        transport=transport,
        roce_timeout=params.roce_timeout,
        roce_retry_cnt=params.roce_retry_cnt,
    )
    name = f"{params.source}->{params.destination}"
    testbed.set_fabric_loss(float(rate) / 100)
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
        metrics = failed_transfer_metrics(str(result))
        metrics.update(
            error_code=result.code,
            failed_at_s=clock.failed_at(result.at, launched),
            bytes_confirmed=int(samples[-1]["total_bytes"]) if samples else 0,
        )
    else:
        metrics = transfer_metrics(result)
    metrics["longest_stall_s"] = longest_stall(points, metrics.get("failed_at_s"))
    matched = sum(counters.matched for counters in directions.values())
    dropped = sum(counters.dropped for counters in directions.values())
    problems = []
    if not directions:
        problems.append("the loss rules were not in place (no counters read)")
    elif matched == 0:
        problems.append("no UDP 4791 frame crossed a fabric link")
    record: dict[str, Any] = {
        "transport": transport,
        "loss_rate_percent": float(rate),
        "routing": params.routing or None,
        "evs": {MRC: params.mrc_evs, SINGLE: 1}.get(transport),
        "transfers": {name: metrics},
        "loss": {
            "frames_seen": matched,
            "frames_dropped": dropped,
            "measured_percent": 100 * dropped / matched if matched else None,
            "lldp_frames_passed": lldp,
            "per_direction": {
                hop: {"seen": c.matched, "dropped": c.dropped}
                for hop, c in sorted(directions.items())
            },
        },
        "problems": problems,
    }
    return record, {name: points}


def summarize(runs: dict[str, dict[str, dict]], facts: TargetFacts) -> dict[str, Any]:
    """Per mode its goodput and measured loss (mean and spread) and failures; per transport
    and rate the goodput and the retention of its own lossless goodput; MRC over RoCE per
    rate; each seed's modes side by side."""
    del facts  # random loss is applied alike on every target (the patch panel)
    figures: dict[str, Any] = {}
    transports: list[str] = []
    rates: list[str] = []
    goodput: dict[tuple[str, str], dict[str, float]] = {}
    for mode, seeds in runs.items():
        transport, rate = split_mode(mode)
        if transport not in transports:
            transports.append(transport)
        if rate not in rates:
            rates.append(rate)
        per_seed = {seed: _goodput(run) for seed, run in seeds.items()}
        goodput[(transport, rate)] = per_seed
        transfers = [t for run in seeds.values() for t in run["transfers"].values()]
        failures = [
            {"seed": seed, "error": t["error"], "failed_at_s": t.get("failed_at_s")}
            for seed, run in seeds.items()
            for t in run["transfers"].values()
            if not t["completed"]
        ]
        figures[mode] = {
            "transport": transport,
            "loss_rate_percent": float(rate),
            **spread("goodput_bps", per_seed.values()),
            **spread(
                "measured_loss_percent",
                [run["loss"]["measured_percent"] for run in seeds.values()],
            ),
            "bytes_lost": sum(t["bytes_lost"] or 0 for t in transfers),
            "completed": all(t["completed"] for t in transfers),
            "failures": failures,
            "bottleneck": overall_bottleneck(run["bottleneck"] for run in seeds.values()),
        }
    lossless = next((rate for rate in rates if float(rate) == 0), None)
    figures["retention"] = (
        {
            transport: {
                rate: spread(
                    "retention",
                    _ratios(goodput.get((transport, rate), {}), goodput[(transport, lossless)]),
                )
                for rate in rates
            }
            for transport in transports
        }
        if lossless is not None
        else "not measured: no 0 % rate among rates_percent"
    )
    figures["mrc_over_roce"] = (
        {
            rate: spread(
                "ratio", _ratios(goodput.get((MRC, rate), {}), goodput.get((ROCE, rate), {}))
            )
            for rate in rates
        }
        if MRC in transports and ROCE in transports
        else "not measured: needs transports mrc and roce"
    )
    figures["pairs"] = seed_pairs(runs, {"goodput_bps": _goodput})
    return figures


def _goodput(run: Mapping[str, Any]) -> float:
    return float(sum(t["goodput_bps"] for t in run["transfers"].values()))


def _ratios(top: dict[str, float], bottom: dict[str, float]) -> list[float | None]:
    """Per seed ``top / bottom``; None where either lacks the seed or the bottom is 0."""
    return [
        top[seed] / bottom[seed] if seed in top and seed in bottom and bottom[seed] else None
        for seed in sorted(set(top) | set(bottom), key=int)
    ]


def draw(directory: Path, runs: dict, series: dict, params: Params) -> list[str]:
    """loss.png: goodput and retention against the loss rate, one line per transport, each
    point the mean with its min-max over seeds."""
    del series
    figures = summarize(runs, TargetFacts("any", trimming=False, ecn_marking=None, ecn_by=None))
    rates = list(params.rates())
    transports = list(parse_transports(params.transports))
    goodput = {
        t: [_bounds(figures.get(f"{t}@{rate}%", {}), "goodput_bps", 1e-6) for rate in rates]
        for t in transports
    }
    retention = None
    if isinstance(figures["retention"], dict):
        retention = {
            t: [_bounds(figures["retention"][t][rate], "retention", 1.0) for rate in rates]
            for t in transports
        }
    failures = {
        t: [len(figures.get(f"{t}@{rate}%", {}).get("failures", [])) for rate in rates]
        for t in transports
    }
    plots.against_loss(
        directory / "loss.png",
        f"loss: {params.source} -> {params.destination}, every fabric link dropping UDP 4791 "
        f"at the rate, {params.duration_s:g} s per run",
        rates,
        goodput,
        retention,
        failures,
    )
    return ["loss.png"]


def _bounds(figure: dict[str, Any], name: str, scale: float) -> tuple[float, float, float] | None:
    mean = figure.get(f"{name}_mean")
    if mean is None:
        return None
    return (mean * scale, figure[f"{name}_min"] * scale, figure[f"{name}_max"] * scale)


def text(figures: dict[str, Any]) -> list[str]:
    """summary.txt lines: per mode goodput and measured loss; per transport its retention at
    each rate; MRC / RoCE at each rate; each seed's order."""
    lines = []
    pairs = figures["pairs"]
    seeds = len(pairs)
    for mode, f in figures.items():
        if mode in ("pairs", "retention", "mrc_over_roce"):
            continue
        failed = (
            f" FAILED {len(f['failures'])}x: {f['failures'][0]['error']}" if f["failures"] else ""
        )
        lines.append(
            f"{mode}: goodput {describe(f, 'goodput_bps', mbit, seeds, 'Mbit/s')}; loss measured "
            f"{describe(f, 'measured_loss_percent', three_places, seeds, '%')}; "
            f"bytes lost {f['bytes_lost']}{failed}"
        )
    retention = figures["retention"]
    if isinstance(retention, dict):
        for transport, by_rate in retention.items():
            kept = "; ".join(
                f"{rate} %: {describe(f, 'retention', two_places, seeds)}"
                for rate, f in by_rate.items()
            )
            lines.append(f"{transport} keeps of its lossless goodput: {kept}")
    else:
        lines.append(f"retention: {retention}")
    ratio = figures["mrc_over_roce"]
    if isinstance(ratio, dict):
        lines.append(
            "MRC / RoCE goodput: "
            + "; ".join(
                f"{rate} %: {describe(f, 'ratio', two_places, seeds)}" for rate, f in ratio.items()
            )
        )
    else:
        lines.append(f"MRC / RoCE: {ratio}")
    for pair in pairs:
        lines.append(f"seed {pair['seed']}: {' then '.join(pair['order'])}")
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
    check_topology=check_topology,
    modes_for=modes_of,
    may_fail=may_fail,
)
