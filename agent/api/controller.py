"""The controller API (OCP's ``mrc_ctl.h``), in Python, over the host's running agent.

One privileged controller per node configures what applications' QPs use: EV format profiles,
EV profiles and their EVs' states, CC profiles, the ports' admin state; it hears EV events
and sends connectionless EV probes. A ``Controller`` is a ``Context`` whose process is root or
the agent's own user; anyone else gets ``PermissionDenied`` from every call::

    with Controller.open() as ctl:
        ctl.modify_ev_fmt_profile(13, profile_state=ProfileState.OFFLINE,
                                  ev_fmt_mode=FormatMode.STEV, fmt_fields=[16, 16])
        ctl.modify_ev_fmt_profile(13, profile_state=ProfileState.ONLINE)
        ctl.modify_ev_profile(1, profile_state=ProfileState.OFFLINE, ev_mode=EvMode.EXP,
                              ev_fmt_profile_id=13, ev_count=64,
                              fields=[EvField(16, mask=0xFFFF), EvField(16, mask=0xFFFF)])
        ctl.modify_ev_profile(1, ev_op=EvOp.REPLACE_EV, entries=[...])
        ctl.modify_ev_profile(1, profile_state=ProfileState.ONLINE)

Attributes are keyword arguments named as OCP's fields; only those given are changed (OCP's
attribute masks). Results are the profiles' attributes as dictionaries.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any

from agent.api.client import CQ, CompChannel, Context, Message
from agent.api.errors import PermissionDenied, ProbesTimedOut, TimedOut
from agent.api.types import (
    CtlEvState,
    EpRequest,
    EpResponse,
    Ev,
    EvEvent,
    EvMode,
    EvOp,
    EvOpEntry,
    FormatMode,
    PortAdminState,
    ProfileState,
)
from agent.core.ev_expansion import EvField


class EvEventCQ(CQ):
    """An EV event CQ (``mrc_ctl_create_ev_event_cq``). When it is full, further events are
    dropped and counted; the next event delivered carries the count (exactly:
    ``MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT``)."""

    def __init__(
        self, context: Context, handle: int, cqe: int, channel: CompChannel | None
    ) -> None:
        super().__init__(context, handle, cqe, None, channel)
        self.dropped = 0

    def _take(self, message: Message) -> None:
        self.seq = max(self.seq, int(message.get("s", 0)))
        profile_id, ev, state, agent_drops = message["e"]
        if len(self.entries) >= self.cqe:
            self.dropped += 1 + agent_drops
            return
        event = EvEvent(
            profile_id,
            Ev(bytes.fromhex(ev["val"][2:]), ev["port"]),
            CtlEvState(state),
            self.dropped + agent_drops,
        )
        self.dropped = 0
        self.entries.append(event)

    def poll_ev_events(self, num_entries: int = 16) -> list[EvEvent]:
        """Up to ``num_entries`` EV events, oldest first (``mrc_ctl_poll_ev_event``)."""
        return self.poll(num_entries)  # type: ignore[return-value]


def _ev(ev: Ev) -> dict[str, Any]:
    return ev.to_json()


def _entry(entry: EvOpEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"ev": _ev(entry.ev), "flags": entry.flags}
    if entry.ev_new is not None:
        out["ev_new"] = _ev(entry.ev_new)
    if entry.state is not None:
        out["state"] = int(entry.state)
    return out


def _responses(raw: list[dict[str, Any]]) -> list[EpResponse]:
    return [
        EpResponse(int(r["req_id"]), int(r["port"]), int(r["rtt"]), int(r["adj_svc_time"]))
        for r in raw
    ]


def _field(field: EvField | dict[str, int]) -> dict[str, int]:
    return dataclasses.asdict(field) if isinstance(field, EvField) else dict(field)


class Controller:
    """The node's controller: OCP's ``mrc_ctl_*`` calls on a privileged context."""

    def __init__(self, context: Context) -> None:
        if not context.privileged:
            raise PermissionDenied("the controller API is for root or the agent's user")
        self.context = context
        self.link = context.link

    @classmethod
    def open(cls, path: str | None = None) -> Controller:
        """A controller on the host's running agent (its control socket at ``path``)."""
        context = Context.open(path)
        try:
            return cls(context)
        except BaseException:
            context.close()
            raise

    def close(self) -> None:
        """Close the context (profiles stay configured; event CQs go)."""
        self.context.close()

    def __enter__(self) -> Controller:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- device and ports -----------------------------------------------------------------

    def query_device(self) -> dict[str, Any]:
        """``mrc_ctl_query_device``: limits, modes, algorithms, ports, optional features."""
        return self.link.request("api.ctl.query_device")

    def query_port(self, port_num: int) -> dict[str, Any]:
        """``mrc_ctl_query_port``: the port's admin state (and whether it is in use)."""
        return self.link.request("api.ctl.query_port", port=port_num)

    def modify_port(self, port_num: int, port_admin_state: PortAdminState) -> dict[str, Any]:
        """``mrc_ctl_modify_port``: a DISABLED port carries nothing, as if its link were down
        (peers are told, QPs move to the other planes, contexts get PORT_ERR)."""
        return self.link.request(
            "api.ctl.modify_port",
            port=port_num,
            port_admin_state=PortAdminState(port_admin_state).name,
        )

    # --- EV format profiles -----------------------------------------------------------------

    def modify_ev_fmt_profile(
        self,
        profile_id: int,
        *,
        profile_state: ProfileState | None = None,
        ev_fmt_mode: FormatMode | None = None,
        fmt_fields: Sequence[int] | None = None,
    ) -> dict[str, Any]:
        """``mrc_ctl_modify_ev_fmt_profile`` (``fmt_fields``: the widths, MODIFY_FIELDS)."""
        return self.link.request(
            "api.ctl.fmt.modify",
            profile=profile_id,
            profile_state=None if profile_state is None else ProfileState(profile_state).name,
            ev_fmt_mode=None if ev_fmt_mode is None else FormatMode(ev_fmt_mode).name,
            fmt_fields=None if fmt_fields is None else [{"width": w} for w in fmt_fields],
        )

    def query_ev_fmt_profile(self, profile_id: int) -> dict[str, Any]:
        """``mrc_ctl_query_ev_fmt_profile``: state, mode and fields."""
        return self.link.request("api.ctl.fmt.query", profile=profile_id)

    # --- EV profiles --------------------------------------------------------------------------

    def modify_ev_profile(
        self,
        profile_id: int,
        *,
        profile_state: ProfileState | None = None,
        ev_mode: EvMode | None = None,
        ev_fmt_profile_id: int | None = None,
        ev_count: int | None = None,
        ev_min_active: int | None = None,
        ev_event_mask: int | None = None,
        fields: Sequence[EvField | dict[str, int]] | None = None,
        ev_op: EvOp | None = None,
        entries: Iterable[EvOpEntry] = (),
    ) -> dict[str, Any]:
        """``mrc_ctl_modify_ev_profile``: settings, MODIFY_FIELDS (``fields``), or an EV
        operation (REPLACE_EV, MODIFY_EV_STATE) on ``entries``."""
        return self.link.request(
            "api.ctl.ev.modify",
            profile=profile_id,
            profile_state=None if profile_state is None else ProfileState(profile_state).name,
            ev_mode=None if ev_mode is None else EvMode(ev_mode).name,
            ev_fmt_profile_id=ev_fmt_profile_id,
            ev_count=ev_count,
            ev_min_active=ev_min_active,
            ev_event_mask=None if ev_event_mask is None else int(ev_event_mask),
            fields=None if fields is None else [_field(f) for f in fields],
            ev_op=None if ev_op is None else EvOp(ev_op).name,
            entries=[_entry(e) for e in entries],
        )

    def set_ev_states(self, profile_id: int, states: Iterable[tuple[Ev, CtlEvState]]) -> None:
        """MODIFY_EV_STATE in one call: each EV to GOOD, ASSUMED_BAD or DENIED."""
        self.modify_ev_profile(
            profile_id,
            ev_op=EvOp.MODIFY_EV_STATE,
            entries=[EvOpEntry(ev, state=state) for ev, state in states],
        )

    def query_ev_profile(
        self, profile_id: int, ev_op: EvOp | None = None, entries: Iterable[EvOpEntry] = ()
    ) -> tuple[dict[str, Any], list[EvOpEntry]]:
        """``mrc_ctl_query_ev_profile``: the settings, and for QUERY_EV_STATE each entry's
        state, for QUERY_EV_ARRAY the EV array with states (port 0: unpopulated)."""
        result = self.link.request(
            "api.ctl.ev.query",
            profile=profile_id,
            ev_op=None if ev_op is None else EvOp(ev_op).name,
            entries=[_entry(e) for e in entries],
        )
        found = [
            EvOpEntry(
                Ev(bytes.fromhex(raw["ev"]["val"][2:]), raw["ev"]["port"]),
                state=CtlEvState(raw["state"]) if raw["state"] else None,
            )
            for raw in result.pop("entries", [])
        ]
        return result, found

    # --- CC profiles --------------------------------------------------------------------------

    def modify_cc_profile(
        self,
        profile_id: int,
        *,
        profile_state: ProfileState | None = None,
        algorithm: str | None = None,
        cc_config: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """``mrc_ctl_modify_cc_profile``; ``cc_config`` keys are the algorithm's parameters
        (NSCC: OCP's ``mrc_ctl_cc_nscc_cfg`` field names and units)."""
        return self.link.request(
            "api.ctl.cc.modify",
            profile=profile_id,
            profile_state=None if profile_state is None else ProfileState(profile_state).name,
            algorithm=algorithm,
            cc_config=cc_config,
        )

    def query_cc_profile(self, profile_id: int) -> dict[str, Any]:
        """``mrc_ctl_query_cc_profile``."""
        return self.link.request("api.ctl.cc.query", profile=profile_id)

    # --- EV events and probes -----------------------------------------------------------------

    def create_ev_event_cq(self, cqe: int, channel: CompChannel | None = None) -> EvEventCQ:
        """``mrc_ctl_create_ev_event_cq``: EV events of every profile whose mask asks."""
        result = self.link.request(
            "api.ctl.ev_cq.create", cqe=cqe, channel=channel.handle if channel else None
        )
        cq = EvEventCQ(self.context, int(result["cq"]), int(result["cqe"]), channel)
        self.context.cqs[cq.handle] = cq
        return cq

    def ep_batch_send_wait(
        self, requests: Sequence[EpRequest], rsp_timeout: int, req_tc: int = 0
    ) -> list[EpResponse]:
        """``mrc_ctl_ep_batch_send_wait`` of EV probes: blocks until every probe is answered
        and returns the answers in arrival order, or raises ``ProbesTimedOut`` (ETIMEDOUT, as
        OCP's call) once ``rsp_timeout`` nanoseconds passed with a probe unanswered; the error
        holds the answers that came and the ``req_id`` of each probe that got none."""
        try:
            result = self.link.request(
                "api.ctl.ep_batch",
                req_tc=req_tc,
                op_type=0,
                rsp_timeout=rsp_timeout,
                req=[
                    {
                        "req_id": r.req_id,
                        "dgid": r.dgid,
                        "sgid": r.sgid,
                        "ev_fmt_mode": FormatMode(r.ev_fmt_mode).name,
                        "req_ev": _ev(r.req_ev),
                    }
                    for r in requests
                ],
            )
        except TimedOut as exc:
            partial = exc.partial
            raise ProbesTimedOut(
                exc.reason,
                exc.field,
                _responses(partial.get("responses", [])),
                [int(req_id) for req_id in partial.get("timed_out", [])],
            ) from None
        return _responses(result["responses"])
