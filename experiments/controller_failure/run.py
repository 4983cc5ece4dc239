"""One run of the controller experiment: a transfer; at ``kill_at_s`` the acting controller is
killed with SIGKILL and the other takes over; at ``cut_at_s`` a fabric link, drawn with the
seed, is cut and the new primary must reroute it. Afterwards the link is restored and the
dead controller restarted (it rejoins as backup on either target: see
``testbed.controllers``), so the next run starts from a whole fabric with two controllers and
kills the other one.

Times are on the machine's monotonic clock, which the controllers' event logs share
(``mono``): the takeover is measured from the kill to the last switch the new primary was
told it holds, the cut from the cut to the new primary's failover record (written once its
last write is acknowledged).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from experiments.documents import PerfResult
from experiments.metrics import failed_transfer, transfer_metrics
from experiments.placements import Placement, candidates, drawn
from experiments.records import Failure, Transfer
from experiments.transports import requested_evs, transfer_options
from testbed.agents import TransferFailed, TransferSpec
from testbed.controllers import BACKUP, PRIMARY, Controllers
from testbed.processes import ProcessFailed
from testbed.session import Testbed

#: How long the other controller may take to be primary everywhere and reconcile.
TAKEOVER_TIMEOUT_S = 30.0
#: How long the new primary may take to write the cut's reroute.
REROUTE_TIMEOUT_S = 20.0


@dataclass(frozen=True)
class ControllerParams:
    """The experiment's knobs (``--set name=value``)."""

    duration_s: float = 12.0
    kill_at_s: float = 3.0
    cut_at_s: float = 7.0
    source: str = "h1"
    destination: str = "h3"
    transports: str = "mrc,single,roce:perftest"
    mrc_evs: int = 256
    message_size: int = 8192
    lldp_interval_ms: int = 50

    def check(self) -> None:
        """ValueError for timings that cannot work."""
        if not 0 < self.kill_at_s < self.cut_at_s < self.duration_s:
            raise ValueError(
                f"need 0 < kill_at_s < cut_at_s < duration_s, got {self.kill_at_s}, "
                f"{self.cut_at_s}, {self.duration_s}"
            )


@dataclass(frozen=True)
class ControllerRunRecord:
    """One run: the transfer, which controller was killed and which took over, how long the
    takeover took and what it wrote, the cut and how long until its last write."""

    transport: str
    transfers: Mapping[str, Transfer]
    killed: str | None
    took_over: str | None
    takeover_s: float | None
    #: Entries the new primary wrote reconciling (nothing changed: ideally 0).
    takeover_writes: int | None
    cut_link: str | None
    cut_to_write_s: float | None
    #: Entries the new primary wrote for the cut.
    cut_writes: int | None
    #: The role the killed controller came back in (``primary``, ``backup``).
    rejoined_as: str | None
    problems: tuple[str, ...]


#: A run's time series: the transfer's samples as the agent sent them.
ControllerSeries = list[dict[str, Any]]


def run_controller_failure(
    testbed: Testbed, params: ControllerParams, transport: str, seed: int
) -> tuple[ControllerRunRecord, ControllerSeries]:
    """One run (see the module docs)."""
    controllers = testbed.controllers
    if controllers is None or BACKUP not in controllers.names:
        raise ValueError("the controller experiment needs a backup controller in the run")
    flow = (params.source, params.destination)
    cut = drawn(candidates(testbed.topology, Placement.REMOTE, [flow]), seed)
    spec = TransferSpec(
        params.source,
        params.destination,
        duration_s=params.duration_s,
        evs=requested_evs(transport, params.mrc_evs),
        message_size=params.message_size,
        **transfer_options(transport),
    )
    samples: ControllerSeries = []
    outcome: list[PerfResult | TransferFailed] = []
    started = time.monotonic()
    flow_thread = threading.Thread(
        target=_transfer, args=(testbed, spec, samples, outcome), name="controller-transfer"
    )
    flow_thread.start()
    problems: list[str] = []
    killed = _acting(controllers)
    other = BACKUP if killed == PRIMARY else PRIMARY
    takeover_s = takeover_writes = cut_to_write_s = cut_writes = None
    cut_link: str | None = None
    ends: tuple[str, str] | None = None
    try:
        _sleep_until(started + params.kill_at_s)
        mark = len(controllers.run(other).events())
        killed_at = controllers.kill(killed)
        try:
            takeover_s, takeover_writes = _takeover(controllers, other, mark, killed_at, problems)
        except ProcessFailed as error:
            problems.append(f"takeover: {error}")
        _sleep_until(started + params.cut_at_s)
        mark = len(controllers.run(other).events())
        cut_at = time.monotonic()
        ends = (cut.a, cut.b)
        cut_link = str(testbed.fail(cut.a, cut.b))
        cut_to_write_s, cut_writes = _reroute(
            controllers.run(other).events, cut_link, mark, cut_at, problems, REROUTE_TIMEOUT_S
        )
    finally:
        flow_thread.join()
        rejoined = _mend(testbed, controllers, killed, ends, problems)
    result = outcome[0] if outcome else TransferFailed("no result")
    # A failure's time on the run's clock tells a death of the kill or the cut from one before.
    transfer = (
        failed_transfer(Failure(str(result), failed_at_s=round(result.at - started, 3)))
        if isinstance(result, TransferFailed)
        else transfer_metrics(result)
    )
    record = ControllerRunRecord(
        transport=transport,
        transfers={f"{params.source}->{params.destination}": transfer},
        killed=killed,
        took_over=other,
        takeover_s=takeover_s,
        takeover_writes=takeover_writes,
        cut_link=cut_link,
        cut_to_write_s=cut_to_write_s,
        cut_writes=cut_writes,
        rejoined_as=rejoined,
        problems=tuple(problems),
    )
    return record, samples


