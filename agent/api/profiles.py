"""The controller's profiles and their state machines: EV format profiles, EV profiles, CC
profiles, and the device limits they are checked against. Pure logic: the agent's API
service (``agent.api.service``) applies what it decides to live QPs.

Every profile is INIT until configured, and moves INIT -> OFFLINE -> ONLINE -> OFFLINE ->
INIT as OCP's ``mrc_ctl.h`` describes:

* a **format profile** goes OFFLINE with its mode (fields may come along), ONLINE once it has
  fields; ONLINE, only its state may change, and not while an ONLINE EV profile uses it;
* an **EV profile** goes OFFLINE with its mode and count, and for explicit and generated
  modes its format profile and fields (an explicit array then starts all unpopulated); it
  goes ONLINE once its format is ONLINE, its fields fit that format, every explicit EV is
  populated and ``ev_min_active <= ev_count``; generated EVs are drawn then. ONLINE, only its
  state (not while QPs use it) and its EVs' states may change: the device does not advertise
  ``MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE``;
* a **CC profile** goes OFFLINE with its algorithm, ONLINE with its configuration; ONLINE,
  only its state may change, and not while QPs use it.

Profile 0 of each kind is the device's own and always ONLINE: EV profile 0 is AUTO (the
agent's random source ports, as many as its ``ev_set_size``), CC profile 0 is NSCC with the
agent's defaults. Applications that name no profile get them; controllers cannot change them.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from agent.api.cc_config import cc_algorithms, cc_config
from agent.api.errors import Busy, InvalidArgument, NotFound, NotSupported, TooBig
from agent.api.types import (
    EV_OP_F_ALL_COPIES,
    OPT_EP_OP_EV_PROBE,
    OPT_EV_EVENT,
    OPT_EV_EVENT_PRECISE_DROP_CNT,
    CtlEvState,
    Ev,
    EvMode,
    EvOp,
    EvOpEntry,
    FormatMode,
    ProfileState,
)
from agent.core.config import MrcConfig
from agent.core.ev_expansion import (
    MODE_MAX_BITS,
    EvField,
    ProfileError,
    check_fields,
    check_format,
    expand,
    generate,
    wire_ev,
)

_U64: Final = (1 << 64) - 1


@dataclass(frozen=True, slots=True)
class DeviceLimits:
    """What the device allows (``mrc_ctl_device_attr``'s EV and CC parts)."""

    ev_max_fmt_profiles: int = 16
    ev_max_profiles: int = 64
    ev_max_count: int = 1 << 16
    ev_max_count_profile: int = 4096
    ev_count_align: int = 1
    ev_max_width: int = 32
    ev_max_fmt_fields: int = 8
    ev_fmt_mode_mask: int = FormatMode.STEV | FormatMode.UDP
    ev_mode_mask: int = EvMode.AUTO | EvMode.EXP | EvMode.GEN
    ev_op_max_entries: int = 4096
    cc_max_profiles: int = 16
    opt_attr: int = OPT_EV_EVENT | OPT_EV_EVENT_PRECISE_DROP_CNT | OPT_EP_OP_EV_PROBE

    def to_json(self, ev_free_count: int) -> dict[str, Any]:
        """The EV and CC parts of ``mrc_ctl_device_attr``."""
        return {
            "ev": {
                "ev_max_fmt_profiles": self.ev_max_fmt_profiles,
                "ev_max_profiles": self.ev_max_profiles,
                "ev_max_count": self.ev_max_count,
                "ev_free_count": ev_free_count,
                "ev_max_count_profile": self.ev_max_count_profile,
                "ev_count_align": self.ev_count_align,
                "ev_max_width": self.ev_max_width,
                "ev_fmt_mode_mask": self.ev_fmt_mode_mask,
                "ev_mode_mask": self.ev_mode_mask,
                "ev_op_max_entries": self.ev_op_max_entries,
            },
            "cc": {"cc_max_profiles": self.cc_max_profiles, "algorithms": list(cc_algorithms())},
            "opt_attr": self.opt_attr,
        }


@dataclass
class FormatProfile:
    """An EV format profile."""

    id: int
    state: ProfileState = ProfileState.INIT
    mode: FormatMode | None = None
    widths: tuple[int, ...] | None = None

    def to_json(self) -> dict[str, Any]:
        """``mrc_ctl_ev_fmt_profile_attr`` as queried."""
        return {
            "id": self.id,
            "cur_profile_state": self.state.name,
            "ev_fmt_mode": self.mode.name if self.mode is not None else None,
            "fmt_fields": [{"width": w} for w in self.widths or ()],
        }


@dataclass
class EvProfile:
    """An EV profile: its settings, its EVs (explicit: ``None`` while unpopulated), which
    EVs the controller denied, and the QPs using it."""

    id: int
    state: ProfileState = ProfileState.INIT
    mode: EvMode | None = None
    fmt_id: int | None = None
    ev_count: int | None = None
    min_active: int = 0
    event_mask: int = 0
    fields: tuple[EvField, ...] | None = None
    evs: list[Ev | None] = field(default_factory=list)
    denied: set[Ev] = field(default_factory=set)
    users: set[int] = field(default_factory=set)
    builtin: bool = False
    seed: int = 0

    def to_json(self) -> dict[str, Any]:
        """``mrc_ctl_ev_profile_attr`` as queried (without the EV array)."""
        return {
            "id": self.id,
            "cur_profile_state": self.state.name,
            "ev_mode": self.mode.name if self.mode is not None else None,
            "ev_fmt_profile_id": self.fmt_id,
            "ev_count": self.ev_count,
            "ev_min_active": self.min_active,
            "ev_event_mask": self.event_mask,
            "fields": [dataclasses.asdict(f) for f in self.fields or ()],
            "qps": len(self.users),
        }


@dataclass
class CcProfile:
    """A CC profile: an algorithm of ``cc_algorithms()`` and its configuration."""

    id: int
    state: ProfileState = ProfileState.INIT
    algorithm: str | None = None
    config: dict[str, Any] | None = None
    users: set[int] = field(default_factory=set)
    builtin: bool = False

    def to_json(self) -> dict[str, Any]:
        """``mrc_ctl_cc_profile_attr`` as queried."""
        return {
            "id": self.id,
            "cur_profile_state": self.state.name,
            "algorithm": self.algorithm,
            "cc_config": self.config,
            "qps": len(self.users),
        }


@dataclass(frozen=True, slots=True)
class Binding:
    """What a QP takes from its profiles: the core configuration, and the EV set as
    (port, compact EV, wire EV) when the profile lists its EVs (None: AUTO)."""

    config: MrcConfig
    evs: tuple[tuple[Ev, int], ...] | None
    min_active: int


def _set_states(profile: EvProfile, effects: Sequence[tuple[Ev, CtlEvState]]) -> None:
    """The EV states a MODIFY_EV_STATE set, as the profile keeps them: which EVs are DENIED
    (GOOD and ASSUMED_BAD lift a denial; on live QPs the caller applies all three)."""
    for ev, state in effects:
        if state is CtlEvState.DENIED:
            profile.denied.add(ev)
        else:
            profile.denied.discard(ev)


def _state(value: object, where: str) -> ProfileState:
    try:
        return value if isinstance(value, ProfileState) else ProfileState[str(value).upper()]
    except KeyError:
        raise InvalidArgument(f"{value!r} is not INIT, OFFLINE or ONLINE", where) from None


def _id(value: int, where: str) -> int:
    if type(value) is not int or not 0 <= value <= _U64:
        raise InvalidArgument(f"profile ids are 64-bit unsigned integers, got {value!r}", where)
    return value


class ProfileRegistry:
    """Every profile of one device, with ``limits`` and the agent's ``base`` config."""

    def __init__(self, base: MrcConfig, planes: int, limits: DeviceLimits | None = None) -> None:
        self.base = base
        self.planes = planes
        self.limits = limits or DeviceLimits()
        self.formats: dict[int, FormatProfile] = {}
        self.ev_profiles: dict[int, EvProfile] = {
            0: EvProfile(0, ProfileState.ONLINE, EvMode.AUTO, None, base.ev_set_size, builtin=True)
        }
        self.cc_profiles: dict[int, CcProfile] = {
            0: CcProfile(0, ProfileState.ONLINE, "uet-1.0-nscc", {}, builtin=True)
        }

    # --- format profiles ------------------------------------------------------------------

    def format(self, profile_id: int) -> FormatProfile:
        """The format profile (a fresh INIT one if never configured)."""
        return self.formats.get(_id(profile_id, "ev_fmt_profile_id"), FormatProfile(profile_id))

    def modify_format(
        self,
        profile_id: int,
        state: ProfileState | str | None = None,
        mode: FormatMode | None = None,
        widths: Sequence[int] | None = None,
    ) -> FormatProfile:
        """``mrc_ctl_modify_ev_fmt_profile``: move to ``state``, set mode and fields."""
        profile = self.format(profile_id)
        target = None if state is None else _state(state, "profile_state")
        if profile.state is ProfileState.ONLINE:
            if mode is not None or widths is not None:
                raise InvalidArgument("an ONLINE format profile changes only its state", "attr")
            if target is ProfileState.OFFLINE:
                users = [
                    p.id
                    for p in self.ev_profiles.values()
                    if p.fmt_id == profile_id and p.state is ProfileState.ONLINE
                ]
                if users:
                    raise Busy(f"ONLINE EV profiles use it: {users}", "profile_state")
                profile.state = ProfileState.OFFLINE
            elif target not in (None, ProfileState.ONLINE):
                raise InvalidArgument("ONLINE goes to OFFLINE first", "profile_state")
            return profile
        if profile.state is ProfileState.INIT and target is not ProfileState.OFFLINE:
            raise InvalidArgument(
                "a format profile in INIT moves to OFFLINE, with its mode", "profile_state"
            )
        if (
            profile.state is ProfileState.INIT
            and profile_id not in self.formats
            and len(self.formats) >= self.limits.ev_max_fmt_profiles
        ):
            raise TooBig(f"at most {self.limits.ev_max_fmt_profiles} format profiles", "id")
        new_mode = mode if mode is not None else profile.mode
        if new_mode is None:
            raise InvalidArgument("a format profile needs its mode to leave INIT", "ev_fmt_mode")
        new_mode = FormatMode(new_mode)
        if not new_mode & self.limits.ev_fmt_mode_mask:
            raise NotSupported(
                f"{new_mode.name} EVs are not offered by this device (ev_fmt_mode_mask)",
                "ev_fmt_mode",
            )
        new_widths = tuple(widths) if widths is not None else profile.widths
        if new_widths is not None:
            if len(new_widths) > self.limits.ev_max_fmt_fields:
                raise TooBig(
                    f"{len(new_widths)} fields, the device takes {self.limits.ev_max_fmt_fields}",
                    "fmt_fields",
                )
            try:
                check_format(
                    new_mode, new_widths, min(MODE_MAX_BITS[new_mode], self.limits.ev_max_width)
                )
            except ProfileError as exc:
                raise InvalidArgument(exc.reason, exc.field) from None
        if target is ProfileState.ONLINE and new_widths is None:
            raise InvalidArgument("ONLINE needs the format's fields", "fmt_fields")
        if target is ProfileState.INIT:
            self.formats.pop(profile_id, None)
            return FormatProfile(profile_id)
        profile.mode, profile.widths = new_mode, new_widths
        if target is not None:
            profile.state = target
        self.formats[profile_id] = profile
        return profile

    # --- EV profiles ----------------------------------------------------------------------

    def ev_profile(self, profile_id: int) -> EvProfile:
        """The EV profile (a fresh INIT one if never configured)."""
        return self.ev_profiles.get(_id(profile_id, "ev_profile_id"), EvProfile(profile_id))

    def modify_ev_profile(
        self,
        profile_id: int,
        *,
        state: ProfileState | str | None = None,
        mode: EvMode | None = None,
        fmt_id: int | None = None,
        ev_count: int | None = None,
        min_active: int | None = None,
        event_mask: int | None = None,
        fields: Sequence[EvField] | None = None,
        ev_op: EvOp | None = None,
        entries: Sequence[EvOpEntry] = (),
    ) -> tuple[EvProfile, list[tuple[Ev, CtlEvState]]]:
        """``mrc_ctl_modify_ev_profile``. Returns the profile and the EV states the controller
        set (MODIFY_EV_STATE), for the caller to apply to the QPs using the profile."""
        profile = self.ev_profile(profile_id)
        if profile.builtin:
            raise InvalidArgument(
                f"EV profile {profile_id} is the device's own; configure another id", "id"
            )
        if ev_op is not None and fields is not None:
            raise InvalidArgument("EV_OP and EV_FIELDS_OP exclude each other", "ev_op")
        target = None if state is None else _state(state, "profile_state")
        settings = {
            "ev_mode": mode,
            "ev_fmt_profile_id": fmt_id,
            "ev_count": ev_count,
            "ev_min_active": min_active,
            "ev_event_mask": event_mask,
            "fields": fields,
        }
        changed = [name for name, value in settings.items() if value is not None]
        if profile.state is ProfileState.ONLINE:
            if changed or (ev_op is not None and ev_op is not EvOp.MODIFY_EV_STATE):
                raise InvalidArgument(
                    f"an ONLINE EV profile changes only its state and its EVs' states "
                    f"(the device does not modify ONLINE profiles): {changed or ev_op}",
                    changed[0] if changed else "ev_op",
                )
            effects = self._ev_op(profile, ev_op, entries) if ev_op is not None else []
            if target is ProfileState.OFFLINE:
                if profile.users:
                    raise Busy(f"{len(profile.users)} QPs use it", "profile_state")
            elif target not in (None, ProfileState.ONLINE):
                raise InvalidArgument("ONLINE goes to OFFLINE first", "profile_state")
            _set_states(profile, effects)
            if target is not None:
                profile.state = target
            return profile, effects
        if profile.state is ProfileState.INIT:
            if target is not ProfileState.OFFLINE:
                raise InvalidArgument(
                    "an EV profile in INIT moves to OFFLINE with its mode and count",
                    "profile_state",
                )
            if profile_id not in self.ev_profiles and (
                len(self.ev_profiles) - 1 >= self.limits.ev_max_profiles
            ):
                raise TooBig(f"at most {self.limits.ev_max_profiles} EV profiles", "id")
        candidate = dataclasses.replace(profile, evs=list(profile.evs), denied=set(profile.denied))
        self._configure(candidate, mode, fmt_id, ev_count, min_active, event_mask, fields)
        if target is ProfileState.INIT:
            self.ev_profiles.pop(profile_id, None)
            return EvProfile(profile_id), []
        effects = self._ev_op(candidate, ev_op, entries) if ev_op is not None else []
        _set_states(candidate, effects)
        if target is ProfileState.ONLINE:
            self._go_online(candidate)
        elif target is not None:
            candidate.state = target
        profile.__dict__.update(candidate.__dict__)
        self.ev_profiles[profile_id] = profile
        return profile, effects

    def _configure(
        self,
        profile: EvProfile,
        mode: EvMode | None,
        fmt_id: int | None,
        ev_count: int | None,
        min_active: int | None,
        event_mask: int | None,
        fields: Sequence[EvField] | None,
    ) -> None:
        limits = self.limits
        if mode is not None:
            try:
                mode = EvMode(mode)
            except ValueError:
                raise InvalidArgument(f"{mode!r} is not AUTO, EXP or GEN", "ev_mode") from None
            if not mode & limits.ev_mode_mask:
                raise NotSupported(f"{mode.name} is not offered", "ev_mode")
            profile.mode = mode
        if profile.mode is None:
            raise InvalidArgument("an EV profile needs its mode", "ev_mode")
        if fmt_id is not None:
            profile.fmt_id = _id(fmt_id, "ev_fmt_profile_id")
        if ev_count is not None:
            if type(ev_count) is not int or ev_count < 1:
                raise InvalidArgument(f"must be at least 1, got {ev_count!r}", "ev_count")
            if ev_count > limits.ev_max_count_profile:
                raise TooBig(
                    f"{ev_count} EVs, more than the device allows per profile "
                    f"({limits.ev_max_count_profile})",
                    "ev_count",
                )
            if ev_count > self.free_evs(profile.id):
                raise TooBig(
                    f"{ev_count} EVs, but only {self.free_evs(profile.id)} are free "
                    f"(ev_max_count {limits.ev_max_count})",
                    "ev_count",
                )
            if profile.mode is EvMode.AUTO and ev_count * 2 > (
                self.base.ev_port_max - self.base.ev_port_min + 1
            ):
                raise TooBig("the source-port range holds too few EVs for that count", "ev_count")
            if ev_count % limits.ev_count_align:
                raise InvalidArgument(f"must be a multiple of {limits.ev_count_align}", "ev_count")
            profile.ev_count = ev_count
            if profile.mode is EvMode.EXP:
                profile.evs = (profile.evs + [None] * ev_count)[:ev_count]
        if profile.ev_count is None:
            raise InvalidArgument("an EV profile needs its count", "ev_count")
        if profile.mode is EvMode.EXP and len(profile.evs) != profile.ev_count:
            profile.evs = (profile.evs + [None] * profile.ev_count)[: profile.ev_count]
        if min_active is not None:
            if type(min_active) is not int or min_active < 0:
                raise InvalidArgument(f"must be >= 0, got {min_active!r}", "ev_min_active")
            profile.min_active = min_active
        if event_mask is not None:
            allowed = CtlEvState.GOOD | CtlEvState.ASSUMED_BAD
            if type(event_mask) is not int or event_mask & ~allowed:
                raise InvalidArgument(
                    "only GOOD and ASSUMED_BAD events are offered", "ev_event_mask"
                )
            profile.event_mask = event_mask
        if fields is not None:
            if len(fields) > limits.ev_max_fmt_fields:
                raise TooBig(f"at most {limits.ev_max_fmt_fields} fields", "fields")
            profile.fields = tuple(fields)
        if profile.mode is not EvMode.AUTO:
            if profile.fmt_id is None:
                raise InvalidArgument(
                    "explicit and generated EVs need a format profile", "ev_fmt_profile_id"
                )
            if profile.fields is None:
                raise InvalidArgument("explicit and generated EVs need fields", "fields")
            fmt = self.format(profile.fmt_id)
            if fmt.widths is not None:
                try:
                    check_fields(fmt.widths, profile.fields, profile.mode)
                except ProfileError as exc:
                    raise InvalidArgument(exc.reason, exc.field) from None

    def free_evs(self, excluding: int | None = None) -> int:
        """EVs the device has left for profiles (every profile's count counts)."""
        used = sum(
            p.ev_count or 0
            for p in self.ev_profiles.values()
            if not p.builtin and p.id != excluding and p.state is not ProfileState.INIT
        )
        return self.limits.ev_max_count - used

    def _go_online(self, profile: EvProfile) -> None:
        if profile.mode is not EvMode.AUTO:
            assert profile.fmt_id is not None and profile.fields is not None
            assert profile.mode is not None
            fmt = self.format(profile.fmt_id)
            if fmt.state is not ProfileState.ONLINE or fmt.widths is None or fmt.mode is None:
                raise InvalidArgument(
                    f"format profile {profile.fmt_id} is {fmt.state.name}, not ONLINE",
                    "ev_fmt_profile_id",
                )
            try:
                check_fields(fmt.widths, profile.fields, profile.mode)
            except ProfileError as exc:
                raise InvalidArgument(exc.reason, exc.field) from None
            if profile.mode is EvMode.GEN:
                assert profile.ev_count is not None
                try:
                    drawn = generate(profile.fields, profile.ev_count, seed=profile.id)
                except ProfileError as exc:
                    raise InvalidArgument(exc.reason, exc.field) from None
                # Generated EVs go round the ports, first EV on port 1 (testbed choice).
                profile.evs = [Ev(ev, index % self.planes + 1) for index, ev in enumerate(drawn)]
            unpopulated = [i for i, ev in enumerate(profile.evs) if ev is None]
            if unpopulated:
                raise InvalidArgument(
                    f"{len(unpopulated)} explicit EVs are unpopulated (first: entry "
                    f"{unpopulated[0]}); REPLACE_EV them before ONLINE",
                    "ev_op",
                )
            for index, ev in enumerate(profile.evs):
                assert ev is not None
                try:
                    expanded = expand(fmt.widths, profile.fields, ev.padded()).expanded
                    wire_ev(fmt.mode, expanded, ipv6=True)
                except ProfileError as exc:
                    raise InvalidArgument(exc.reason, f"evs[{index}]") from None
        if profile.ev_count is not None and profile.min_active > profile.ev_count:
            raise InvalidArgument(
                f"{profile.min_active} is more than ev_count {profile.ev_count}", "ev_min_active"
            )
        profile.state = ProfileState.ONLINE

    def _ev_op(
        self, profile: EvProfile, op: EvOp, entries: Sequence[EvOpEntry]
    ) -> list[tuple[Ev, CtlEvState]]:
        """REPLACE_EV applied to ``profile`` (a candidate the caller keeps only if the whole
        call succeeds); MODIFY_EV_STATE checked, its states returned for ``_set_states``."""
        if len(entries) > self.limits.ev_op_max_entries:
            raise TooBig(f"at most {self.limits.ev_op_max_entries} entries", "ev_op.entries")
        if op is EvOp.REPLACE_EV:
            if profile.mode is not EvMode.EXP:
                raise InvalidArgument("only explicit EVs are replaced", "ev_op")
            for index, entry in enumerate(entries):
                self._replace(profile, entry, f"ev_op.entries[{index}]")
            return []
        if op is EvOp.MODIFY_EV_STATE:
            # Checked whole and applied by the caller once the call cannot fail any more: a
            # refused batch leaves the profile and its live QPs as they were.
            effects: list[tuple[Ev, CtlEvState]] = []
            for index, entry in enumerate(entries):
                where = f"ev_op.entries[{index}]"
                if entry.state not in (CtlEvState.GOOD, CtlEvState.ASSUMED_BAD, CtlEvState.DENIED):
                    raise InvalidArgument(
                        f"set GOOD, ASSUMED_BAD or DENIED, not {entry.state!r}", f"{where}.state"
                    )
                if profile.mode is not EvMode.AUTO and entry.ev not in profile.evs:
                    raise NotFound(
                        f"EV {entry.ev} is not in EV profile {profile.id}", f"{where}.ev"
                    )
                effects.append((entry.ev, entry.state))
            return effects
        raise InvalidArgument(f"{op!r} is a query, not a modification", "ev_op")

    def _replace(self, profile: EvProfile, entry: EvOpEntry, where: str) -> None:
        new = entry.ev_new
        if new is None:
            raise InvalidArgument("REPLACE_EV needs ev_new", f"{where}.ev_new")
        if not 1 <= new.port <= self.planes:
            raise InvalidArgument(
                f"port {new.port}: this device has ports 1-{self.planes}", f"{where}.ev_new.port"
            )
        fmt = self.format(profile.fmt_id) if profile.fmt_id is not None else None
        if fmt is not None and fmt.widths is not None and profile.fields is not None:
            try:
                expand(fmt.widths, profile.fields, new.padded())
            except ProfileError as exc:
                raise InvalidArgument(exc.reason, f"{where}.ev_new") from None
        old = None if entry.ev.port == 0 else entry.ev
        positions = [i for i, ev in enumerate(profile.evs) if ev == old]
        if not positions:
            raise NotFound(
                f"EV {entry.ev} is not in EV profile {profile.id}"
                if old is not None
                else "no unpopulated entry is left",
                f"{where}.ev",
            )
        for position in positions if entry.flags & EV_OP_F_ALL_COPIES else positions[:1]:
            profile.evs[position] = new

    def query_ev_states(self, profile: EvProfile, entries: Sequence[EvOpEntry]) -> None:
        """Check that each entry's EV is in the profile (``NotFound`` names the first not)."""
        if profile.mode is EvMode.AUTO:
            return
        for index, entry in enumerate(entries):
            if entry.ev not in profile.evs:
                raise NotFound(
                    f"EV {entry.ev} is not in EV profile {profile.id}",
                    f"ev_op.entries[{index}].ev",
                )

    # --- CC profiles ----------------------------------------------------------------------

    def cc_profile(self, profile_id: int) -> CcProfile:
        """The CC profile (a fresh INIT one if never configured)."""
        return self.cc_profiles.get(_id(profile_id, "cc_profile_id"), CcProfile(profile_id))

    def modify_cc_profile(
        self,
        profile_id: int,
        state: ProfileState | str | None = None,
        algorithm: str | None = None,
        config: dict[str, Any] | None = None,
    ) -> CcProfile:
        """``mrc_ctl_modify_cc_profile``: move to ``state``, set algorithm and configuration."""
        profile = self.cc_profile(profile_id)
        if profile.builtin:
            raise InvalidArgument(f"CC profile {profile_id} is the device's own", "id")
        target = None if state is None else _state(state, "profile_state")
        if profile.state is ProfileState.ONLINE:
            if algorithm is not None or config is not None:
                raise InvalidArgument(
                    "an ONLINE CC profile changes only its state (the device does not "
                    "modify ONLINE CC profiles)",
                    "cc_config" if config is not None else "algorithm",
                )
            if target is ProfileState.OFFLINE:
                if profile.users:
                    raise Busy(f"{len(profile.users)} QPs use it", "profile_state")
                profile.state = ProfileState.OFFLINE
            elif target not in (None, ProfileState.ONLINE):
                raise InvalidArgument("ONLINE goes to OFFLINE first", "profile_state")
            return profile
        if profile.state is ProfileState.INIT:
            if target is not ProfileState.OFFLINE:
                raise InvalidArgument(
                    "a CC profile in INIT moves to OFFLINE with its algorithm", "profile_state"
                )
            if profile_id not in self.cc_profiles and (
                len(self.cc_profiles) - 1 >= self.limits.cc_max_profiles
            ):
                raise TooBig(f"at most {self.limits.cc_max_profiles} CC profiles", "id")
        new_algorithm = algorithm if algorithm is not None else profile.algorithm
        if new_algorithm is None:
            raise InvalidArgument("a CC profile needs its algorithm", "algorithm")
        if new_algorithm not in cc_algorithms():
            raise NotSupported(
                f"{new_algorithm!r} is not one of {', '.join(cc_algorithms())}", "algorithm"
            )
        new_config = dict(config) if config is not None else profile.config
        if algorithm is not None and config is None and algorithm != profile.algorithm:
            new_config = None
        if new_config is not None:
            cc_config(self.base, new_algorithm, new_config)  # raises naming the bad key
        if target is ProfileState.INIT:
            self.cc_profiles.pop(profile_id, None)
            return CcProfile(profile_id)
        if target is ProfileState.ONLINE and new_config is None:
            raise InvalidArgument("ONLINE needs the algorithm's configuration", "cc_config")
        profile.algorithm, profile.config = new_algorithm, new_config
        if target is not None:
            profile.state = target
        self.cc_profiles[profile_id] = profile
        return profile

    # --- QPs --------------------------------------------------------------------------------

    def bind(self, qp: int, ev_profile_id: int, cc_profile_id: int, ipv6: bool) -> Binding:
        """What QP ``qp`` runs with, from two ONLINE profiles; the profiles count it as a
        user (``release``) so that they cannot go OFFLINE under it."""
        ev_profile = self.ev_profile(ev_profile_id)
        if ev_profile.state is not ProfileState.ONLINE:
            raise InvalidArgument(
                f"EV profile {ev_profile_id} is {ev_profile.state.name}, not ONLINE",
                "ev_profile_id",
            )
        cc_profile = self.cc_profile(cc_profile_id)
        if cc_profile.state is not ProfileState.ONLINE:
            raise InvalidArgument(
                f"CC profile {cc_profile_id} is {cc_profile.state.name}, not ONLINE",
                "cc_profile_id",
            )
        assert cc_profile.algorithm is not None and cc_profile.config is not None
        config = cc_config(self.base, cc_profile.algorithm, cc_profile.config)
        evs: tuple[tuple[Ev, int], ...] | None = None
        if ev_profile.mode is EvMode.AUTO:
            assert ev_profile.ev_count is not None
            config = dataclasses.replace(config, ev_set_size=ev_profile.ev_count)
        else:
            evs = self.wire_evs(ev_profile, ipv6)
        ev_profile.users.add(qp)
        cc_profile.users.add(qp)
        return Binding(config, evs, ev_profile.min_active)

    def wire_evs(self, profile: EvProfile, ipv6: bool) -> tuple[tuple[Ev, int], ...]:
        """The profile's EVs with their wire values (each distinct (port, wire EV) once)."""
        assert profile.fmt_id is not None and profile.fields is not None
        fmt = self.format(profile.fmt_id)
        assert fmt.widths is not None and fmt.mode is not None
        out: list[tuple[Ev, int]] = []
        seen: dict[tuple[int, int], Ev] = {}
        for index, ev in enumerate(profile.evs):
            assert ev is not None
            expanded = expand(fmt.widths, profile.fields, ev.padded()).expanded
            try:
                value = wire_ev(fmt.mode, expanded, ipv6)
            except ProfileError as exc:
                raise InvalidArgument(exc.reason, f"evs[{index}]") from None
            key = (ev.port, value)
            if key in seen:
                if seen[key] != ev:
                    raise InvalidArgument(
                        f"EVs {seen[key]} and {ev} put the same bits on the wire (IPv4 has "
                        f"no flow label: only the UDP source port carries EV bits)",
                        f"evs[{index}]",
                    )
                continue
            seen[key] = ev
            out.append((ev, value))
        return tuple(out)

    def release(self, qp: int, keep: tuple[int, int] | None = None) -> None:
        """QP ``qp`` no longer uses any profile, but the EV and CC profiles ``keep`` names
        (those it just took in their stead)."""
        ev_kept, cc_kept = keep if keep is not None else (None, None)
        for ev_profile in self.ev_profiles.values():
            if ev_profile.id != ev_kept:
                ev_profile.users.discard(qp)
        for cc_profile in self.cc_profiles.values():
            if cc_profile.id != cc_kept:
                cc_profile.users.discard(qp)
