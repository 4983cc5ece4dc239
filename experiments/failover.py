"""``failover``: transfers across the fabric lose part of it mid-way and get it back.

The flows (``flows``, ``SOURCE:DESTINATION`` on different leaves; one by default) run for
``duration_s``. At ``cut_at_s`` part of the fabric fails, chosen from what the flows used
(:mod:`experiments.placements`, from the switches' counters read ``PROBE_LEAD_S`` before the
cut, or the source host's NIC counters):

* ``local``: the source leaf's busiest uplink (the source leaf sees it go);
* ``remote``: the busiest downlink into the destination leaf, on the spine that forwarded the
  most toward it (invisible to the source leaf; a single-path or RoCE flow is hit too);
* ``switch``: that spine loses power under load (bmv2: its process is killed with kill -9 and
  its links go dark; linux, with no switch process: its links go dark), and comes back at
  ``restore_at_s``: power on, reprogrammed by the controller, links lit. With several long
  flows this is the papers' T1 reboot (``make experiment NAME=reboot``);
* ``nic``: the source host's busiest NIC (a host with a NIC per plane, ``two-plane``).

At ``restore_at_s`` it comes back. The modes are every transport (``mrc``, ``single``,
``roce``, see :mod:`experiments.transports`) under every controller routing policy
(``routings``) at every placement (``placements``): ``mrc-static-remote`` and so on. The
default is the headline: ``static`` routing (MRC's deployment: nothing is rerouted
fabric-wide), a ``remote`` cut, all three transports. Modes under one policy share a
bring-up; the order alternates seed by seed as every experiment's does.

Per mode: bytes lost (MRC: must be 0, and every MRC transfer must complete; a RoCE transfer
whose retries ran out failed, a result, with its error and the time it failed recorded), the
longest stall (the longest run of ``bin_s`` bins with nothing confirmed), and the time from
the cut until the flows' goodput together is back to 90 % of its level before the cut
(``metrics.recovery_time``), as mean, min, max and stdev over the seeds with each seed's
pair beside them. Figures: goodput over time with the cut, the restore and any failure
marked, one per routing policy and placement.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments import plots
from experiments.bottleneck import overall_bottleneck
from experiments.capabilities import TargetFacts
from experiments.counters import CountersUnavailable
from experiments.experiment import Experiment
from experiments.metrics import failed_transfer_metrics, recovery_time, transfer_metrics
from experiments.placements import (
    LOCAL,
    NIC,
    PLACEMENTS,
    REMOTE,
    SWITCH,
    Cut,
    busiest_nic,
    busiest_spine,
    leaves_of,
    local_uplink,
    remote_downlink,
)
from experiments.stats import describe, mbit, seed_pairs, spread, two_places
from experiments.timeline import RunClock, aggregate, flow_series, longest_stall
from experiments.topology_variant import Variant
from experiments.transports import (
    MAY_FAIL,
    MRC,
    SINGLE,
    parse_choices,
    parse_routings,
    parse_transports,
)
from testbed.agents import TransferFailed, TransferSpec
from testbed.session import Testbed
from topologies.model import LinkId, Topology

log = logging.getLogger(__name__)

NAME = "failover"
DEFAULT_TOPOLOGY = "leaf-spine"
#: How long before the cut the counters are read (the probe must not delay the cut).
PROBE_LEAD_S = 1.0
#: How long the controller gets to see a restored link up (and, before a run, every link).
RESTORE_SETTLE_TIMEOUT_S = 15.0
#: Goodput before this time is the transfers' start-up, not their level.
BASELINE_FROM_S = 1.0
#: The key of the flows' goodput together in a run's time series (several flows only).
ALL_FLOWS = "all flows"
#: How often the schedule looks at the clock.
TICK_S = 0.01


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``)."""

    duration_s: float = 20.0
    cut_at_s: float = 5.0
    restore_at_s: float = 12.0
    bin_s: float = 0.1
    #: The flows, ``SOURCE:DESTINATION`` separated by commas; each source on another leaf
    #: than its destination.
    flows: str = "h1:h3"
    transports: str = "mrc,single,roce"
    routings: str = "static"
    placements: str = REMOTE
    mrc_evs: int = 256
    #: Small messages, so that 100 ms bins hold many completions rather than one or two.
    message_size: int = 8192
    lldp_interval_ms: int = 50
    #: RoCE's local ACK timeout as verbs encodes it (4.096 us x 2^14 = 67 ms) and its retries.
    roce_timeout: int = 14
    roce_retry_cnt: int = 7
    #: ``switch``: its links go dark as a powered-off switch's do (False, bmv2 only: the
    #: process dies and its ports stay lit, a hung switch its neighbours keep sending into).
    switch_dark: bool = True

    def check(self) -> None:
        """ValueError for timings, flows or mode lists that cannot work."""
        if not PROBE_LEAD_S < self.cut_at_s < self.restore_at_s < self.duration_s:
            raise ValueError(
                f"need {PROBE_LEAD_S} < cut_at_s < restore_at_s < duration_s, got "
                f"{self.cut_at_s}, {self.restore_at_s}, {self.duration_s}"
            )
        if self.bin_s <= 0 or self.mrc_evs < 1 or self.message_size < 1:
            raise ValueError("bin_s, mrc_evs and message_size must be positive")
        self.flow_pairs()
        modes_of(self)

    def flow_pairs(self) -> list[tuple[str, str]]:
        """``flows`` as (source, destination) pairs; ValueError when malformed."""
        return parse_flows(self.flows)


