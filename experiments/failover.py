"""``failover``: one transfer across the fabric loses its spine link mid-way and gets it back.

A transfer from ``source`` to ``destination`` (on different leaves) runs for ``duration_s``.
At ``cut_at_s`` the spine link the flow uses most is cut, found from what the source leaf
forwarded onto each uplink over the seconds before (its member counters, or its ports' tx
counters on a target without member counters; the record says which); for the single-path
flow that is *its* link; MRC uses them all, and loses the busiest. At ``restore_at_s`` it
comes back. Each mode runs in the same
network in turn: ``mrc`` (``mrc_evs`` EVs) and ``single`` (1 EV). Goodput is sampled in
``bin_s`` bins by the agent; the cut and the restore are placed on the same clock (the
transfer's start is estimated from the samples' arrival, never late by more than their
delivery delay).

Figures: goodput over time with the cut and the restore marked; per mode the bytes lost
(must be 0), whether the transfer completed, and the time from the cut until goodput is back
to 90 % of its level before the cut (``metrics.recovery_time``), as mean, min, max and stdev
over the seeds with each seed's pair beside them: one seed's recovery is one draw, and draws
of the same build have differed by more than the gap between the modes.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import plots
from experiments.bottleneck import overall_bottleneck
from experiments.capabilities import TargetFacts
from experiments.counters import CountersUnavailable, Uplink, busiest_uplink
from experiments.experiment import Experiment
from experiments.metrics import (
    failed_transfer_metrics,
    goodput_series,
    recovery_time,
    transfer_metrics,
)
from experiments.stats import describe, seed_pairs, spread
from experiments.topology_variant import Variant
from testbed.agents import TransferFailed, TransferSpec
from testbed.session import Testbed

NAME = "failover"
DEFAULT_TOPOLOGY = "leaf-spine"
#: How long before the cut the counters are read (the probe must not delay the cut).
PROBE_LEAD_S = 1.0
#: How long the controller gets to see the restored link up before the next mode starts.
RESTORE_SETTLE_TIMEOUT_S = 15.0
#: Goodput before this time is the transfer's start-up, not its level.
BASELINE_FROM_S = 1.0


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``)."""

    duration_s: float = 20.0
    cut_at_s: float = 5.0
    restore_at_s: float = 12.0
    bin_s: float = 0.1
    source: str = "h1"
    destination: str = "h3"
    mrc_evs: int = 256
    #: Small messages, so that 100 ms bins hold many completions rather than one or two.
    message_size: int = 8192
    lldp_interval_ms: int = 50

    def check(self) -> None:
        """ValueError for timings that cannot work."""
        if not PROBE_LEAD_S < self.cut_at_s < self.restore_at_s < self.duration_s:
            raise ValueError(
                f"need {PROBE_LEAD_S} < cut_at_s < restore_at_s < duration_s, got "
                f"{self.cut_at_s}, {self.restore_at_s}, {self.duration_s}"
            )


def variant(params: Params, mode: str) -> Variant:
    """The same network for both modes (they differ only in the agents' EVs)."""
    del mode
    return Variant(lldp_interval_ms=params.lldp_interval_ms)


class _Schedule:
    """Reads the source leaf's counters, cuts and restores on the transfer's own clock."""

    def __init__(self, testbed: Testbed, params: Params, leaf: str) -> None:
        self.testbed = testbed
        self.params = params
        self.leaf = leaf
        self.before = testbed.status()
        self.probe: dict[str, Any] | None = None
        self.cut: Uplink | None = None
        self.cut_s: float | None = None
        self.restore_s: float | None = None
        self.cut_error: str | None = None
        self._start: float | None = None

    def _now(self) -> float:
        assert self._start is not None
        return time.monotonic() - self._start

    def on_sample(self, sample: dict[str, Any]) -> None:
        elapsed = float(sample["elapsed_s"])
        start = time.monotonic() - elapsed
        self._start = start if self._start is None else min(self._start, start)
        params = self.params
        if self.probe is None and elapsed >= params.cut_at_s - PROBE_LEAD_S:
            self.probe = self.testbed.status()
        due = self.cut is None and self.cut_error is None and self.probe is not None
        if due and self._now() >= params.cut_at_s:
            try:
                uplink = self._busiest()
            except CountersUnavailable as error:
                self.cut_error = str(error)  # recorded; the transfer runs on uncut
                return
            self.testbed.fail(f"{self.leaf}:{uplink.port}", uplink.peer)
            self.cut, self.cut_s = uplink, self._now()
        if self.cut is not None and self.restore_s is None and self._now() >= params.restore_at_s:
            self.restore()

    def _busiest(self) -> Uplink:
        """The busiest uplink since the start; a snapshot whose counters could not be read
        (a loaded machine) is taken again once, at the moment of the cut."""
        assert self.probe is not None
        topology = self.testbed.topology
        try:
            return busiest_uplink(topology, self.leaf, self.before, self.probe)
        except CountersUnavailable:
            return busiest_uplink(topology, self.leaf, self.before, self.testbed.status())

    def restore(self) -> None:
        """Bring the cut link back (also after a failed transfer); idempotent."""
        if self.cut is None or self.restore_s is not None:
            return
        link = self.testbed.restore(f"{self.leaf}:{self.cut.port}", self.cut.peer)
        self.restore_s = self._now() if self._start is not None else None
        self.testbed.wait_link_state(link, down=False, timeout=RESTORE_SETTLE_TIMEOUT_S)


