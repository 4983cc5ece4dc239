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

This module is the agent-wide part: the parts every client shares (the device, the profiles,
the EV states across every client's QPs, the EV probes) and one ``ApiSession`` per client
(``agent.api.session``), made at its first request and released when it goes.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from agent.api.device import Device
from agent.api.ev_states import EvStates
from agent.api.ids import IdSource
from agent.api.probes import EvProbes
from agent.api.profiles import DeviceLimits, ProfileRegistry
from agent.api.resources import QpRecord
from agent.api.session import APP_OPS, CTL_OPS, AgentWide, ApiSession
from agent.api.types import CtlEvState, Ev, EventType
from agent.io.control_server import ControlServer, ControlSession
from agent.io.json_lines import Message
from agent.io.runtime import AgentRuntime


class ApiService:
    """The host API of one agent: its profiles, and one ``ApiSession`` per client."""

    def __init__(self, runtime: AgentRuntime, limits: DeviceLimits | None = None) -> None:
        self.runtime = runtime
        device = Device(runtime)
        self.registry = ProfileRegistry(runtime.pool.default.config, device.planes, limits)
        self.sessions: dict[ControlSession, ApiSession] = {}
        self.ev_states = EvStates(self.registry, runtime, self._live_qps, self._ev_event)
        self._agent = AgentWide(
            runtime=runtime,
            device=device,
            ids=IdSource(),
            registry=self.registry,
            ev_states=self.ev_states,
            probes=EvProbes(runtime),
            tell_all=self._async_event,
        )

    def install(self, server: ControlServer) -> None:
        """Serve ``api.*`` on ``server``'s socket."""
        for op in APP_OPS | CTL_OPS:
            server.handlers[op] = self._dispatch
        self.runtime.status_providers["api"] = self.status

    def status(self) -> dict[str, Any]:
        """The host API's part of ``mrc-agent status``."""
        return {
            "clients": len(self.sessions),
            "qps": sum(len(s.objects.qps) for s in self.sessions.values()),
            "regions": sum(len(s.objects.regions) for s in self.sessions.values()),
            "ev_profiles": {str(p.id): p.to_json() for p in self.registry.ev_profiles.values()},
        }

    def _dispatch(self, control: ControlSession, message: Message) -> None:
        session = self.sessions.get(control)
        if session is None:
            session = ApiSession(control, self._agent)
            self.sessions[control] = session
            control.closers.append(lambda: self._session_closed(control))
        session.handle(message)

    def _session_closed(self, control: ControlSession) -> None:
        session = self.sessions.pop(control, None)
        if session is not None:
            session.release()

    # --- what the shared parts ask of every client ----------------------------------------

    def _live_qps(self) -> Iterator[QpRecord]:
        for session in self.sessions.values():
            yield from session.objects.qps.values()

    def _ev_event(self, profile_id: int, ev: Ev, state: CtlEvState) -> None:
        for session in self.sessions.values():
            session.objects.ev_event(profile_id, ev, state)

    def _async_event(self, kind: EventType, element: int, reason: str) -> None:
        for session in self.sessions.values():
            session.outbox.async_event(kind, element, reason)