def _transfer(
    testbed: Testbed,
    spec: TransferSpec,
    samples: ControllerSeries,
    outcome: list[PerfResult | TransferFailed],
) -> None:
    try:
        outcome.append(testbed.transfer(spec, samples.append))
    except TransferFailed as error:
        outcome.append(error)


def _acting(controllers: Controllers) -> str:
    """The controller that is primary on every switch now (the primary by default)."""
    for name, state in controllers.states().items():
        if state.stance(controllers.switches) == PRIMARY:
            return name
    return PRIMARY


def _takeover(
    controllers: Controllers, other: str, mark: int, killed_at: float, problems: list[str]
) -> tuple[float | None, int]:
    """Wait until ``other`` is primary and has reconciled every switch; the seconds from the
    kill to its being primary on the last switch (None, with a problem, if its log says of no
    switch that it became primary there), and the entries its reconciliation wrote."""
    controllers.wait_stance(other, PRIMARY, timeout=TAKEOVER_TIMEOUT_S)
    run = controllers.run(other)
    run.wait_in_service(sorted(controllers.switches), after=mark, timeout=TAKEOVER_TIMEOUT_S)
    events = run.events()[mark:]
    became = [
        float(e["mono"])
        for e in events
        if e.get("event") == "switch_connected" and e.get("role") == PRIMARY
    ]
    writes = sum(
        int(e["inserts"]) + int(e["modifies"]) + int(e["deletes"])
        for e in events
        if e.get("event") == "program"
    )
    if not became:
        problems.append(f"takeover: no switch_connected primary in {other}'s log after the kill")
        return None, writes
    return max(became) - killed_at, writes


def _reroute(
    events: Callable[[], list[dict[str, Any]]],
    cut_link: str,
    after: int,
    cut_at: float,
    problems: list[str],
    timeout: float,
) -> tuple[float | None, int | None]:
    """The seconds from the cut to the failover record of ``cut_link`` going down (a record of
    another trigger, a probe's flap or the takeover's, does not count), and its writes; a
    problem if there is none within ``timeout`` or it is not complete."""
    down = f"{cut_link} down"
    reroute = _first(
        events,
        lambda e: e.get("event") == "failover" and down in e.get("trigger", ()),
        after,
        timeout,
    )
    if reroute is None:
        problems.append(f"no failover record for {down} within {timeout:.0f} s of the cut")
        return None, None
    if not reroute.get("complete", False):
        problems.append(f"the failover for {down} is not complete (a write failed)")
    return float(reroute["mono"]) - cut_at, int(reroute["writes"])


def _first(
    events: Callable[[], list[dict[str, Any]]],
    matches: Callable[[dict[str, Any]], bool],
    after: int,
    timeout: float,
) -> dict[str, Any] | None:
    deadline = time.monotonic() + timeout
    while True:
        for event in events()[after:]:
            if matches(event):
                return event
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.05)


def _mend(
    testbed: Testbed,
    controllers: Controllers,
    killed: str,
    ends: tuple[str, str] | None,
    problems: list[str],
) -> str | None:
    """Restore the link (until the acting controller sees it up) and restart the dead
    controller; the role it came back in."""
    if ends is not None:
        try:
            link = testbed.restore(*ends)
            if testbed.wait_link_state(link, down=False, timeout=REROUTE_TIMEOUT_S) is None:
                problems.append(f"the controller did not see {link} up again")
        except Exception as error:  # a failed mend is the run's problem, not the whole run's
            problems.append(f"restore {ends}: {error}")
    try:
        mark = len(controllers.run(killed).events())
        role = controllers.restart(killed)
        if role == PRIMARY:
            controllers.run(killed).wait_in_service(sorted(controllers.switches), after=mark)
        return role
    except (ProcessFailed, ValueError) as error:
        problems.append(f"restart {killed}: {error}")
        return None


def _sleep_until(moment: float) -> None:
    time.sleep(max(0.0, moment - time.monotonic()))