def run_mode(testbed: Testbed, params: Params, mode: str, seed: int) -> tuple[dict, dict]:
    """One transfer in ``mode``; its record for summary.json and its time series."""
    del seed  # each run draws fresh EVs (the agent's own randomness); the seed labels it
    leaf = testbed.topology.host(params.source).nics[0].switch
    schedule = _Schedule(testbed, params, leaf)
    spec = TransferSpec(
        params.source,
        params.destination,
        duration_s=params.duration_s,
        evs=params.mrc_evs if mode == "mrc" else 1,
        message_size=params.message_size,
        interval_s=params.bin_s,
    )
    name = f"{params.source}->{params.destination}"
    try:
        result = testbed.transfer(spec, schedule.on_sample)
    except TransferFailed as failure:
        return {"transfers": {name: failed_transfer_metrics(str(failure))}}, {name: []}
    finally:
        schedule.restore()
    series = goodput_series(result)
    metrics = transfer_metrics(result)
    cut = schedule.cut
    record: dict[str, Any] = {
        "transfers": {name: metrics},
        "evs": spec.evs,
        "cut_link": None if cut is None else f"{leaf}:{cut.port}-{cut.peer}",
        "cut_probe_packets": None if cut is None else cut.packets,
        # member counters (bmv2) or the leaf's port tx counters (linux): see counters.py
        "cut_counters": None if cut is None else cut.source,
        "cut_s": schedule.cut_s,
        "cut_error": schedule.cut_error,
        "restore_s": schedule.restore_s,
        "recovery_s": None
        if schedule.cut_s is None
        else recovery_time(series, schedule.cut_s, BASELINE_FROM_S),
        # What makes this run not the experiment it claims to be: a run with no cut measured
        # nothing about failover, whatever its transfer did (see results.summary_problems).
        "problems": [] if cut is not None else [f"no link was cut: {schedule.cut_error}"],
    }
    return record, {name: series}


def summarize(runs: dict[str, dict[str, dict]], facts: TargetFacts) -> dict[str, Any]:
    """Per mode: bytes lost, all completed, recovery time per seed with its mean and spread,
    goodput likewise, and what limited the runs; each seed's pair of recovery times."""
    del facts  # a cut and a recovery are measured alike on every target
    figures: dict[str, Any] = {}
    for mode, seeds in runs.items():
        transfers = [t for run in seeds.values() for t in run["transfers"].values()]
        recoveries = [run.get("recovery_s") for run in seeds.values()]
        figures[mode] = {
            "bytes_lost": sum(t["bytes_lost"] or 0 for t in transfers),
            "completed": all(t["completed"] for t in transfers),
            "recovery_s": recoveries,
            **spread("recovery_s", recoveries),
            **spread("goodput_bps", [t["goodput_bps"] for t in transfers]),
            "bottleneck": overall_bottleneck(run["bottleneck"] for run in seeds.values()),
        }
    figures["pairs"] = seed_pairs(
        runs,
        {
            "recovery_s": lambda run: run.get("recovery_s"),
            "goodput_bps": lambda run: sum(t["goodput_bps"] for t in run["transfers"].values()),
        },
    )
    return figures


def draw(directory: Path, runs: dict, series: dict, params: Params) -> list[str]:
    """goodput.png: every mode of seed 0, cut and restore marked (seed 0's mrc timing)."""
    lines = {
        f"{mode} ({runs[mode]['0'].get('evs')} EVs)": points
        for mode in runs
        for points in series[mode]["0"].values()
    }
    markers = {}
    first = runs["mrc"]["0"]
    if first.get("cut_s") is not None:
        markers["cut"] = first["cut_s"]
    if first.get("restore_s") is not None:
        markers["restore"] = first["restore_s"]
    plots.goodput_over_time(
        directory / "goodput.png",
        f"failover: {params.source} -> {params.destination}, spine link cut and restored "
        f"({params.bin_s * 1000:.0f} ms bins)",
        lines,
        markers,
    )
    return ["goodput.png"]


def text(figures: dict[str, Any]) -> list[str]:
    """summary.txt lines: per mode the recovery as "mean (min-max) over N seeds", then each
    seed's pair in the order it ran."""
    lines = []
    pairs = figures["pairs"]
    for mode, f in figures.items():
        if mode == "pairs":
            continue
        completed = "yes" if f["completed"] else "NO"
        lines.append(
            f"{mode:<7} back to 90 % after the cut: "
            f"{describe(f, 'recovery_s', _two_places, len(pairs), 's')}; goodput "
            f"{describe(f, 'goodput_bps', _mbit, len(pairs), 'Mbit/s')}; bytes lost "
            f"{f['bytes_lost']}, "
            f"completed {completed}"
        )
    for pair in pairs:
        recovered = ", ".join(
            f"{mode} {'never' if r is None else f'{_two_places(r)} s'}"
            for mode, r in pair["recovery_s"].items()
        )
        lines.append(f"seed {pair['seed']} ({' then '.join(pair['order'])}): {recovered}")
    return lines


def _two_places(value: float) -> str:
    return f"{value:.2f}"


def _mbit(bps: float) -> str:
    return f"{bps / 1e6:.3f}"


EXPERIMENT = Experiment(
    name=NAME,
    default_topology=DEFAULT_TOPOLOGY,
    params_type=Params,
    variant=variant,
    run_mode=run_mode,
    summarize=summarize,
    draw=draw,
    text=text,
)
