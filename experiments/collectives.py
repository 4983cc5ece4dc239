"""``collective``: a training job's collective through failures, a second job and loss.

A job of one rank per host (``hosts``; default every host of ``leaf-spine-4x4``, 16 ranks)
runs ``iterations`` of a collective (``collective``, default ring all-reduce) of ``size``
bytes, each rank on its host's agent through the host API (``collective.job``). The ring is
ordered across leaves (h1, h5, h9, h13, h2, ...) so that every step of every rank crosses
the spines, and the fabric's links are slowed to ``fabric_rate_pps`` so that links, not the
two CPUs, are the bottleneck (each run records the CPU load and link utilisation).

Modes are ``TRANSPORT-SCENARIO`` for every transport (``transports``) and scenario
(``scenarios``):

* ``clean``: the job alone;
* ``cut-static``: once ``event_after`` iterations are done and half an iteration more has
  passed, a spine's downlink into a leaf (``cut``, ``s1:l2``) is cut, under ``static``
  routing: the other leaves keep hashing onto that spine, which drops what it cannot
  deliver; restored after the job;
* ``cut-converge``: the same cut under ``converge:converge_s`` (the fabric reroutes after
  that long, as a routing protocol's reconvergence would);
* ``second-job``: at the same moment a second job (``second_iterations`` iterations of the
  same collective) starts on the same hosts, ring ordered across the leaves another way
  (h1, h9, h5, h13, ...), so the two share the spines;
* ``loss``: every fabric link drops ``loss_percent`` of UDP 4791 frames for the whole job
  (``testbed.mininet.link_loss``, never LLDP).

Per run the job's report (``collective.report``: per-iteration time, algbw and busbw, job
completion time, network-wait share, a failure's time and reason) and what the bottleneck
links allow: per ring flow, the fabric link rate in payload bytes (``payload_bytes`` a full
frame carries) times the fabric links a flow has to itself (spines over the flows leaving
a leaf), so headers, SACKs and probes are the transport's cost. MRC and MRC on one EV must
complete with verified results; a job that fails is an error of the experiment. A RoCE job
(RC QPs, one path each) that fails, as under the static cut once its path is dead, is a
result (``may_fail``), recorded with when and why.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # after use(): the backend must be chosen first

from collective.job import JobError, JobHooks, JobSpec
from collective.plans import ELEMENT_BYTES, make_plan, parse_collective, round_size
from collective.report import JobResult, summarize
from experiments import plots
from experiments.bottleneck import overall_bottleneck
from experiments.capabilities import TargetFacts
from experiments.experiment import Experiment
from experiments.stats import describe, seed_pairs, spread, two_places
from experiments.topology_variant import Variant
from experiments.transports import MAY_FAIL, parse_choices, parse_routing, parse_transports
from testbed.session import Testbed
from topologies.model import Role, Topology

NAME = "collective"
DEFAULT_TOPOLOGY = "leaf-spine-4x4"
SCENARIOS = ("clean", "cut-static", "cut-converge", "second-job", "loss")
#: An iteration is back to normal when its time is within this factor of the median
#: iteration time before the event.
NORMAL_FACTOR = 1.25


@dataclass(frozen=True)
class Params:
    """The experiment's knobs (``--set name=value``)."""

    collective: str = "allreduce"
    #: Bytes of the buffer (rounded down to 4 x ranks).
    size: int = 256 << 10
    iterations: int = 10
    transports: str = "mrc,single"
    scenarios: str = ",".join(SCENARIOS)
    #: Ranks' hosts in ring order ("": every host, ring ordered across the leaves).
    hosts: str = ""
    compute_s: float = 0.0
    #: Packets/s of every switch-to-switch link (docs/experiments.md says how it was chosen).
    fabric_rate_pps: int = 200
    fabric_queue_depth: int = 32
    trim_threshold: int = 24
    ecn_min: int = 8
    ecn_max: int = 20
    #: LLDP every 200 ms: a probe behind a full queue (32 packets at 200/s: 160 ms) is still
    #: in time for the controller's three-missed rule.
    lldp_interval_ms: int = 200
    #: The event comes this many iterations into the job, plus half an iteration.
    event_after: int = 3
    #: The link cut, ``SPINE:LEAF`` (a spine's downlink into the leaf).
    cut: str = "s1:l2"
    converge_s: float = 3.0
    loss_percent: float = 1.0
    second_iterations: int = 3
    segment_bytes: int = 64 << 10
    stall_timeout_s: float = 20.0
    #: Payload bytes of a full data packet (the agents' ``--payload``).
    payload_bytes: int = 1024

    def check(self) -> None:
        """ValueError for settings that cannot work."""
        parse_collective(self.collective)
        modes_of(self)
        if self.iterations < 1 or not 0 <= self.event_after < self.iterations:
            raise ValueError("need iterations >= 1 and 0 <= event_after < iterations")
        if self.fabric_rate_pps < 1 or self.size < 1 or self.segment_bytes < 1:
            raise ValueError("fabric_rate_pps, size and segment_bytes must be positive")
        if not 0 <= self.loss_percent <= 50 or self.converge_s < 0:
            raise ValueError("loss_percent must be in 0..50, converge_s >= 0")
        if not self.ecn_min <= self.ecn_max < self.fabric_queue_depth:
            raise ValueError("need ecn_min <= ecn_max < fabric_queue_depth")
        if not self.trim_threshold < self.fabric_queue_depth:
            raise ValueError("trim_threshold must be below fabric_queue_depth")
        cut_ends(self)

    def job_spec(self, transport: str, ranks: int, iterations: int | None = None) -> JobSpec:
        """The job of a run."""
        return JobSpec(
            parse_collective(self.collective),
            round_size(self.size, ranks),
            iterations=iterations or self.iterations,
            transport=transport,
            compute_s=self.compute_s,
            segment_bytes=self.segment_bytes,
            stall_timeout_s=self.stall_timeout_s,
        )


