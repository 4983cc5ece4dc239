"""One incast run: the victim flow, with the incast launched into it at ``incast_at_s`` on
its clock; the run's record and the victim's time series."""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

from experiments.counters import congestion_signals
from experiments.documents import PerfResult, PerfSample, Status
from experiments.incast.modes import Fabric, Params, incast_name, shared_hops, victim_name
from experiments.metrics import (
    failed_transfer,
    goodput_series,
    shortfall_bytes,
    transfer_metrics,
    window_goodput,
)
from experiments.progress import event
from experiments.records import Failure, Transfer
from experiments.timeline import Series
from testbed.agents import TransferFailed, TransferSpec
from testbed.session import Testbed

#: The victim's goodput before this time is its start-up, not its level.
BASELINE_FROM_S = 1.0
#: How often the runner looks whether the incast is due or the victim has ended.
POLL_S = 0.05


class _VictimClock:
    """The victim transfer's clock, estimated from its samples' arrival (never late by more
    than their delivery delay), and the moment the incast is due on it."""

    def __init__(self, due_s: float) -> None:
        self.due_s = due_s
        self.due = threading.Event()
        self._start: float | None = None

    def on_sample(self, sample: PerfSample) -> None:
        elapsed = float(sample["elapsed_s"])
        start = time.monotonic() - elapsed
        self._start = start if self._start is None else min(self._start, start)
        if elapsed >= self.due_s:
            self.due.set()

    def now(self) -> float:
        assert self._start is not None
        return time.monotonic() - self._start

    def wait_until_due(self, victim: Future[PerfResult]) -> bool:
        """True once the incast is due; False when the victim ended before that."""
        while not self.due.wait(POLL_S):
            if victim.done():
                return False
        return True


@dataclass(frozen=True)
class IncastRun:
    """One run's record: each transfer (the victim's and each sender's), the EVs, the hops
    the victim shares with the incast, when the incast started and ended on the victim's
    clock (end None: it never started) and how long it took to complete (None: not every
    sender completed), each sender's time, the victim's goodput over its run, before and
    during the incast, and its shortfall, and the trims and ECN marks the switches counted
    (None where a switch could not count them)."""

    transfers: Mapping[str, Transfer]
    evs: int
    victim: str
    shared_hops: tuple[str, ...]
    incast_start_s: float
    incast_end_s: float | None
    incast_completion_s: float | None
    incast_transfer_seconds: Mapping[str, float | None]
    victim_goodput_bps: float
    victim_goodput_bps_before: float | None
    victim_goodput_bps_during: float | None
    victim_shortfall_bytes: float | None
    switch_signals: Mapping[str, int | None]


#: A run's time series: the victim's.
IncastSeries = dict[str, Series]


def run_mode(
    testbed: Testbed, params: Params, mode: Fabric, seed: int
) -> tuple[IncastRun, IncastSeries]:
    """The victim, with the incast launched into it at ``incast_at_s``."""
    del mode, seed  # the fabric makes the mode; each run draws fresh EVs, the seed labels it
    shared = shared_hops(testbed.topology, params)
    victim_spec = TransferSpec(
        params.victim_source,
        params.victim_destination,
        duration_s=params.victim_duration_s,
        evs=params.evs,
        message_size=params.message_size,
        interval_s=params.bin_s,
    )
    incast_specs = [
        TransferSpec(
            sender,
            params.receiver,
            total_bytes=params.incast_bytes,
            evs=params.evs,
            message_size=params.message_size,
        )
        for sender in params.sender_hosts
    ]
    clock = _VictimClock(params.incast_at_s)
    before = testbed.status()
    # Not a ``with`` block: on Ctrl-C that would wait out the victim's whole run before the
    # testbed's teardown; the teardown stops the agents, which ends the victim's thread.
    pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="incast-victim")
    try:
        victim = pool.submit(testbed.transfer, victim_spec, clock.on_sample)
        if clock.wait_until_due(victim):
            start_s = clock.now()
            event("incast: %d senders into %s", len(incast_specs), params.receiver)
            outcomes = testbed.transfer_all(incast_specs)
            ended = clock.now()
            event("incast over after %.2f s", ended - start_s)
            end_s: float | None = ended
        else:
            start_s, end_s = params.incast_at_s, None
            never = TransferFailed("not started: the victim flow ended before the incast was due")
            outcomes = [never] * len(incast_specs)
        try:
            victim_outcome: PerfResult | TransferFailed = victim.result()
        except TransferFailed as failure:
            victim_outcome = failure
    finally:
        pool.shutdown(wait=False)
    after = testbed.status()
    return _record(params, shared, victim_outcome, outcomes, (start_s, end_s), before, after)


def _record(
    params: Params,
    shared: list[str],
    victim: PerfResult | TransferFailed,
    incast: Sequence[PerfResult | TransferFailed],
    span: tuple[float, float | None],
    before: Status,
    after: Status,
) -> tuple[IncastRun, IncastSeries]:
    start_s, end_s = span
    transfers: dict[str, Transfer] = {}
    incast_seconds: dict[str, float | None] = {}
    for sender, outcome in zip(params.sender_hosts, incast, strict=True):
        name = incast_name(sender, params)
        if isinstance(outcome, TransferFailed):
            transfers[name] = failed_transfer(Failure(str(outcome)))
            incast_seconds[name] = None
        else:
            transfers[name] = transfer_metrics(outcome, params.incast_bytes)
            incast_seconds[name] = float(outcome["seconds"])
    name = victim_name(params)
    series: Series
    if isinstance(victim, TransferFailed):
        transfers[name], series = failed_transfer(Failure(str(victim))), []
    else:
        transfers[name], series = transfer_metrics(victim), goodput_series(victim)
    incast_done = end_s is not None and all(
        transfers[incast_name(s, params)].completed for s in params.sender_hosts
    )
    before_bps = window_goodput(series, BASELINE_FROM_S, start_s, params.bin_s)
    record = IncastRun(
        transfers=transfers,
        evs=params.evs,
        victim=name,
        shared_hops=tuple(shared),
        incast_start_s=start_s,
        incast_end_s=end_s,
        incast_completion_s=end_s - start_s if incast_done and end_s is not None else None,
        incast_transfer_seconds=incast_seconds,
        victim_goodput_bps=transfers[name].goodput_bps,
        victim_goodput_bps_before=before_bps,
        victim_goodput_bps_during=None
        if end_s is None
        else window_goodput(series, start_s, end_s, params.bin_s),
        victim_shortfall_bytes=None
        if end_s is None or before_bps is None
        else shortfall_bytes(series, before_bps, start_s, end_s, params.bin_s),
        switch_signals=congestion_signals(before, after),
    )
    return record, {name: series}