def parse_flows(text: str) -> list[tuple[str, str]]:
    """``h1:h3,h2:h4`` -> [("h1", "h3"), ("h2", "h4")]; each pair once, two hosts each."""
    pairs = []
    for part in (p.strip() for p in text.split(",")):
        source, sep, destination = part.partition(":")
        if not sep or not source or not destination or ":" in destination:
            raise ValueError(f"flow {part!r}: expected SOURCE:DESTINATION, e.g. h1:h3")
        if source == destination:
            raise ValueError(f"flow {part!r}: a flow needs two hosts")
        pairs.append((source, destination))
    if len(set(pairs)) != len(pairs):
        raise ValueError(f"a flow is listed twice: {text}")
    return pairs


def modes_of(params: Params) -> tuple[str, ...]:
    """``TRANSPORT-ROUTING-PLACEMENT`` for every combination, policy by policy, then
    placement by placement, then transport."""
    transports = parse_transports(params.transports)
    routings = parse_routings(params.routings)
    placements = parse_choices(params.placements, PLACEMENTS, "placement")
    return tuple(
        mode_name(transport, routing, placement)
        for routing in routings
        for placement in placements
        for transport in transports
    )


def mode_name(transport: str, routing: str, placement: str) -> str:
    return f"{transport}-{routing}-{placement}"


def split_mode(mode: str) -> tuple[str, str, str]:
    """A mode's (transport, routing policy, placement)."""
    transport, routing, placement = mode.split("-", 2)
    return transport, routing, placement


def may_fail(mode: str) -> bool:
    """A RoCE transfer whose retries run out fails: a result (see experiments.transports)."""
    return split_mode(mode)[0] in MAY_FAIL


def check_topology(topology: Topology, params: Params) -> None:
    """Every flow's hosts exist and sit on different leaves; ``nic`` needs sources with a
    NIC to spare."""
    hosts = {host.name for host in topology.hosts}
    for source, destination in params.flow_pairs():
        for host in (source, destination):
            if host not in hosts:
                raise ValueError(f"no host {host!r} in {topology.name} (hosts: {sorted(hosts)})")
        shared = set(leaves_of(topology, [source])) & set(leaves_of(topology, [destination]))
        if shared:
            raise ValueError(
                f"flow {source}:{destination}: both hosts are on {sorted(shared)}: the fabric "
                "between them has nothing to cut"
            )
    if NIC in parse_choices(params.placements, PLACEMENTS, "placement"):
        for source, _ in params.flow_pairs():
            if len(topology.host(source).nics) < 2:
                raise ValueError(
                    f"placement nic cuts one of {source}'s NICs, and {source} has one in "
                    f"{topology.name}: use a topology with a NIC per plane (TOPO=two-plane)"
                )