def cut_ends(params: Params) -> tuple[str, str]:
    """``s1:l2`` -> ("s1", "l2")."""
    spine, _, leaf = params.cut.partition(":")
    if not spine or not leaf:
        raise ValueError(f"cut {params.cut!r}: expected SPINE:LEAF (s1:l2)")
    return spine, leaf


def modes_of(params: Params) -> tuple[str, ...]:
    """``TRANSPORT-SCENARIO``, scenario by scenario (the transports side by side)."""
    transports = parse_transports(params.transports)
    scenarios = parse_choices(params.scenarios, SCENARIOS, "scenario")
    return tuple(f"{t}-{s}" for s in scenarios for t in transports)


def split_mode(mode: str) -> tuple[str, str]:
    """A mode's (transport, scenario)."""
    transport, _, scenario = mode.partition("-")
    return transport, scenario


def may_fail(mode: str) -> bool:
    return split_mode(mode)[0] in MAY_FAIL


def ring_across_leaves(topology: Topology, leaf_order: tuple[int, ...] | None = None) -> list[str]:
    """Every host, taking one from each leaf in turn (leaves in ``leaf_order`` of their
    sorted list), so that consecutive ranks sit on different leaves."""
    by_leaf: dict[str, list[str]] = {}
    for host in topology.hosts:
        by_leaf.setdefault(host.nics[0].switch, []).append(host.name)
    leaves = sorted(by_leaf, key=_natural)
    if leaf_order is not None:
        leaves = [leaves[i] for i in leaf_order if i < len(leaves)]
    for leaf in leaves:
        by_leaf[leaf].sort(key=_natural)
    ring: list[str] = []
    for index in range(max(len(hosts) for hosts in by_leaf.values())):
        ring.extend(by_leaf[leaf][index] for leaf in leaves if index < len(by_leaf[leaf]))
    return ring


def _natural(name: str) -> tuple[str, int]:
    digits = name.lstrip("abcdefghijklmnopqrstuvwxyz")
    return (name[: len(name) - len(digits)], int(digits) if digits.isdigit() else 0)


def second_ring(topology: Topology) -> list[str]:
    """The second job's ring: leaves taken every other one (l1, l3, l2, l4, ...)."""
    count = len({host.nics[0].switch for host in topology.hosts})
    order = tuple(range(0, count, 2)) + tuple(range(1, count, 2))
    return ring_across_leaves(topology, order)


