"""What a failover run breaks and when, on the run's clock: the counters are read
``PROBE_LEAD_S`` before the cut, the candidate the choice names (``experiments.placements``:
drawn with the run's seed, or the busiest) is broken at ``cut_at_s`` and mended at
``restore_at_s`` or when the flows are over, whichever comes first
(:class:`experiments.schedule.Schedule` runs the steps). What the candidates carried until
the probe also says whose traffic the cut hit (``experiments.failover.exposure``)."""

from __future__ import annotations

from collections.abc import Callable

from experiments.counters import CountersUnavailable
from experiments.failover.exposure import FlowExposure, flow_exposures
from experiments.failover.modes import PROBE_LEAD_S, Params
from experiments.placements import (
    Cut,
    CutChoice,
    Loads,
    Placement,
    Snapshot,
    busiest,
    candidates,
    drawn,
    loaded,
    loads,
)
from experiments.schedule import Schedule
from experiments.timeline import RunClock
from testbed.session import Testbed


class Cuts:
    """One run's cut and restore (see the module's docstring): what was cut and when, whose
    traffic it hit, why nothing was cut, and what the controller did not see mended."""

    def __init__(
        self,
        testbed: Testbed,
        params: Params,
        placement: Placement,
        flows: list[tuple[str, str]],
        clock: RunClock,
        seed: int,
    ) -> None:
        self.testbed = testbed
        self.params = params
        self.placement = placement
        self.flows = flows
        self.clock = clock
        self.seed = seed
        self.before = self._snapshot()
        self.probe: Snapshot | None = None
        #: What the choice broke (None: nothing was cut).
        self.cut: Cut | None = None
        #: What the candidates carried until the probe (None: unread, see ``loads_error``).
        self.loads: Loads | None = None
        self.loads_error: str | None = None
        #: When breaking began and mending began, on the run's clock.
        self.cut_s: float | None = None
        self.restore_s: float | None = None
        #: Why nothing could be chosen (a busiest cut whose snapshot's counters were unread).
        self.choice_error: str | None = None
        self.schedule = Schedule(testbed, "failover-schedule", on_mend=self._note_restore)
        self.schedule.at(self._on_clock(params.cut_at_s - PROBE_LEAD_S), self._probe)
        self.schedule.at(self._on_clock(params.cut_at_s), self._break)
        self.schedule.at(self._on_clock(params.restore_at_s), self.schedule.mend)

    def start(self) -> None:
        self.schedule.start()

    def finish(self) -> None:
        """The flows are over: mend whatever is still broken and wait until the controller
        sees every link it tracks up again."""
        self.schedule.finish()

    @property
    def cut_error(self) -> str | None:
        """Why the run is not cut as asked: no choice could be made, or a step failed."""
        return self.choice_error if self.choice_error is not None else self.schedule.error

    def exposures(self) -> dict[str, FlowExposure]:
        """Each flow's exposure to the cut (none when nothing was cut)."""
        if self.cut is None:
            return {}
        return flow_exposures(
            self.testbed.topology,
            self.placement,
            self.flows,
            self.cut,
            self.loads,
            self.loads_error,
        )

    def _on_clock(self, at_s: float) -> Callable[[], bool]:
        def due() -> bool:
            return self.clock.started and self.clock.now() >= at_s

        return due

    def _snapshot(self) -> Snapshot:
        nics = (
            self.testbed.nic_tx_packets(self.flows[0][0]) if self.placement == Placement.NIC else {}
        )
        return Snapshot(self.testbed.status(), nics)

    def _probe(self) -> None:
        self.probe = self._snapshot()

    def _break(self) -> None:
        """Break what the choice names; the cut's time is when breaking began (a switch's
        process dies first, its links go dark in the next tens of milliseconds). A busiest
        cut whose counters cannot be read breaks nothing (recorded; the flows run on uncut);
        a drawn one breaks all the same, its exposure unknown."""
        options = candidates(self.testbed.topology, self.placement, self.flows)
        self._read_loads()
        if self.params.choice() == CutChoice.BUSIEST:
            if self.loads is None:
                self.choice_error = self.loads_error
                return
            self.cut = busiest(options, self.loads)
        else:
            chosen = drawn(options, self.seed)
            self.cut = chosen if self.loads is None else loaded(chosen, self.loads)
        self.cut_s = self.clock.now()
        if self.cut.switch is not None:
            self.schedule.power_off(self.cut.switch, dark=self.params.switch_dark)
        else:
            self.schedule.cut_link(self.cut.a, self.cut.b)

    def _note_restore(self) -> None:
        self.restore_s = self.clock.now() if self.clock.started else None

    def _read_loads(self) -> None:
        """What the candidates carried until the probe; a snapshot whose counters could not
        be read (a loaded machine) is taken again once, at the moment of the cut."""
        try:
            self.loads = self._loads_until(self.probe)
        except CountersUnavailable:
            self._probe()
            try:
                self.loads = self._loads_until(self.probe)
            except CountersUnavailable as error:
                self.loads_error = str(error)

    def _loads_until(self, probe: Snapshot | None) -> Loads:
        assert probe is not None
        return loads(self.testbed.topology, self.placement, self.flows, self.before, probe)