def variant(params: Params, mode: str) -> Variant:
    """One network per routing policy (the agents and the cut differ, not the network)."""
    return Variant(lldp_interval_ms=params.lldp_interval_ms, routing=split_mode(mode)[1])


class _Schedule:
    """Breaks and mends the fabric on the run's clock, in a thread of its own, while the
    flows run: probes the counters ``PROBE_LEAD_S`` before the cut, breaks what the
    placement chose at ``cut_at_s``, mends it at ``restore_at_s`` or when the flows are
    over, whichever comes first."""

    def __init__(
        self,
        testbed: Testbed,
        params: Params,
        placement: str,
        flows: list[tuple[str, str]],
        clock: RunClock,
    ) -> None:
        self.testbed = testbed
        self.params = params
        self.placement = placement
        self.flows = flows
        self.clock = clock
        self.before = testbed.status()
        self.nics_before = self._nic_counters()
        self.probe: dict[str, Any] | None = None
        self.nics_probe: dict[str, int] = {}
        self.cut: Cut | None = None
        self.links: list[LinkId] = []
        self.cut_s: float | None = None
        self.restore_s: float | None = None
        self.switch_back_s: float | None = None
        self.cut_error: str | None = None
        self.problems: list[str] = []
        self._broken = False
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._run, name="failover-schedule", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def finish(self) -> None:
        """The flows are over: stop, mend whatever is still broken, and wait until the
        controller sees every link it tracks up again."""
        self._done.set()
        self._thread.join()
        if self._broken:
            self._mend()
        for link in self.links:
            if not self.testbed.controller_tracks(link):
                continue  # a host link on bmv2: hosts answer no LLDP
            if (
                self.testbed.wait_link_state(link, down=False, timeout=RESTORE_SETTLE_TIMEOUT_S)
                is None
            ):
                self.problems.append(
                    f"the controller did not see {link} up {RESTORE_SETTLE_TIMEOUT_S:.0f} s "
                    "after the restore"
                )

    def _run(self) -> None:
        params = self.params
        try:
            if not self._wait_until(params.cut_at_s - PROBE_LEAD_S):
                return
            self.probe = self.testbed.status()
            self.nics_probe = self._nic_counters()
            if not self._wait_until(params.cut_at_s):
                return
            try:
                self.cut = self._choose()
            except CountersUnavailable as error:
                self.cut_error = str(error)  # recorded; the flows run on uncut
                return
            self._break(self.cut)
            if not self._wait_until(params.restore_at_s):
                return
            self._mend()
        except Exception as error:  # recorded as the run's problem; finish() still mends
            log.exception("failover schedule")
            self.cut_error = self.cut_error or f"{type(error).__name__}: {error}"

    def _wait_until(self, at_s: float) -> bool:
        """Wait until ``at_s`` on the run's clock; False when the flows ended first."""
        while not self._done.is_set():
            if self.clock.started and self.clock.now() >= at_s:
                return True
            self._done.wait(TICK_S)
        return False

    def _nic_counters(self) -> dict[str, int]:
        if self.placement != NIC:
            return {}
        return self.testbed.nic_tx_packets(self.flows[0][0])

    def _choose(self) -> Cut:
        """What the placement breaks; a snapshot whose counters could not be read (a loaded
        machine) is taken again once, at the moment of the cut."""
        try:
            return self._choose_from(self.probe)
        except CountersUnavailable:
            self.probe = self.testbed.status()
            self.nics_probe = self._nic_counters()
            return self._choose_from(self.probe)

    def _choose_from(self, probe: dict[str, Any] | None) -> Cut:
        assert probe is not None
        topology = self.testbed.topology
        sources = [source for source, _ in self.flows]
        destinations = [destination for _, destination in self.flows]
        if self.placement == LOCAL:
            return local_uplink(topology, sources, self.before, probe)
        if self.placement == REMOTE:
            return remote_downlink(topology, destinations, self.before, probe)
        if self.placement == SWITCH:
            return busiest_spine(topology, destinations, self.before, probe)
        return busiest_nic(topology, sources[0], self.nics_before, self.nics_probe)

    def _break(self, cut: Cut) -> None:
        """Break what was chosen; the cut's time is when breaking began (a switch's
        process dies first, its links go dark in the next tens of milliseconds)."""
        self._broken = True
        self.cut_s = self.clock.now()
        if cut.switch is not None:
            self.links = self.testbed.power_off(cut.switch, dark=self.params.switch_dark)
        else:
            self.links = [self.testbed.fail(cut.a, cut.b)]

    def _mend(self) -> None:
        self._broken = False
        self.restore_s = self.clock.now() if self.clock.started else None
        if self.cut is not None and self.cut.switch is not None:
            self.switch_back_s = self.testbed.power_on(self.cut.switch, self.links)
            return
        for link in self.links:
            self.testbed.restore(str(link.a), str(link.b))


