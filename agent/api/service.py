"""The host API inside the agent: each control-socket client's contexts, CQs, regions and QPs,
and the controller's profiles, probes and EV events.

``ApiService.install(control_server)`` adds the ``api.*`` ops to the agent's control socket
(JSON lines, see ``agent.api.client`` for the other end). What crosses the socket is small:
work requests name memory by L_Key and address, completions carry ids and lengths. The bytes
themselves never do: a region is a sealed memfd the application made, whose descriptor came
over the socket (``SCM_RIGHTS``), mapped here too, so a WRITE that arrives is placed straight
into the application's memory by the core and a posted WRITE is read from it in place.

Every request is checked here again whatever the client checked: a bad one is answered with
an ``ApiError`` naming the field (or, for the unanswered ``post_send`` / ``post_recv``, with
error completions and the QP in ERR, as a NIC would), and nothing else is disturbed. A client
that goes away releases everything it held: its QPs are closed (their peers see them fail),
its regions unregistered and unmapped, its channels closed.

Privileged clients (root or the socket's owner) may also use the controller's ``api.ctl.*``
ops; anyone else gets ``PermissionDenied`` for them.

This module is the agent-wide part: one ``ApiSession`` per client (``agent.api.dispatch``,
built on ``session``, ``qp_ops`` and ``ctl_ops``), the profiles, EV states and events across
every client's QPs, and connectionless EV probes.
"""

from __future__ import annotations

import contextlib
import os
import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agent.api.dispatch import APP_OPS, CTL_OPS, ApiSession
from agent.api.errors import OutOfResources
from agent.api.profiles import DeviceLimits, ProfileRegistry
from agent.api.requests import U16, U32
from agent.api.resources import CORE_TO_CTL, NS_PER_S, QpRecord
from agent.api.session import SessionBase
from agent.api.types import CtlEvState, Ev, EvMode
from agent.core import Event
from agent.core.endpoint import CONNECTIONLESS_QP
from agent.core.events import EvProbeAnswered, EvStateChanged
from agent.io.control_server import ControlServer, ControlSession
from agent.io.json_lines import Message
from agent.io.reactor import Timer
from agent.io.runtime import AgentRuntime
from wire.constants import EvState


@dataclass
class ProbeBatch:
    session: SessionBase
    request: int
    pending: dict[int, tuple[int, int]]  # seq -> (req_id, port)
    responses: list[dict[str, Any]] = field(default_factory=list)
    timer: Timer | None = None


# --- the service -----------------------------------------------------------------------------


