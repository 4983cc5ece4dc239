"""The controller's operations in the agent (``mrc_ctl.h``): ports, EV format, EV and CC
profiles, EV event CQs and EV probes. Only privileged clients reach them (``agent.api.dispatch``
checks); profile bookkeeping is ``agent.api.profiles``', live QPs are the service's."""

from __future__ import annotations

from typing import Any

from agent.api.errors import InvalidArgument, NotFound, NotSupported
from agent.api.qp_ops import QpSession
from agent.api.requests import (
    U16,
    U32,
    U64,
    address_field,
    enum_field,
    ev_field,
    int_field,
    list_field,
    opt_int_field,
    required,
)
from agent.api.resources import MAX_PROBE_TIMEOUT_NS, PROTOCOL_VERSION_1
from agent.api.types import (
    CtlEvState,
    Ev,
    EventType,
    EvMode,
    EvOp,
    EvOpEntry,
    FormatMode,
    PortAdminState,
)
from agent.core.ev_expansion import EvField, ProfileError, wire_ev
from agent.io.addresses import format_address
from agent.io.json_lines import Message


class ControllerSession(QpSession):
    """A session's controller operations."""

    # --- controller ---------------------------------------------------------------------------

    def op_ctl_query_device(self, _request: int, _message: Message) -> dict[str, Any]:
        registry = self.service.registry
        return {
            "mrc_ctl_protocol_version": PROTOCOL_VERSION_1,
            **registry.limits.to_json(registry.free_evs()),
            "phy_port_mask": sum(1 << port for port in range(1, self.service.planes + 1)),
        }

    def op_ctl_modify_port(self, _request: int, message: Message) -> dict[str, Any]:
        plane = self._port(message)
        state = enum_field(
            PortAdminState, required(message, "port_admin_state"), "port_admin_state"
        )
        pool = self.runtime.pool
        was_up = pool.plane_up(plane)
        pool.set_plane_admin(plane, state is PortAdminState.ENABLED)
        now_up = pool.plane_up(plane)
        if now_up != was_up:
            kind = EventType.PORT_ACTIVE if now_up else EventType.PORT_ERR
            for session in self.service.sessions.values():
                session.async_event(kind, plane + 1, f"port {plane + 1} admin {state.name}")
        self.runtime.service()
        return self.op_query_port(0, message)

    def op_ctl_fmt_modify(self, _request: int, message: Message) -> dict[str, Any]:
        profile_id = int_field(message, "profile", 0, U64, "ev_fmt_profile_id")
        mode = message.get("ev_fmt_mode")
        widths = None
        if message.get("fmt_fields") is not None:
            raw = list_field(message, "fmt_fields", 64)
            widths = [
                int_field(f, "width", 0, 255, f"fmt_fields[{i}].width")
                if isinstance(f, dict)
                else int_field({"width": f}, "width", 0, 255, f"fmt_fields[{i}]")
                for i, f in enumerate(raw)
            ]
        profile = self.service.registry.modify_format(
            profile_id,
            message.get("profile_state"),
            None if mode is None else enum_field(FormatMode, mode, "ev_fmt_mode"),
            widths,
        )
        return profile.to_json()

    def op_ctl_fmt_query(self, _request: int, message: Message) -> dict[str, Any]:
        profile_id = int_field(message, "profile", 0, U64, "ev_fmt_profile_id")
        return self.service.registry.format(profile_id).to_json()

    def _entries(self, message: Message) -> list[EvOpEntry]:
        entries = []
        limit = self.service.registry.limits.ev_op_max_entries
        for index, raw in enumerate(list_field(message, "entries", limit, "ev_op.entries")):
            where = f"ev_op.entries[{index}]"
            if not isinstance(raw, dict):
                raise InvalidArgument("must be an object", where)
            state = raw.get("state")
            entries.append(
                EvOpEntry(
                    ev=ev_field(raw.get("ev"), f"{where}.ev"),
                    ev_new=None
                    if raw.get("ev_new") is None
                    else ev_field(raw["ev_new"], f"{where}.ev_new"),
                    state=None
                    if state is None
                    else enum_field(CtlEvState, state, f"{where}.state"),
                    flags=int_field(raw, "flags", 0, U32, f"{where}.flags")
                    if "flags" in raw
                    else 0,
                )
            )
        return entries

    def op_ctl_ev_modify(self, _request: int, message: Message) -> dict[str, Any]:
        registry = self.service.registry
        profile_id = int_field(message, "profile", 0, U64, "ev_profile_id")
        fields = None
        if message.get("fields") is not None:
            fields = []
            for index, raw in enumerate(list_field(message, "fields", 64)):
                where = f"fields[{index}]"
                if not isinstance(raw, dict):
                    raise InvalidArgument("must be an object", where)
                unknown = set(raw) - {"width", "init_val", "min_val", "max_val", "mask"}
                if unknown:
                    raise InvalidArgument("unknown key", f"{where}.{sorted(unknown)[0]}")
                values = {
                    key: int_field(raw, key, 0, U32, f"{where}.{key}") if key in raw else 0
                    for key in ("init_val", "min_val", "max_val", "mask")
                }
                fields.append(
                    EvField(width=int_field(raw, "width", 0, U32, f"{where}.width"), **values)
                )
        op = None if message.get("ev_op") is None else enum_field(EvOp, message["ev_op"], "ev_op")
        entries = self._entries(message) if op is not None else []
        profile = registry.ev_profile(profile_id)
        if op is EvOp.MODIFY_EV_STATE and profile.mode is EvMode.AUTO:
            for index, entry in enumerate(entries):
                if not any(
                    entry.ev in qp.wire_of for qp in self.service.qps_of_profile(profile_id)
                ):
                    raise NotFound(
                        f"no QP of AUTO profile {profile_id} has EV {entry.ev}",
                        f"ev_op.entries[{index}].ev",
                    )
        mode = message.get("ev_mode")
        profile, effects = registry.modify_ev_profile(
            profile_id,
            state=message.get("profile_state"),
            mode=None if mode is None else enum_field(EvMode, mode, "ev_mode"),
            fmt_id=opt_int_field(message, "ev_fmt_profile_id"),
            ev_count=opt_int_field(message, "ev_count", 0, U32),
            min_active=opt_int_field(message, "ev_min_active", 0, U32),
            event_mask=opt_int_field(message, "ev_event_mask", 0, U32),
            fields=fields,
            ev_op=op,
            entries=entries,
        )
        if effects:
            self.service.apply_states(profile_id, effects)
        return profile.to_json()

    def op_ctl_ev_query(self, _request: int, message: Message) -> dict[str, Any]:
        registry = self.service.registry
        profile_id = int_field(message, "profile", 0, U64, "ev_profile_id")
        profile = registry.ev_profile(profile_id)
        result = profile.to_json()
        op = None if message.get("ev_op") is None else enum_field(EvOp, message["ev_op"], "ev_op")
        if op is EvOp.QUERY_EV_STATE:
            entries = self._entries(message)
            registry.query_ev_states(profile, entries)
            result["entries"] = [
                {"ev": e.ev.to_json(), "state": int(self.service.aggregate(profile_id, e.ev))}
                for e in entries
            ]
        elif op is EvOp.QUERY_EV_ARRAY:
            evs: list[Ev | None]
            if profile.mode is EvMode.AUTO:
                seen: dict[Ev, None] = {}
                for qp in self.service.qps_of_profile(profile_id):
                    for ev in qp.wire_of:
                        seen.setdefault(ev)
                evs = list(seen)
            else:
                evs = list(profile.evs)
            result["entries"] = [
                {
                    "ev": (ev or Ev(b"", 0)).to_json(),
                    "state": int(self.service.aggregate(profile_id, ev)) if ev else 0,
                }
                for ev in evs
            ]
        elif op is not None:
            raise InvalidArgument(f"{op.name} is a modification, not a query", "ev_op")
        return result

    def op_ctl_cc_modify(self, _request: int, message: Message) -> dict[str, Any]:
        profile_id = int_field(message, "profile", 0, U64, "cc_profile_id")
        config = message.get("cc_config")
        if config is not None and not isinstance(config, dict):
            raise InvalidArgument("must be an object", "cc_config")
        algorithm = message.get("algorithm")
        if algorithm is not None and not isinstance(algorithm, str):
            raise InvalidArgument("must be a string", "algorithm")
        profile = self.service.registry.modify_cc_profile(
            profile_id, message.get("profile_state"), algorithm, config
        )
        return profile.to_json()

    def op_ctl_cc_query(self, _request: int, message: Message) -> dict[str, Any]:
        profile_id = int_field(message, "profile", 0, U64, "cc_profile_id")
        return self.service.registry.cc_profile(profile_id).to_json()

    def op_ctl_ev_cq_create(self, request: int, message: Message) -> dict[str, Any]:
        return self.op_cq_create(request, {**message, "ev_events": True})

    def op_ctl_ep_batch(self, request: int, message: Message) -> None:
        int_field(message, "req_tc", 0, 63)
        if message.get("op_type", 0) != 0:
            raise NotSupported("only EV probes (op_type 0) are offered", "op_type")
        timeout = int_field(message, "rsp_timeout", 1, MAX_PROBE_TIMEOUT_NS)
        raws = list_field(message, "req", 4096)
        if not raws:
            raise InvalidArgument("no request", "req")
        probes: list[tuple[int, int, bytes, int]] = []
        ids: set[int] = set()
        local = self.runtime.local_addresses
        for index, raw in enumerate(raws):
            where = f"req[{index}]"
            if not isinstance(raw, dict):
                raise InvalidArgument("must be an object", where)
            req_id = int_field(raw, "req_id", 0, U16, f"{where}.req_id")
            if req_id in ids:
                raise InvalidArgument(f"req_id {req_id} is used twice", f"{where}.req_id")
            ids.add(req_id)
            ev = ev_field(raw.get("req_ev"), f"{where}.req_ev")
            if not 1 <= ev.port <= self.service.planes:
                raise InvalidArgument(f"ports are 1-{self.service.planes}", f"{where}.req_ev.port")
            plane = ev.port - 1
            mode = enum_field(FormatMode, raw.get("ev_fmt_mode", "STEV"), f"{where}.ev_fmt_mode")
            try:
                value = wire_ev(mode, ev.padded(), self.runtime.ipv6)
            except ProfileError as exc:
                error = NotSupported if mode is FormatMode.SRV6 else InvalidArgument
                raise error(exc.reason, f"{where}.req_ev") from None
            peer = address_field(raw.get("dgid"), f"{where}.dgid", len(local[0]))
            if raw.get("sgid") is not None:
                source = address_field(raw["sgid"], f"{where}.sgid", len(local[0]))
                if source != local[plane]:
                    raise InvalidArgument(
                        f"{format_address(source)} is not port {ev.port}'s address "
                        f"({format_address(local[plane])})",
                        f"{where}.sgid",
                    )
            probes.append((req_id, plane, peer, value))
        self.service.start_probes(self, request, probes, timeout)

    def release(self) -> None:
        """The client is gone: its probes' answers go nowhere."""
        self.service.forget_probes(self)
        super().release()