def job_hosts(topology: Topology, params: Params) -> list[str]:
    """The ranks' hosts, in ring order."""
    if params.hosts:
        return [h.strip() for h in params.hosts.split(",") if h.strip()]
    return ring_across_leaves(topology)


def check_topology(topology: Topology, params: Params) -> None:
    """The hosts exist, the cut link exists and joins a spine to a leaf."""
    hosts = job_hosts(topology, params)
    names = {host.name for host in topology.hosts}
    unknown = [h for h in hosts if h not in names]
    if unknown or len(hosts) < 2 or len(set(hosts)) != len(hosts):
        raise ValueError(f"hosts {hosts}: need two or more distinct hosts of {sorted(names)}")
    spine, leaf = cut_ends(params)
    ends = {frozenset((str(link.a.node), str(link.b.node))) for link in topology.links}
    if frozenset((spine, leaf)) not in ends:
        raise ValueError(f"cut {params.cut}: no link joins {spine} and {leaf} in {topology.name}")


def allowed_busbw(topology: Topology, hosts: list[str], params: Params) -> float:
    """Bus bandwidth (payload bytes/s) the bottleneck links allow a ring over ``hosts``: a
    flow leaving a leaf shares that leaf's uplinks (one per spine) with the other flows
    leaving it, and entering one, the downlinks; each link carries ``fabric_rate_pps`` full
    packets of ``payload_bytes``."""
    spines = sum(1 for switch in topology.switches if switch.role is not Role.LEAF)
    leaf = {host: topology.host(host).nics[0].switch for host in hosts}
    ring = len(hosts)
    out: dict[str, int] = {}
    into: dict[str, int] = {}
    for rank, host in enumerate(hosts):
        right = hosts[(rank + 1) % ring]
        if leaf[host] != leaf[right]:
            out[leaf[host]] = out.get(leaf[host], 0) + 1
            into[leaf[right]] = into.get(leaf[right], 0) + 1
    crowd = max([*out.values(), *into.values(), 1])
    return params.fabric_rate_pps * params.payload_bytes * min(1.0, spines / crowd)


def variant(params: Params, mode: str) -> Variant:
    """Slowed fabric links; ``static`` routing but for the converge scenario."""
    scenario = split_mode(mode)[1]
    routing = f"converge:{params.converge_s:g}" if scenario == "cut-converge" else "static"
    return Variant(
        fabric_rate_pps=params.fabric_rate_pps,
        fabric_queue_depth=params.fabric_queue_depth,
        trim_threshold=params.trim_threshold,
        ecn_thresholds=(params.ecn_min, params.ecn_max),
        lldp_interval_ms=params.lldp_interval_ms,
        routing=parse_routing(routing),
    )