class ApiService:
    """The host API of one agent: its profiles, and one ``ApiSession`` per client."""

    def __init__(self, runtime: AgentRuntime, limits: DeviceLimits | None = None) -> None:
        self.runtime = runtime
        self.planes = len(runtime.local_addresses)
        self.registry = ProfileRegistry(runtime.pool.default.config, self.planes, limits)
        self.sessions: dict[ControlSession, ApiSession] = {}
        self._rng = random.Random(int.from_bytes(os.urandom(8), "big"))
        self._next_pd = 1
        self._probes: dict[int, ProbeBatch] = {}
        self._next_seq = 0
        #: Aggregate EV states reported per (EV profile, EV), for EV events.
        self._reported: dict[tuple[int, Ev], CtlEvState] = {}
        runtime.on_events(CONNECTIONLESS_QP, self._on_connectionless)

    def install(self, server: ControlServer) -> None:
        """Serve ``api.*`` on ``server``'s socket."""
        for op in APP_OPS | CTL_OPS:
            server.handlers[op] = self._dispatch
        self.runtime.status_providers["api"] = self.status

    def status(self) -> dict[str, Any]:
        """The host API's part of ``mrc-agent status``."""
        return {
            "clients": len(self.sessions),
            "qps": sum(len(s.qps) for s in self.sessions.values()),
            "regions": sum(len(s.regions) for s in self.sessions.values()),
            "ev_profiles": {str(p.id): p.to_json() for p in self.registry.ev_profiles.values()},
        }

    def new_pd(self) -> int:
        """A protection domain number no other client has."""
        pd = self._next_pd
        self._next_pd += 1
        return pd

    def random_key(self, taken: Callable[[int], bool]) -> int:
        """A random non-zero 32-bit key ``taken`` says is free."""
        while True:
            key = self._rng.randint(1, U32)
            if not taken(key):
                return key

    def random_va(self) -> int:
        """A page-aligned address for a region (47 bits, as user space has)."""
        return self._rng.randrange(1 << 32, 1 << 46) & ~0xFFF

    def _dispatch(self, control: ControlSession, message: Message) -> None:
        session = self.sessions.get(control)
        if session is None:
            session = ApiSession(self, control)
            self.sessions[control] = session
            control.closers.append(lambda: self._session_closed(control))
        session.handle(message)

    def _session_closed(self, control: ControlSession) -> None:
        session = self.sessions.pop(control, None)
        if session is not None:
            session.release()

    # --- EV states and events -------------------------------------------------------------

    def qps_of_profile(self, profile_id: int) -> list[QpRecord]:
        """The live QPs (connected) using EV profile ``profile_id``."""
        users = self.registry.ev_profile(profile_id).users
        return [
            qp
            for session in self.sessions.values()
            for qp in session.qps.values()
            if qp.num in users and qp.endpoint is not None
        ]

    def aggregate(self, profile_id: int, ev: Ev) -> CtlEvState:
        """An EV's state for the controller: DENIED if denied, ASSUMED_BAD if any QP of the
        profile has retired it, GOOD otherwise."""
        profile = self.registry.ev_profile(profile_id)
        if ev in profile.denied:
            return CtlEvState.DENIED
        states = [qp.ev_states.get(ev) for qp in self.qps_of_profile(profile_id)]
        if CtlEvState.ASSUMED_BAD in states:
            return CtlEvState.ASSUMED_BAD
        if profile.mode is EvMode.AUTO and not any(states):
            return CtlEvState.UNKNOWN
        return CtlEvState.GOOD

    def ev_changed(self, qp: QpRecord, event: EvStateChanged) -> None:
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
        if state & self.registry.ev_profile(profile_id).event_mask:
            for session in self.sessions.values():
                session.push_ev_event(profile_id, ev, state)

    def apply_states(self, profile_id: int, effects: Sequence[tuple[Ev, CtlEvState]]) -> None:
        """Apply states the controller set to every live QP of the profile, at once."""
        now = self.runtime.clock()
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
        self.runtime.service()

    # --- connectionless EV probes ---------------------------------------------------------

    def start_probes(
        self,
        session: SessionBase,
        request: int,
        probes: list[tuple[int, int, bytes, int]],
        timeout_ns: int,
    ) -> None:
        """Send ``probes`` (req_id, plane, peer, wire EV) and answer ``request`` once all are
        answered or ``timeout_ns`` passed."""
        endpoint = self.runtime.pool.default
        now = self.runtime.clock()
        batch = ProbeBatch(session, request, {})
        for req_id, plane, peer, ev in probes:
            seq = self._free_seq()
            endpoint.send_ev_probe(plane, peer, ev, seq, now)
            batch.pending[seq] = (req_id, plane + 1)
            self._probes[seq] = batch
        batch.timer = self.runtime.reactor.call_at(
            now + timeout_ns / NS_PER_S, lambda: self._finish_probes(batch)
        )
        self.runtime.service()

    def _free_seq(self) -> int:
        for _ in range(U16 + 1):
            seq = self._next_seq
            self._next_seq = (seq + 1) & U16
            if seq not in self._probes:
                return seq
        raise OutOfResources("65536 EV probes are already waiting for their answer", "req")

    def _on_connectionless(self, event: Event) -> None:
        if not isinstance(event, EvProbeAnswered):
            return
        batch = self._probes.pop(event.seq, None)
        if batch is None:
            return
        req_id, port = batch.pending.pop(event.seq)
        batch.responses.append(
            {"req_id": req_id, "port": port, "rtt": round(event.rtt * NS_PER_S), "adj_svc_time": 0}
        )
        if not batch.pending:
            self._finish_probes(batch)

    def _finish_probes(self, batch: ProbeBatch) -> None:
        if batch.timer is not None:
            batch.timer.cancel()
        endpoint = self.runtime.pool.default
        timed_out = []
        for seq, (req_id, _port) in batch.pending.items():
            endpoint.cancel_ev_probe(seq)
            self._probes.pop(seq, None)
            timed_out.append(req_id)
        batch.pending.clear()
        batch.session.reply(batch.request, {"responses": batch.responses, "timed_out": timed_out})

    def forget_probes(self, session: SessionBase) -> None:
        """A client left: its probes' answers go nowhere."""
        endpoint = self.runtime.pool.default
        for seq, batch in list(self._probes.items()):
            if batch.session is session:
                endpoint.cancel_ev_probe(seq)
                del self._probes[seq]
                if batch.timer is not None:
                    batch.timer.cancel()
