"""What is MRC's in an MRC QP's life (``QpType.MRC``): it takes an EV and a CC profile at INIT,
its connection opens at RTR on the endpoint its CC profile's configuration runs, and its core
reports its EVs' states, which the controller sees aggregated (``agent.api.ev_states``).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from agent.api.errors import InvalidArgument
from agent.api.ev_states import EvStates
from agent.api.profiles import ProfileRegistry
from agent.api.qp_kind import Deliver
from agent.api.qp_timing import DEFAULT_RETRY_LINEAR, mtu_bytes, retry_budget
from agent.api.requests import U24, int_field, opt_int_field
from agent.api.resources import CORE_TO_CTL, QpRecord
from agent.api.types import CtlEvState, Ev, QpState
from agent.core import ConnectionSpec, Event
from agent.core.events import EvStateChanged
from agent.io.runtime import AgentRuntime


class MrcQpKind:
    """MRC QPs (``agent.api.qp_kind.QpKind``)."""

    def __init__(
        self,
        runtime: AgentRuntime,
        registry: ProfileRegistry,
        ev_states: EvStates,
        deliver: Deliver,
    ) -> None:
        self._runtime = runtime
        self._registry = registry
        self._ev_states = ev_states
        self._deliver = deliver

    def max_send_wr(self) -> int:
        return self._runtime.pool.default.config.max_unconfirmed_messages

    def to_init(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        ev_id = opt_int_field(attrs, "ev_profile_id")
        cc_id = opt_int_field(attrs, "cc_profile_id")
        if qp.binding is not None and ev_id is None and cc_id is None:
            return
        ev_id = qp.ev_profile_id if ev_id is None else ev_id
        cc_id = qp.cc_profile_id if cc_id is None else cc_id
        # The new profiles first: one refused, the QP keeps those it had.
        binding = self._registry.bind(qp.num, ev_id, cc_id, self._runtime.ipv6)
        self._registry.release(qp.num, keep=(ev_id, cc_id))
        qp.binding = binding
        qp.ev_profile_id, qp.cc_profile_id = ev_id, cc_id

    def to_rtr(
        self,
        qp: QpRecord,
        dest: int,
        rq_psn: int,
        peers: tuple[bytes, ...],
        path_mtu: int | None,
    ) -> None:
        """The connection opens, with the profiles' EVs, or AUTO's own."""
        assert qp.binding is not None
        binding = qp.binding
        homes = None
        if binding.evs is not None:
            homes = tuple((ev.port - 1, value) for ev, value in binding.evs)
        pool = self._runtime.pool
        config = binding.config
        if path_mtu is not None:
            link = pool.default.config.payload_size
            payload = min(mtu_bytes(path_mtu), link)
            if payload != config.payload_size:
                config = dataclasses.replace(config, payload_size=payload)
        endpoint = pool.endpoint_for(config)
        chosen = homes
        exact_paths = False
        if chosen is None and self._runtime.choose_evs is not None:
            # AUTO in structured EV mode: EVs that name the paths to the peer, not random ones.
            chosen = self._runtime.choose_evs(peers, config.ev_set_size)
            exact_paths = chosen is not None
        spec = ConnectionSpec(
            qp.num,
            dest,
            peers,
            send_psn=0,
            receive_psn=rq_psn,
            evs=chosen,
            ev_min_active=binding.min_active,
            ev_standin_when_starved=exact_paths,
            ev_events=True,
            pd=qp.pd,
        )
        try:
            pool.connect(endpoint, spec)
        except ValueError as exc:
            raise InvalidArgument(str(exc), "dest_qp_num") from None
        qp.endpoint = endpoint
        if binding.evs is not None:
            for ev, value in binding.evs:
                qp.ev_of[(ev.port - 1, value)] = ev
                qp.wire_of[ev] = (ev.port - 1, value)
                qp.ev_states[ev] = CtlEvState.GOOD
        else:
            # AUTO: the QP's own random EVs, known from the start so that a controller can
            # list and deny them on the live QP (their later changes come as events).
            for plane, value, state in endpoint.ev_states(qp.num):
                ev = Ev.stev(value, plane + 1)
                qp.ev_of[(plane, value)] = ev
                qp.wire_of[ev] = (plane, value)
                qp.ev_states[ev] = CORE_TO_CTL[state]
        self._runtime.on_events(qp.num, lambda event: self._deliver(qp, event))
        # The profile's denials as they are now: the controller may have changed them since
        # the QP took the profile at INIT.
        now = self._runtime.clock()
        for ev in self._registry.ev_profile(qp.ev_profile_id).denied:
            where = qp.wire_of.get(ev)
            if where is not None:
                endpoint.deny_ev(qp.num, where[0], where[1], now)

    def to_rts(self, qp: QpRecord, attrs: dict[str, Any]) -> None:
        sq_psn = None
        if qp.state is QpState.RTS:
            if attrs.get("sq_psn") is not None:
                raise InvalidArgument("the send PSN is set on the way to RTS only", "sq_psn")
        else:
            sq_psn = int_field(attrs, "sq_psn", 0, U24)
        timing = {
            key: int_field(attrs, key, 0, high)
            for key, high in (("timeout", 24), ("retry_linear", 7), ("retry_exp", 25))
            if attrs.get(key) is not None
        }
        assert qp.endpoint is not None
        if sq_psn is not None:
            qp.endpoint.set_send_psn(qp.num, sq_psn)
            qp.attrs["sq_psn"] = sq_psn
        qp.attrs.update(timing)
        if "timeout" in qp.attrs:
            budget = retry_budget(
                qp.attrs["timeout"],
                qp.attrs.get("retry_linear", DEFAULT_RETRY_LINEAR),
                qp.attrs.get("retry_exp", 0),
            )
            qp.endpoint.set_peer_timeout(qp.num, budget)

    def other_event(self, qp: QpRecord, event: Event) -> None:
        if isinstance(event, EvStateChanged):
            self._ev_states.changed(qp, event)

    def failed(self, qp: QpRecord, reason: str) -> None:
        """Nothing of MRC's: every unfinished WR is flushed."""

    def closed(self, qp: QpRecord) -> None:
        """The QP's EVs are forgotten: the profile's states are told again without them."""
        for ev in list(qp.ev_states):
            qp.ev_states.pop(ev)
            self._ev_states.report(qp.ev_profile_id, ev)

    def released(self, qp: QpRecord) -> None:
        self._registry.release(qp.num)
        qp.binding = None
        qp.ev_of.clear()
        qp.wire_of.clear()