class _Event:
    """The scenario's event, started from the job's iteration hook at its moment."""

    def __init__(self, testbed: Testbed, params: Params, transport: str, scenario: str) -> None:
        self.testbed = testbed
        self.params = params
        self.transport = transport
        self.scenario = scenario
        self.started = 0.0
        self.times: list[float] = []
        self.at_s: float | None = None
        self.what: str | None = None
        self.cut_link: Any = None
        self.second: JobResult | None = None
        self.second_error: str | None = None
        self._timer: threading.Timer | None = None
        self._second_thread: threading.Thread | None = None

    def on_start(self, started: float) -> None:
        self.started = started
        if self.params.event_after == 0:
            self._fire()

    def on_iteration(self, record: dict[str, Any]) -> None:
        self.times.append(record["time_s"])
        if self.scenario not in ("cut-static", "cut-converge", "second-job"):
            return
        if len(self.times) == self.params.event_after and self._timer is None:
            delay = statistics.median(self.times) / 2 if self.times else 0.0
            self._timer = threading.Timer(delay, self._fire)
            self._timer.start()

    def _fire(self) -> None:
        if self.scenario not in ("cut-static", "cut-converge", "second-job"):
            return
        self.at_s = time.monotonic() - self.started
        if self.scenario == "second-job":
            self.what = "second job started"
            self._second_thread = threading.Thread(target=self._second_job, daemon=True)
            self._second_thread.start()
            return
        spine, leaf = cut_ends(self.params)
        self.cut_link = self.testbed.fail(spine, leaf)
        self.what = f"{self.cut_link} cut"

    def _second_job(self) -> None:
        hosts = second_ring(self.testbed.topology)
        spec = self.params.job_spec(self.transport, len(hosts), self.params.second_iterations)
        try:
            self.second = self.testbed.collective(hosts, spec)
        except JobError as error:
            self.second_error = str(error)

    def finish(self) -> None:
        """Wait for what the event started; bring a cut link back and wait until the
        controller sees it up and the routing has had time to converge again."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer.join()
        if self._second_thread is not None:
            self._second_thread.join()
        if self.cut_link is not None:
            link = self.testbed.restore(str(self.cut_link.a), str(self.cut_link.b))
            if self.testbed.controller_tracks(link):
                self.testbed.wait_link_state(link, down=False, timeout=15.0)
            time.sleep(self.params.converge_s + 1.0)


def run_mode(testbed: Testbed, params: Params, mode: str, seed: int) -> tuple[dict, dict]:
    """One job in the mode's transport and scenario."""
    del seed  # each run draws fresh EVs, PSNs and drops; the seed labels it
    transport, scenario = split_mode(mode)
    hosts = job_hosts(testbed.topology, params)
    spec = params.job_spec(transport, len(hosts))
    event = _Event(testbed, params, transport, scenario)
    hooks = JobHooks(on_start=event.on_start, on_iteration=event.on_iteration)
    if scenario == "loss":
        testbed.set_fabric_loss(params.loss_percent / 100)
    loss: dict[str, Any] | None = None
    try:
        result = testbed.collective(hosts, spec, hooks)
    finally:
        if scenario == "loss":
            directions, lldp = testbed.fabric_loss_counters()
            testbed.clear_fabric_loss()
            seen = sum(c.matched for c in directions.values())
            dropped = sum(c.dropped for c in directions.values())
            loss = {
                "frames_seen": seen,
                "frames_dropped": dropped,
                "measured_percent": 100 * dropped / seen if seen else None,
                "lldp_frames_passed": lldp,
            }
        event.finish()
    job = summarize(result)
    allowed = allowed_busbw(testbed.topology, hosts, params)
    problems = []
    if scenario == "loss" and (loss is None or not loss["frames_seen"]):
        problems.append("the loss rules saw no UDP 4791 frame")
    evented = scenario in ("cut-static", "cut-converge", "second-job")
    if evented and event.at_s is None and not job["failed"]:
        problems.append("the job ended before its event")
    record: dict[str, Any] = {
        "transport": transport,
        "scenario": scenario,
        "routing": str(variant(params, mode).routing),
        "hosts": hosts,
        "job": job,
        "event": {"what": event.what, "at_s": event.at_s},
        "allowed_busbw_Bps": allowed,
        "busbw_of_allowed": job["busbw_Bps"] / allowed if job["busbw_Bps"] else None,
        "recovery": recovery(job, event.at_s),
        "second_job": summarize(event.second) if event.second is not None else None,
        "second_job_error": event.second_error,
        "loss": loss,
        "transfers": {"job": _as_transfer(result, job)},
        "problems": problems,
    }
    return record, {"per_iteration": job["per_iteration"], "event_at_s": event.at_s}


def _as_transfer(result: JobResult, job: dict[str, Any]) -> dict[str, Any]:
    """The job in the runner's transfer terms: the payload its ranks sent, whether it
    completed with exact results, bytes wrong (0 when verified; None when it failed)."""
    plans = [
        make_plan(result.collective, rank, result.ranks, result.size)
        for rank in range(result.ranks)
    ]
    sent = sum(plan.bytes_sent for plan in plans) * job["completed_iterations"]
    failed = job["failed"]
    completion = job["job_completion_s"]
    metrics: dict[str, Any] = {
        "bytes_sent": sent,
        "bytes_delivered": sent if job["ok"] else None,
        # bytes of the results that differ from the exact value (unknown for a failed job)
        "bytes_lost": None if failed else result.wrong_elements * ELEMENT_BYTES,
        "completed": bool(job["ok"]),
        "goodput_bps": 8 * sent / completion if completion else 0.0,
        "retransmits": {},
    }
    if failed:
        metrics.update(error=job["failure"]["reason"], failed_at_s=job["failure"]["at_s"])
    elif not job["ok"]:
        metrics["error"] = f"wrong result on ranks {job['wrong_ranks']}"
    return metrics


