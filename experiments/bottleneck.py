"""What limited a run: its CPUs, its fabric links, or neither.

A comparison of goodputs (MRC against one path) measures the fabric only while the fabric's
links are what holds the flows back. On this project's 2-core machine BMv2, the kernel's
forwarding and sixteen agents can just as well run out of CPU first; the ratio then measures
which mode costs the machine less per byte, not how well it uses the links. So every run
records each core's busy share over its window (:mod:`experiments.cpu`) and each fabric link
direction's utilisation, and gets a verdict:

* ``CPU-bound``: some core was busier than ``CPU_BOUND_SHARE`` averaged over the run's window
  (a single-threaded switch or agent pins one core while the average of two looks half idle);
  whatever the links did, the run's figures are not a link measure.
* ``link-bound``: no core was saturated and some fabric link direction carried at least
  ``LINK_BOUND_UTILISATION`` of its configured rate.
* ``neither saturated``: neither was; the flows were held back by something else (their
  windows, start-up, a cut).

A link's utilisation is what its sending switch forwarded onto it over the window against
what its configured rate lets through in that time. Where the topology sets ``queue_rate_pps``
that rate is counted in full MRC data frames (``hostenv.tbf.FRAME_BYTES``
bytes each) and the load in bytes, on both targets: the kernel's ``tbf`` shapes exactly that
many bytes per second, ACKs and SACKs included; BMv2's rate counts data packets of its normal
queue, while control packets (ACKs, SACKs, trimmed headers) take the high-priority queue,
which the experiments leave unlimited, so counting bytes lets the small control packets weigh
what they take (little) instead of one full packet each. Where no rate is set,
``bandwidth_mbps`` is the limit, which the testbed does not enforce (veths are not shaped), so
that utilisation is nominal. Member counters (BMv2) count at ingress, including what a full
queue then drops, so there a utilisation above 1 is load offered beyond the link's rate.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from experiments.counters import HopLoad
from experiments.cpu_load import CpuLoad
from experiments.json_form import key
from hostenv.tbf import FRAME_BYTES
from topologies.model import Link, Topology

#: A core busier than this, averaged over a run's window, makes the run CPU-bound.
CPU_BOUND_SHARE = 0.8
#: A fabric link direction carrying at least this share of its rate makes a run link-bound.
LINK_BOUND_UTILISATION = 0.8
CPU_BOUND = "CPU-bound"
LINK_BOUND = "link-bound"
NEITHER = "neither saturated"
RULE = (
    f"{CPU_BOUND} when any core was more than {CPU_BOUND_SHARE * 100:.0f} % busy averaged over "
    f"a run's window; else {LINK_BOUND} when a fabric link direction carried at least "
    f"{LINK_BOUND_UTILISATION * 100:.0f} % of its configured rate; else {NEITHER}"
)
#: Other processes' load worth naming beside a CPU-bound verdict, in cores: the machine is
#: shared, and a verdict caused by someone else's job says nothing of the experiment's cost.
NOTABLE_OTHER_CORES = 0.25


@dataclass(frozen=True)
class LinkUtilisation:
    """One fabric link direction over a run's window: what its sending switch forwarded
    onto it (packets, bytes: None where not counted) by which counters, its configured limit
    in words, and the share of it used (None where bytes were not counted)."""

    link: str
    counters: str
    packets: int
    byte_count: int | None = field(metadata=key("bytes"))
    limit: str
    utilisation: float | None


@dataclass(frozen=True)
class RunBottleneck:
    """One run's verdict with the figures that decided it."""

    verdict: str
    busiest_core: float | None
    busiest_link: str | None
    busiest_link_utilisation: float | None
    links_unread: int
    #: The machine's load that was not this run's: a CPU-bound verdict may be theirs.
    other_processes_cores: float | None
    busiest_other_process: str | None


@dataclass(frozen=True)
class OverallBottleneck:
    """The verdict over several runs, with the counts and extremes behind it and the rule."""

    verdict: str
    runs: int
    cpu_bound_runs: int
    link_bound_runs: int
    busiest_core_max: float | None
    busiest_link_utilisation_max: float | None
    other_processes_cores_max: float | None
    busiest_other_process: str | None
    rule: str = RULE


def link_utilisation(
    topology: Topology, loads: Mapping[str, HopLoad | None], window_s: float
) -> dict[str, LinkUtilisation | None]:
    """Each fabric link direction's load over ``window_s`` against its configured rate
    (see the module's docstring); None for a direction whose counters were not read."""
    links = {str(link.id): link for link in topology.links}
    result: dict[str, LinkUtilisation | None] = {}
    for hop, load in loads.items():
        if load is None:
            result[hop] = None
            continue
        limit, share = _share(links[load.link], load, window_s)
        result[hop] = LinkUtilisation(
            link=load.link,
            counters=load.source,
            packets=load.packets,
            byte_count=load.byte_count,
            limit=limit,
            utilisation=share,
        )
    return result


