"""EV states as the controller sees them, across every client's QPs: each EV's state
aggregated over the live QPs of its profile, EV events when that changes, and the states a
controller sets applied to those QPs' connections.

The agent's part of ``mrc_ctl``'s EV state model: a QP's core reports its own EVs' states;
the controller reads, and is told about, one state per (EV profile, EV).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence

from agent.api.profiles import ProfileRegistry
from agent.api.resources import CORE_TO_CTL, QpRecord
from agent.api.types import CtlEvState, Ev, EvMode
from agent.core.events import EvStateChanged
from agent.io.runtime import AgentRuntime
from wire.constants import EvState

#: Every live QP of the agent, whichever client holds it.
LiveQps = Callable[[], Iterable[QpRecord]]
#: An EV event (profile, EV, new state) to every client's EV event CQs.
Announce = Callable[[int, Ev, CtlEvState], None]


class EvStates:
    """The aggregate EV states, and the EV events they raise."""

    def __init__(
        self, registry: ProfileRegistry, runtime: AgentRuntime, qps: LiveQps, announce: Announce
    ) -> None:
        self._registry = registry
        self._runtime = runtime
        self._qps = qps
        self._announce = announce
        #: Aggregate EV states reported per (EV profile, EV), for EV events.
        self._reported: dict[tuple[int, Ev], CtlEvState] = {}

    def qps_of_profile(self, profile_id: int) -> list[QpRecord]:
        """The live QPs (connected) using EV profile ``profile_id``."""
        users = self._registry.ev_profile(profile_id).users
        return [qp for qp in self._qps() if qp.num in users and qp.endpoint is not None]

    def aggregate(self, profile_id: int, ev: Ev) -> CtlEvState:
        """An EV's state for the controller: DENIED if denied, ASSUMED_BAD if any QP of the
        profile has retired it, GOOD otherwise."""
        profile = self._registry.ev_profile(profile_id)
        if ev in profile.denied:
            return CtlEvState.DENIED
        states = [qp.ev_states.get(ev) for qp in self.qps_of_profile(profile_id)]
        if CtlEvState.ASSUMED_BAD in states:
            return CtlEvState.ASSUMED_BAD
        if profile.mode is EvMode.AUTO and not any(states):
            return CtlEvState.UNKNOWN
        return CtlEvState.GOOD

    def changed(self, qp: QpRecord, event: EvStateChanged) -> None:
        """A QP's core reported a home EV's new state: report the profile's if it changed."""
        key = (event.plane, event.value)
        ev = qp.ev_of.get(key)
        if ev is None:  # AUTO: the QP's own random EVs
            ev = Ev.stev(event.value, event.plane + 1)
            qp.ev_of[key] = ev
            qp.wire_of[ev] = key
        qp.ev_states[ev] = CORE_TO_CTL[EvState(event.state)]
        self.report(qp.ev_profile_id, ev)

    def report(self, profile_id: int, ev: Ev) -> None:
        """Send an EV event if the EV's aggregate state changed and the mask asks for it."""
        state = self.aggregate(profile_id, ev)
        previous = self._reported.get((profile_id, ev), CtlEvState.GOOD)
        if state == previous:
            return
        if state is CtlEvState.UNKNOWN:
            # An AUTO EV no live QP has any more (each QP draws its own): forgotten, lest
            # every QP's EVs stay here for the agent's lifetime.
            self._reported.pop((profile_id, ev), None)
        else:
            self._reported[(profile_id, ev)] = state
        if state & self._registry.ev_profile(profile_id).event_mask:
            self._announce(profile_id, ev, state)

    def apply(self, profile_id: int, effects: Sequence[tuple[Ev, CtlEvState]]) -> None:
        """Apply states the controller set to every live QP of the profile, at once."""
        now = self._runtime.clock()
        for ev, state in effects:
            for qp in self.qps_of_profile(profile_id):
                where = qp.wire_of.get(ev)
                if where is None or qp.endpoint is None:
                    continue
                plane, value = where
                with contextlib.suppress(KeyError):
                    if state is CtlEvState.DENIED:
                        qp.endpoint.deny_ev(qp.num, plane, value, now)
                    elif state is CtlEvState.ASSUMED_BAD:
                        qp.endpoint.retire_ev(qp.num, plane, value, now)
                    else:
                        qp.endpoint.admit_ev(qp.num, plane, value)
            self.report(profile_id, ev)
        self._runtime.service()
