"""A client's operations on the controller's profiles (``mrc_ctl.h``): EV format, EV and CC
profiles, and the EV states a controller reads and sets. The profiles' state machines are
``agent.api.profiles``'; the states on live QPs, ``agent.api.ev_states``'."""

from __future__ import annotations

from typing import Any

from agent.api.errors import InvalidArgument, NotFound
from agent.api.ev_states import EvStates
from agent.api.profiles import ProfileRegistry
from agent.api.requests import (
    U32,
    U64,
    enum_field,
    ev_field,
    int_field,
    list_field,
    opt_int_field,
)
from agent.api.types import CtlEvState, Ev, EvMode, EvOp, EvOpEntry, FormatMode
from agent.core.ev_expansion import EvField
from agent.io.json_lines import Message


class ProfileOps:
    """One privileged client's profile operations."""

    def __init__(self, registry: ProfileRegistry, ev_states: EvStates) -> None:
        self._registry = registry
        self._ev_states = ev_states

    def modify_format(self, message: Message) -> dict[str, Any]:
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
        profile = self._registry.modify_format(
            profile_id,
            message.get("profile_state"),
            None if mode is None else enum_field(FormatMode, mode, "ev_fmt_mode"),
            widths,
        )
        return profile.to_json()

    def query_format(self, message: Message) -> dict[str, Any]:
        profile_id = int_field(message, "profile", 0, U64, "ev_fmt_profile_id")
        return self._registry.format(profile_id).to_json()

    def _entries(self, message: Message) -> list[EvOpEntry]:
        entries = []
        limit = self._registry.limits.ev_op_max_entries
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

    def modify_ev(self, message: Message) -> dict[str, Any]:
        registry = self._registry
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
                    entry.ev in qp.wire_of for qp in self._ev_states.qps_of_profile(profile_id)
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
            self._ev_states.apply(profile_id, effects)
        return profile.to_json()

    def query_ev(self, message: Message) -> dict[str, Any]:
        registry = self._registry
        profile_id = int_field(message, "profile", 0, U64, "ev_profile_id")
        profile = registry.ev_profile(profile_id)
        result = profile.to_json()
        op = None if message.get("ev_op") is None else enum_field(EvOp, message["ev_op"], "ev_op")
        if op is EvOp.QUERY_EV_STATE:
            entries = self._entries(message)
            registry.query_ev_states(profile, entries)
            result["entries"] = [
                {"ev": e.ev.to_json(), "state": int(self._ev_states.aggregate(profile_id, e.ev))}
                for e in entries
            ]
        elif op is EvOp.QUERY_EV_ARRAY:
            evs: list[Ev | None]
            if profile.mode is EvMode.AUTO:
                seen: dict[Ev, None] = {}
                for qp in self._ev_states.qps_of_profile(profile_id):
                    for ev in qp.wire_of:
                        seen.setdefault(ev)
                evs = list(seen)
            else:
                evs = list(profile.evs)
            result["entries"] = [
                {
                    "ev": (ev or Ev(b"", 0)).to_json(),
                    "state": int(self._ev_states.aggregate(profile_id, ev)) if ev else 0,
                }
                for ev in evs
            ]
        elif op is not None:
            raise InvalidArgument(f"{op.name} is a modification, not a query", "ev_op")
        return result

    def modify_cc(self, message: Message) -> dict[str, Any]:
        profile_id = int_field(message, "profile", 0, U64, "cc_profile_id")
        config = message.get("cc_config")
        if config is not None and not isinstance(config, dict):
            raise InvalidArgument("must be an object", "cc_config")
        algorithm = message.get("algorithm")
        if algorithm is not None and not isinstance(algorithm, str):
            raise InvalidArgument("must be a string", "algorithm")
        profile = self._registry.modify_cc_profile(
            profile_id, message.get("profile_state"), algorithm, config
        )
        return profile.to_json()

    def query_cc(self, message: Message) -> dict[str, Any]:
        profile_id = int_field(message, "profile", 0, U64, "cc_profile_id")
        return self._registry.cc_profile(profile_id).to_json()