def recovery(job: dict[str, Any], event_at_s: float | None) -> dict[str, Any]:
    """Around an event: the median iteration time before it (the baseline), the iteration
    it fell in, that iteration's time over the baseline, and how many iterations after it
    came before one was back within NORMAL_FACTOR of the baseline (None: none was)."""
    records = job["per_iteration"]
    if event_at_s is None or not records:
        return {"baseline_s": None, "event_iteration": None, "slowdown": None, "iterations": None}
    before = [r["time_s"] for r in records if r["end_s"] <= event_at_s]
    hit = next((r for r in records if r["end_s"] > event_at_s), None)
    baseline = statistics.median(before) if before else None
    if hit is None or baseline is None:
        return {
            "baseline_s": baseline,
            "event_iteration": None,
            "slowdown": None,
            "iterations": None,
        }
    after = [r for r in records if r["iteration"] > hit["iteration"]]
    back = next(
        (n for n, r in enumerate(after, 1) if r["time_s"] <= NORMAL_FACTOR * baseline), None
    )
    if hit["time_s"] <= NORMAL_FACTOR * baseline:
        back = 0
    return {
        "baseline_s": baseline,
        "event_iteration": hit["iteration"],
        "slowdown": hit["time_s"] / baseline,
        "iterations": back,
    }


def summarize_runs(runs: dict[str, dict[str, dict]], facts: TargetFacts) -> dict[str, Any]:
    """Per mode the job's figures as mean and spread over seeds, failures, recovery; MRC over
    single-path bus bandwidth per scenario."""
    del facts  # cuts, loss and ECMP behave alike on every target
    figures: dict[str, Any] = {}
    for mode, seeds in runs.items():
        jobs = [run["job"] for run in seeds.values()]
        figures[mode] = {
            "transport": split_mode(mode)[0],
            "scenario": split_mode(mode)[1],
            **spread("time_per_iteration_s", [j["time_per_iteration_s"] for j in jobs]),
            **spread("busbw_Bps", [j["busbw_Bps"] for j in jobs]),
            **spread("busbw_of_allowed", [run["busbw_of_allowed"] for run in seeds.values()]),
            **spread("job_completion_s", [j["job_completion_s"] for j in jobs]),
            **spread("network_wait_share", [j["network_wait_share"] for j in jobs]),
            **spread("slowdown", [run["recovery"]["slowdown"] for run in seeds.values()]),
            **spread(
                "recovery_iterations", [run["recovery"]["iterations"] for run in seeds.values()]
            ),
            "failures": [
                {"seed": seed, **run["job"]["failure"]}
                for seed, run in seeds.items()
                if run["job"]["failed"]
            ],
            "verified": all(run["job"]["ok"] for run in seeds.values()),
            "bottleneck": overall_bottleneck(run["bottleneck"] for run in seeds.values()),
        }
    scenarios = {split_mode(mode)[1] for mode in runs}
    ratios = {}
    for scenario in sorted(scenarios):
        mrc, single = runs.get(f"mrc-{scenario}"), runs.get(f"single-{scenario}")
        if mrc is None or single is None:
            continue
        values = []
        for seed, run in mrc.items():
            top, bottom = (
                run["job"]["busbw_Bps"],
                single.get(seed, {}).get("job", {}).get("busbw_Bps"),
            )
            values.append(top / bottom if top and bottom else None)
        ratios[scenario] = spread("busbw_ratio", values)
    figures["mrc_over_single_busbw"] = ratios
    figures["pairs"] = seed_pairs(
        runs, {"job_completion_s": lambda run: run["job"]["job_completion_s"]}
    )
    return figures


