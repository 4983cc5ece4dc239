"""One failover run: every flow of the mode at once, the fabric broken and mended on their
clock (:mod:`experiments.failover.cuts`); its record and its time series (per flow, and all
flows together)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from experiments.documents import PerfResult, PerfSample
from experiments.failover.cuts import Cuts
from experiments.failover.exposure import FlowExposure, flow_name, run_exposed
from experiments.failover.modes import FailoverMode, Params
from experiments.json_form import FLAT
from experiments.metrics import failed_transfer, recovery_time, transfer_metrics
from experiments.placements import CutChoice, Placement
from experiments.records import CutFailure, Transfer
from experiments.schedule import RESTORE_SETTLE_TIMEOUT_S
from experiments.timeline import RunClock, Series, aggregate, flow_series, longest_stall
from experiments.transports import evs_used, requested_evs, transfer_options
from testbed.agents import TransferFailed, TransferSpec
from testbed.session import Testbed

#: Goodput before this time is the transfers' start-up, not their level.
BASELINE_FROM_S = 1.0
#: The key of the flows' goodput together in a run's time series (several flows only).
ALL_FLOWS = "all flows"


@dataclass(frozen=True)
class FlowFailure:
    """A flow that did not complete: its error, when it failed on the run's clock, and how
    long after the cut (None: before any cut, or not timed)."""

    flow: str
    error: str | None
    failed_at_s: float | None
    after_cut_s: float | None


@dataclass(frozen=True)
class FailoverRun:
    """One run's record: its mode, each flow's transfer, what was cut (a link or a switch
    and its links, how it was chosen, from which counters) and whose traffic it hit, when it
    was cut and mended, the flows' recovery and longest stall, and what makes the run not
    the experiment it claims to be (``problems``, see ``results.summary_problems``)."""

    mode: FailoverMode = field(metadata=FLAT)
    evs: int | None
    flows: tuple[str, ...]
    transfers: Mapping[str, Transfer]
    cut: str | None
    cut_link: str | None
    cut_switch: str | None
    cut_links: tuple[str, ...]
    switch_dark: bool | None
    cut_probe_packets: int | None
    #: Member counters (bmv2), the switches' port tx counters (linux) or the source host's
    #: NIC counters (nic): see counters.py and placements.py.
    cut_counters: str | None
    cut_choice: CutChoice
    #: Per flow, whether the cut hit its traffic (none when nothing was cut): exposure.py.
    exposure: Mapping[str, FlowExposure]
    #: Whether the cut hit the run's traffic (None: unknown, or nothing was cut).
    exposed: bool | None
    cut_s: float | None
    cut_error: str | None
    #: Why nothing was cut when that is a result, not a fault (see uncut_reason).
    uncut: str | None
    restore_s: float | None
    #: Placement switch on bmv2: from power on until the controller had reprogrammed it.
    switch_back_s: float | None
    recovery_s: float | None
    longest_stall_s: float | None
    bytes_lost: int | None
    completed: bool
    failed: tuple[FlowFailure, ...]
    problems: tuple[str, ...]


#: A run's time series: each flow's, and all flows' together (``ALL_FLOWS``).
FailoverSeries = dict[str, Series]


def run_mode(
    testbed: Testbed, params: Params, mode: FailoverMode, seed: int
) -> tuple[FailoverRun, FailoverSeries]:
    """Every flow in ``mode`` at once, the fabric broken and mended on their clock; the
    run's record for summary.json and its time series (per flow, and all flows together)."""
    flows = params.flow_pairs()
    problems = _wait_fabric_whole(testbed)
    clock = RunClock()
    samples: list[list[PerfSample]] = [[] for _ in flows]

    def progress(index: int) -> Callable[[PerfSample], None]:
        def on_sample(sample: PerfSample) -> None:
            clock.observe(index, sample)
            samples[index].append(sample)

        return on_sample

    specs = [
        TransferSpec(
            source,
            destination,
            duration_s=params.duration_s,
            evs=requested_evs(mode.transport, params.mrc_evs),
            message_size=params.message_size,
            interval_s=params.bin_s,
            **transfer_options(mode.transport),
        )
        for source, destination in flows
    ]
    # the seed draws a random cut (each run's EVs are the agent's own randomness)
    cuts = Cuts(testbed, params, mode.placement, flows, clock, seed)
    cuts.start()
    launched = time.monotonic()
    try:
        results = testbed.transfer_all(specs, [progress(i) for i in range(len(flows))])
    finally:
        cuts.finish()
    transfers: dict[str, Transfer] = {}
    series: FailoverSeries = {}
    for index, ((source, destination), result) in enumerate(zip(flows, results, strict=True)):
        name = flow_name((source, destination))
        points = flow_series(samples[index], clock.offset(index))
        transfer = _flow_transfer(result, samples[index], clock, cuts.cut_s, launched)
        transfers[name] = dataclasses.replace(
            transfer, longest_stall_s=longest_stall(points, transfer.failed_at_s)
        )
        series[name] = points
    total = aggregate(list(series.values()), params.bin_s)
    if len(flows) > 1:
        series[ALL_FLOWS] = total
    cut = cuts.cut
    uncut = uncut_reason(cuts.cut_error, transfers)
    if cut is None and uncut is None:
        problems.append(f"nothing was cut: {cuts.cut_error}")
    problems += cuts.schedule.problems
    lost = [t.bytes_lost for t in transfers.values()]
    exposure = cuts.exposures()
    record = FailoverRun(
        mode=mode,
        evs=evs_used(mode.transport, params.mrc_evs),
        flows=tuple(transfers),
        transfers=transfers,
        cut=None if cut is None else cut.name,
        cut_link=None if cut is None or cut.switch is not None else cut.name,
        cut_switch=None if cut is None else cut.switch,
        cut_links=tuple(str(link) for link in cuts.schedule.links),
        switch_dark=params.switch_dark if mode.placement == Placement.SWITCH else None,
        cut_probe_packets=None if cut is None else cut.packets,
        cut_counters=None if cut is None else cut.counters,
        cut_choice=params.choice(),
        exposure=exposure,
        exposed=run_exposed(exposure),
        cut_s=cuts.cut_s,
        cut_error=cuts.cut_error,
        uncut=uncut if cut is None else None,
        restore_s=cuts.restore_s,
        switch_back_s=cuts.schedule.switch_back_s,
        recovery_s=None
        if cuts.cut_s is None
        else recovery_time(total, cuts.cut_s, BASELINE_FROM_S),
        longest_stall_s=max(
            (t.longest_stall_s for t in transfers.values() if t.longest_stall_s is not None),
            default=None,
        ),
        bytes_lost=None if any(value is None for value in lost) else sum(v or 0 for v in lost),
        completed=all(t.completed for t in transfers.values()),
        failed=tuple(
            FlowFailure(
                flow=name,
                error=t.error,
                failed_at_s=t.failed_at_s,
                after_cut_s=t.failure.failed_after_cut_s
                if isinstance(t.failure, CutFailure)
                else None,
            )
            for name, t in transfers.items()
            if not t.completed
        ),
        problems=tuple(problems),
    )
    return record, series