def run_mode(testbed: Testbed, params: Params, mode: str, seed: int) -> tuple[dict, dict]:
    """Every flow in ``mode`` at once, the fabric broken and mended on their clock; the
    run's record for summary.json and its time series (per flow, and all flows together)."""
    del seed  # each run draws fresh EVs (the agent's own randomness); the seed labels it
    transport, routing, placement = split_mode(mode)
    flows = params.flow_pairs()
    problems = _wait_fabric_whole(testbed)
    clock = RunClock()
    samples: list[list[dict[str, Any]]] = [[] for _ in flows]

    def progress(index: int) -> Any:
        def on_sample(sample: dict[str, Any]) -> None:
            clock.observe(index, sample)
            samples[index].append(sample)

        return on_sample

    specs = [
        TransferSpec(
            source,
            destination,
            duration_s=params.duration_s,
            evs=params.mrc_evs if transport == MRC else None,
            message_size=params.message_size,
            interval_s=params.bin_s,
            transport=transport,
            roce_timeout=params.roce_timeout,
            roce_retry_cnt=params.roce_retry_cnt,
        )
        for source, destination in flows
    ]
    schedule = _Schedule(testbed, params, placement, flows, clock)
    schedule.start()
    launched = time.monotonic()
    try:
        results = testbed.transfer_all(specs, [progress(i) for i in range(len(flows))])
    finally:
        schedule.finish()
    transfers: dict[str, dict[str, Any]] = {}
    series: dict[str, list[dict[str, float]]] = {}
    for index, ((source, destination), result) in enumerate(zip(flows, results, strict=True)):
        name = f"{source}->{destination}"
        points = flow_series(samples[index], clock.offset(index))
        metrics = _flow_metrics(result, samples[index], clock, schedule.cut_s, launched)
        metrics["longest_stall_s"] = longest_stall(points, metrics.get("failed_at_s"))
        transfers[name], series[name] = metrics, points
    total = aggregate(list(series.values()), params.bin_s)
    if len(flows) > 1:
        series[ALL_FLOWS] = total
    cut = schedule.cut
    uncut = uncut_reason(schedule.cut_error, transfers)
    if cut is None and uncut is None:
        problems.append(f"nothing was cut: {schedule.cut_error}")
    problems += schedule.problems
    lost = [t["bytes_lost"] for t in transfers.values()]
    record: dict[str, Any] = {
        "transport": transport,
        "routing": routing,
        "placement": placement,
        "evs": {MRC: params.mrc_evs, SINGLE: 1}.get(transport),
        "flows": list(transfers),
        "transfers": transfers,
        "cut": None if cut is None else cut.name,
        "cut_link": None if cut is None or cut.switch is not None else cut.name,
        "cut_switch": None if cut is None else cut.switch,
        "cut_links": [str(link) for link in schedule.links],
        "switch_dark": params.switch_dark if placement == SWITCH else None,
        "cut_probe_packets": None if cut is None else cut.packets,
        # member counters (bmv2), the switches' port tx counters (linux) or the source
        # host's NIC counters (nic): see counters.py and placements.py
        "cut_counters": None if cut is None else cut.counters,
        "cut_s": schedule.cut_s,
        "cut_error": schedule.cut_error,
        # why nothing was cut when that is a result, not a fault (see uncut_reason)
        "uncut": uncut if cut is None else None,
        "restore_s": schedule.restore_s,
        # placement switch on bmv2: from power on until the controller had reprogrammed it
        "switch_back_s": schedule.switch_back_s,
        "recovery_s": None
        if schedule.cut_s is None
        else recovery_time(total, schedule.cut_s, BASELINE_FROM_S),
        "longest_stall_s": max((t["longest_stall_s"] for t in transfers.values()), default=None),
        "bytes_lost": None if any(value is None for value in lost) else sum(lost),
        "completed": all(t["completed"] for t in transfers.values()),
        "failed": [
            {
                "flow": name,
                "error": t["error"],
                "failed_at_s": t.get("failed_at_s"),
                "after_cut_s": t.get("failed_after_cut_s"),
            }
            for name, t in transfers.items()
            if not t["completed"]
        ],
        # What makes this run not the experiment it claims to be (results.summary_problems).
        "problems": problems,
    }
    return record, series