def draw(directory: Path, runs: dict, series: dict, params: Params) -> list[str]:
    """iterations.png: seed 0's iteration times per scenario, one line per transport, each
    transport's event marked in its colour; completion.png: job completion time per scenario
    and transport (mean over seeds; a failed job drawn as 0 and named in the summary)."""
    del series
    modes = list(runs)
    scenarios = list(dict.fromkeys(split_mode(m)[1] for m in modes))
    transports = list(dict.fromkeys(split_mode(m)[0] for m in modes))
    figure, axes_list = plt.subplots(
        len(scenarios), 1, figsize=(9, 2.6 * len(scenarios)), squeeze=False
    )
    for axes, scenario in zip(axes_list[:, 0], scenarios, strict=True):
        for transport in transports:
            run = runs.get(f"{transport}-{scenario}", {}).get("0")
            if run is None:
                continue
            records = run["job"]["per_iteration"]
            colour = plots.colour_of(transport)
            axes.plot(
                [r["end_s"] for r in records],
                [r["time_s"] for r in records],
                marker="o",
                markersize=3,
                label=transport,
                color=colour,
            )
            at = run["event"]["at_s"]
            if at is not None:
                axes.axvline(at, color=colour, linestyle="--", linewidth=1)
            if run["job"]["failed"]:
                axes.axvline(run["job"]["failure"]["at_s"], color=colour, linestyle=":")
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
    plots.grouped_bars(
        directory / "completion.png",
        f"{params.collective}: job completion time per scenario (mean over seeds)",
        "job completion (s)",
        scenarios,
        {
            t: [figures.get(f"{t}-{s}", {}).get("job_completion_s_mean") or 0.0 for s in scenarios]
            for t in transports
        },
    )
    return ["iterations.png", "completion.png"]


def _seconds(value: float) -> str:
    return f"{value:.2f}"


def _mbyte(value: float) -> str:
    return f"{value / 1e6:.3f}"


def _percent(value: float) -> str:
    return f"{value * 100:.0f} %"


def text(figures: dict[str, Any]) -> list[str]:
    """summary.txt lines: per mode the job's figures, failures and recovery; the ratios."""
    seeds = len(figures["pairs"]) or 1
    lines = []
    for mode, f in figures.items():
        if mode in ("pairs", "mrc_over_single_busbw"):
            continue
        failed = (
            f"; FAILED {len(f['failures'])}x, first {f['failures'][0]['at_s']:.2f} s in: "
            f"{f['failures'][0]['reason']}"
            if f["failures"]
            else ""
        )
        lines.append(
            f"{mode}: iteration {describe(f, 'time_per_iteration_s', _seconds, seeds, 's')}; "
            f"busbw {describe(f, 'busbw_Bps', _mbyte, seeds, 'MB/s')} = "
            f"{describe(f, 'busbw_of_allowed', _percent, seeds)} of what the links allow; "
            f"job {describe(f, 'job_completion_s', _seconds, seeds, 's')}; waiting on the "
            f"network {describe(f, 'network_wait_share', _percent, seeds)}; "
            f"verified {'yes' if f['verified'] else 'NO'}{failed}"
        )
        if f["slowdown_mean"] is not None:
            lines.append(
                f"  event: the iteration it hit took "
                f"{describe(f, 'slowdown', two_places, seeds)} x the ones before; back to "
                f"normal (<= {NORMAL_FACTOR} x) after "
                f"{describe(f, 'recovery_iterations', two_places, seeds)} more iteration(s)"
            )
    for scenario, ratio in figures["mrc_over_single_busbw"].items():
        lines.append(
            f"MRC / single busbw, {scenario}: {describe(ratio, 'busbw_ratio', two_places, seeds)}"
            " (expected >= 1.3 clean; reported, not asserted)"
        )
    return lines


EXPERIMENT = Experiment(
    name=NAME,
    default_topology=DEFAULT_TOPOLOGY,
    params_type=Params,
    variant=variant,
    run_mode=run_mode,
    summarize=summarize_runs,
    draw=draw,
    text=text,
    check_topology=check_topology,
    modes_for=modes_of,
    may_fail=may_fail,
)
