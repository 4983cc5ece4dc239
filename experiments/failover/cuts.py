"""What a failover run breaks and when, on the run's clock: the counters are read
``PROBE_LEAD_S`` before the cut, what the placement chose (``experiments.placements``) is
broken at ``cut_at_s`` and mended at ``restore_at_s`` or when the flows are over, whichever
comes first (:class:`experiments.schedule.Schedule` runs the steps)."""

from __future__ import annotations

from collections.abc import Callable

from experiments.counters import CountersUnavailable
from experiments.documents import Status
from experiments.failover.modes import PROBE_LEAD_S, Params
from experiments.placements import (
    Cut,
    Placement,
    busiest_nic,
    busiest_spine,
    local_uplink,
    remote_downlink,
)
from experiments.schedule import Schedule
from experiments.timeline import RunClock
from testbed.session import Testbed


class Cuts:
    """One run's cut and restore (see the module's docstring): what was cut and when, why
    nothing was, and what the controller did not see mended."""

    def __init__(
        self,
        testbed: Testbed,
        params: Params,
        placement: Placement,
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
        self.probe: Status | None = None
        self.nics_probe: dict[str, int] = {}
        #: What the placement chose (None: nothing was cut).
        self.cut: Cut | None = None
        #: When breaking began and mending began, on the run's clock.
        self.cut_s: float | None = None
        self.restore_s: float | None = None
        #: Why nothing could be chosen (a snapshot's counters unread).
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

    def _on_clock(self, at_s: float) -> Callable[[], bool]:
        def due() -> bool:
            return self.clock.started and self.clock.now() >= at_s

        return due

    def _probe(self) -> None:
        self.probe = self.testbed.status()
        self.nics_probe = self._nic_counters()

    def _break(self) -> None:
        """Break what the placement chose; the cut's time is when breaking began (a switch's
        process dies first, its links go dark in the next tens of milliseconds). Nothing is
        broken when no choice can be made (recorded; the flows run on uncut)."""
        try:
            self.cut = self._choose()
        except CountersUnavailable as error:
            self.choice_error = str(error)
            return
        self.cut_s = self.clock.now()
        if self.cut.switch is not None:
            self.schedule.power_off(self.cut.switch, dark=self.params.switch_dark)
        else:
            self.schedule.cut_link(self.cut.a, self.cut.b)

    def _note_restore(self) -> None:
        self.restore_s = self.clock.now() if self.clock.started else None

    def _nic_counters(self) -> dict[str, int]:
        if self.placement != Placement.NIC:
            return {}
        return self.testbed.nic_tx_packets(self.flows[0][0])

    def _choose(self) -> Cut:
        """What the placement breaks; a snapshot whose counters could not be read (a loaded
        machine) is taken again once, at the moment of the cut."""
        try:
            return self._choose_from(self.probe)
        except CountersUnavailable:
            self._probe()
            return self._choose_from(self.probe)

    def _choose_from(self, probe: Status | None) -> Cut:
        assert probe is not None
        topology = self.testbed.topology
        sources = [source for source, _ in self.flows]
        destinations = [destination for _, destination in self.flows]
        if self.placement == Placement.LOCAL:
            return local_uplink(topology, sources, self.before, probe)
        if self.placement == Placement.REMOTE:
            return remote_downlink(topology, destinations, self.before, probe)
        if self.placement == Placement.SWITCH:
            return busiest_spine(topology, destinations, self.before, probe)
        return busiest_nic(topology, sources[0], self.nics_before, self.nics_probe)