def uncut_reason(cut_error: str | None, transfers: Mapping[str, Transfer]) -> str | None:
    """Why a run with nothing cut is still a measurement: every transfer failed before the
    cut came (a RoCE QP out of retries on a loaded fabric), so the schedule had nothing left
    to break. None otherwise: a run whose flows lived to the cut and were not cut, or whose
    cut could not be chosen (``cut_error``), is not the experiment it claims to be."""
    if cut_error is not None or not transfers:
        return None
    if any(transfer.completed for transfer in transfers.values()):
        return None
    return "every transfer had failed before the cut"


def _flow_transfer(
    result: PerfResult | TransferFailed,
    samples: list[PerfSample],
    clock: RunClock,
    cut_s: float | None,
    launched: float,
) -> Transfer:
    """One flow's figures; a failed flow's with its error, when it failed (on the run's
    clock, and after the cut) and the bytes confirmed before."""
    if not isinstance(result, TransferFailed):
        return transfer_metrics(result)
    failed_at = clock.failed_at(result.at, launched)
    return failed_transfer(
        CutFailure(
            error=str(result),
            failed_at_s=failed_at,
            error_code=result.code,
            bytes_confirmed=int(samples[-1]["total_bytes"]) if samples else 0,
            failed_after_cut_s=None if cut_s is None else failed_at - cut_s,
        )
    )


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