def uncut_reason(cut_error: str | None, transfers: Mapping[str, Mapping[str, Any]]) -> str | None:
    """Why a run with nothing cut is still a measurement: every transfer failed before the
    cut came (a RoCE QP out of retries on a loaded fabric), so the schedule had nothing left
    to break. None otherwise: a run whose flows lived to the cut and were not cut, or whose
    cut could not be chosen (``cut_error``), is not the experiment it claims to be."""
    if cut_error is not None or not transfers:
        return None
    if any(transfer["completed"] for transfer in transfers.values()):
        return None
    return "every transfer had failed before the cut"


def _flow_metrics(
    result: dict[str, Any] | TransferFailed,
    samples: list[dict[str, Any]],
    clock: RunClock,
    cut_s: float | None,
    launched: float,
) -> dict[str, Any]:
    """One flow's figures; a failed flow's with its error, when it failed (on the run's
    clock, and after the cut) and the bytes confirmed before."""
    if not isinstance(result, TransferFailed):
        return transfer_metrics(result)
    metrics = failed_transfer_metrics(str(result))
    failed_at = clock.failed_at(result.at, launched)
    metrics.update(
        error_code=result.code,
        failed_at_s=failed_at,
        failed_after_cut_s=None if cut_s is None else failed_at - cut_s,
        bytes_confirmed=int(samples[-1]["total_bytes"]) if samples else 0,
    )
    return metrics


def _wait_fabric_whole(testbed: Testbed) -> list[str]:
    """Wait until the controller sees no link down (a run starts on a whole fabric); the
    problem if it does not within the settle time."""
    deadline = time.monotonic() + RESTORE_SETTLE_TIMEOUT_S
    while True:
        down = testbed.status().get("down_links", [])
        if not down:
            return []
        if time.monotonic() > deadline:
            return [f"links down before the run started: {down}"]
        time.sleep(0.2)


def summarize(runs: dict[str, dict[str, dict]], facts: TargetFacts) -> dict[str, Any]:
    """Per mode: bytes lost, completed, failures with their time, recovery time and longest
    stall per seed with mean and spread, goodput likewise, and what limited the runs; each
    seed's modes side by side."""
    del facts  # a cut and a recovery are measured alike on every target
    figures: dict[str, Any] = {}
    for mode, seeds in runs.items():
        transport, routing, placement = split_mode(mode)
        transfers = [t for run in seeds.values() for t in run["transfers"].values()]
        recoveries = [run.get("recovery_s") for run in seeds.values()]
        stalls = [run.get("longest_stall_s") for run in seeds.values()]
        failures = [
            {"seed": seed, **failure}
            for seed, run in seeds.items()
            for failure in run.get("failed", [])
        ]
        figures[mode] = {
            "transport": transport,
            "routing": routing,
            "placement": placement,
            "bytes_lost": sum(t["bytes_lost"] or 0 for t in transfers),
            "bytes_lost_unknown": sum(1 for t in transfers if t["bytes_lost"] is None),
            "completed": all(t["completed"] for t in transfers),
            "failures": failures,
            **spread("failed_after_cut_s", [f["after_cut_s"] for f in failures]),
            "recovery_s": recoveries,
            **spread("recovery_s", recoveries),
            "longest_stall_s": stalls,
            **spread("longest_stall_s", stalls),
            **spread("goodput_bps", [_run_goodput(run) for run in seeds.values()]),
            "bottleneck": overall_bottleneck(run["bottleneck"] for run in seeds.values()),
        }
    figures["pairs"] = seed_pairs(
        runs,
        {
            "recovery_s": lambda run: run.get("recovery_s"),
            "longest_stall_s": lambda run: run.get("longest_stall_s"),
            "goodput_bps": _run_goodput,
        },
    )
    return figures