def _share(link: Link, load: HopLoad, window_s: float) -> tuple[str, float | None]:
    """The link's limit in words and the share of it ``load`` used (None where bytes were not
    counted, or the window is empty)."""
    rate_pps = link.params.queue_rate_pps
    if rate_pps > 0:
        capacity = rate_pps * FRAME_BYTES * window_s
        limit = f"{rate_pps} packets/s of {FRAME_BYTES} bytes"
    else:
        capacity = link.params.bandwidth_mbps * 1e6 / 8 * window_s
        limit = f"{link.params.bandwidth_mbps:g} Mbit/s nominal (not shaped)"
    if load.byte_count is None or capacity <= 0:
        return limit, None
    return limit, load.byte_count / capacity


def run_bottleneck(cpu: CpuLoad, links: Mapping[str, LinkUtilisation | None]) -> RunBottleneck:
    """One run's verdict from its CPU load and its link utilisation (:func:`link_utilisation`),
    with the figures that decided it."""
    busiest_core = cpu.busiest_core
    shares = {
        hop: entry.utilisation
        for hop, entry in links.items()
        if entry is not None and entry.utilisation is not None
    }
    busiest_link = max(shares, key=lambda hop: shares[hop]) if shares else None
    link_share = shares[busiest_link] if busiest_link is not None else None
    if busiest_core is not None and busiest_core > CPU_BOUND_SHARE:
        verdict = CPU_BOUND
    elif link_share is not None and link_share >= LINK_BOUND_UTILISATION:
        verdict = LINK_BOUND
    else:
        verdict = NEITHER
    processes = cpu.processes
    return RunBottleneck(
        verdict=verdict,
        busiest_core=busiest_core,
        busiest_link=busiest_link,
        busiest_link_utilisation=link_share,
        links_unread=sum(1 for entry in links.values() if entry is None),
        other_processes_cores=None if processes is None else processes.others_cores,
        busiest_other_process=None
        if processes is None or not processes.top_others
        else processes.top_others[0].command,
    )


def overall_bottleneck(verdicts: Iterable[RunBottleneck]) -> OverallBottleneck:
    """The verdict over several runs (those a figure is computed from): ``CPU-bound`` when any
    of them was (its figure is then not a link measure), ``link-bound`` when every one was,
    else ``neither saturated``; with the counts and extremes behind it and the rule."""
    runs = list(verdicts)
    cpu_bound = sum(1 for run in runs if run.verdict == CPU_BOUND)
    link_bound = sum(1 for run in runs if run.verdict == LINK_BOUND)
    if cpu_bound:
        verdict = CPU_BOUND
    elif runs and link_bound == len(runs):
        verdict = LINK_BOUND
    else:
        verdict = NEITHER
    cores = [run.busiest_core for run in runs if run.busiest_core is not None]
    links = [
        run.busiest_link_utilisation for run in runs if run.busiest_link_utilisation is not None
    ]
    others = [run for run in runs if run.other_processes_cores is not None]
    busiest_others = max(others, key=lambda run: run.other_processes_cores or 0.0, default=None)
    return OverallBottleneck(
        verdict=verdict,
        runs=len(runs),
        cpu_bound_runs=cpu_bound,
        link_bound_runs=link_bound,
        busiest_core_max=max(cores) if cores else None,
        busiest_link_utilisation_max=max(links) if links else None,
        other_processes_cores_max=None
        if busiest_others is None
        else busiest_others.other_processes_cores,
        busiest_other_process=None
        if busiest_others is None
        else busiest_others.busiest_other_process,
    )


def phrase(bottleneck: OverallBottleneck) -> str:
    """An overall verdict in words, for summary.txt beside the figure it qualifies."""
    core = _percent(bottleneck.busiest_core_max)
    link = _percent(bottleneck.busiest_link_utilisation_max)
    runs = bottleneck.runs
    if bottleneck.verdict == CPU_BOUND:
        others = bottleneck.other_processes_cores_max
        by_others = (
            f"; other processes on the machine took up to {others:.2f} cores, most "
            f"{bottleneck.busiest_other_process!r}"
            if others is not None and others >= NOTABLE_OTHER_CORES
            else ""
        )
        return (
            f"{CPU_BOUND}: {bottleneck.cpu_bound_runs} of {runs} run(s) had a core above "
            f"{_percent(CPU_BOUND_SHARE)} busy (busiest {core}; busiest link {link} of its "
            f"rate{by_others}), not a link measure"
        )
    if bottleneck.verdict == LINK_BOUND:
        return f"{LINK_BOUND}: busiest link {link} of its rate, busiest core {core}"
    return f"{NEITHER}: busiest core {core}, busiest link {link} of its rate"


def _percent(share: float | None) -> str:
    return "unread" if share is None else f"{share * 100:.0f} %"