def _run_goodput(run: Mapping[str, Any]) -> float:
    return float(sum(t["goodput_bps"] for t in run["transfers"].values()))


def draw(directory: Path, runs: dict, series: dict, params: Params) -> list[str]:
    """Goodput over time of seed 0, one figure per routing policy and placement (every
    transport in it), the cut, the restore and each failure marked."""
    groups: dict[tuple[str, str], list[str]] = {}
    for mode in runs:
        _, routing, placement = split_mode(mode)
        groups.setdefault((routing, placement), []).append(mode)
    names = []
    for (routing, placement), modes in groups.items():
        name = (
            "goodput.png"
            if len(groups) == 1
            else f"goodput-{routing.replace(':', '')}-{placement}.png"
        )
        lines: dict[str, list[dict[str, float]]] = {}
        markers: dict[str, float] = {}
        for mode in modes:
            run, points = runs[mode]["0"], series[mode]["0"]
            transport = split_mode(mode)[0]
            evs = run.get("evs")
            label = f"{transport} ({evs} EV{'' if evs == 1 else 's'})" if evs else transport
            lines[label] = points.get(ALL_FLOWS) or next(iter(points.values()), [])
            for failure in run.get("failed", []):
                if failure.get("failed_at_s") is not None:
                    markers[f"{transport} failed"] = failure["failed_at_s"]
        first = runs[modes[0]]["0"]
        if first.get("cut_s") is not None:
            markers["cut"] = first["cut_s"]
        if first.get("restore_s") is not None:
            markers["restore"] = first["restore_s"]
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


def text(figures: dict[str, Any]) -> list[str]:
    """summary.txt lines: per mode its recovery, stall, goodput, losses and failures as
    "mean (min-max) over N seeds", then each seed's modes in the order they ran."""
    lines = []
    pairs = figures["pairs"]
    seeds = len(pairs)
    for mode, f in figures.items():
        if mode == "pairs":
            continue
        lost = f"{f['bytes_lost']}" + (
            f" (+ {f['bytes_lost_unknown']} failed transfer(s) not counted)"
            if f["bytes_lost_unknown"]
            else ""
        )
        lines.append(
            f"{mode}: back to 90 % after the cut: "
            f"{describe(f, 'recovery_s', two_places, seeds, 's')}; longest stall "
            f"{describe(f, 'longest_stall_s', two_places, seeds, 's')}; goodput "
            f"{describe(f, 'goodput_bps', mbit, seeds, 'Mbit/s')}; bytes lost {lost}, "
            f"completed {'yes' if f['completed'] else 'NO'}"
        )
        if f["failures"]:
            lines.append(
                f"{mode}: failed in {len(f['failures'])} transfer(s), "
                f"{describe(f, 'failed_after_cut_s', two_places, len(f['failures']), 's')} "
                f"after the cut: {f['failures'][0]['error']}"
            )
    for pair in pairs:
        recovered = ", ".join(
            f"{mode} {'never' if r is None else f'{two_places(r)} s'}"
            for mode, r in pair["recovery_s"].items()
        )
        lines.append(f"seed {pair['seed']} ({' then '.join(pair['order'])}): {recovered}")
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


@dataclass(frozen=True)
class RebootParams(Params):
    """``reboot``: ``failover`` with a spine losing power under four long flows, both ways
    between the leaves (the papers' T1 reboot)."""

    flows: str = "h1:h3,h2:h4,h3:h1,h4:h2"
    placements: str = SWITCH


REBOOT = Experiment(
    name="reboot",
    default_topology=DEFAULT_TOPOLOGY,
    params_type=RebootParams,
    variant=variant,
    run_mode=run_mode,
    summarize=summarize,
    draw=draw,
    text=text,
    check_topology=check_topology,
    modes_for=modes_of,
    may_fail=may_fail,
)
