"""The controller's profile state machines, without an agent: INIT -> OFFLINE -> ONLINE ->
OFFLINE -> INIT for format, EV and CC profiles, what each state allows, and the errors that
name the field."""

from __future__ import annotations

import pytest

from agent.api.errors import Busy, InvalidArgument, NotFound, NotSupported, TooBig
from agent.api.profiles import DeviceLimits, ProfileRegistry
from agent.api.types import (
    EV_OP_F_ALL_COPIES,
    CtlEvState,
    Ev,
    EvMode,
    EvOp,
    EvOpEntry,
    FormatMode,
    ProfileState,
)
from agent.core import MrcConfig
from agent.core.ev_expansion import EvField

OFF, ON, INIT = ProfileState.OFFLINE, ProfileState.ONLINE, ProfileState.INIT
FULL = [EvField(16, mask=0xFFFF), EvField(16, mask=0xFFFF)]


def _registry(planes: int = 2, **limits: int) -> ProfileRegistry:
    registry = ProfileRegistry(MrcConfig(), planes, DeviceLimits(**limits))
    registry.modify_format(13, OFF, FormatMode.STEV, [16, 16])
    registry.modify_format(13, ON)
    return registry


def _explicit(registry: ProfileRegistry, count: int = 4, profile: int = 1) -> None:
    registry.modify_ev_profile(profile, state=OFF, mode=EvMode.EXP, fmt_id=13, ev_count=count,
                               fields=FULL)  # fmt: skip
    entries = [EvOpEntry(Ev(b"", 0), Ev.stev(0xC0010000 + (i << 16) + i, i % 2 + 1))
               for i in range(count)]  # fmt: skip
    registry.modify_ev_profile(profile, ev_op=EvOp.REPLACE_EV, entries=entries)


def test_format_profiles_walk_their_states():
    registry = ProfileRegistry(MrcConfig(), 1)
    assert registry.format(7).state is INIT
    with pytest.raises(InvalidArgument) as raised:
        registry.modify_format(7, ON, FormatMode.STEV, [16, 16])
    assert raised.value.field == "profile_state"
    with pytest.raises(InvalidArgument) as raised:
        registry.modify_format(7, OFF)
    assert raised.value.field == "ev_fmt_mode"
    registry.modify_format(7, OFF, FormatMode.UDP)
    with pytest.raises(InvalidArgument) as raised:
        registry.modify_format(7, ON)
    assert raised.value.field == "fmt_fields"
    registry.modify_format(7, widths=[8, 8])
    assert registry.modify_format(7, ON).state is ON
    with pytest.raises(InvalidArgument, match="only its state"):
        registry.modify_format(7, widths=[16])
    registry.modify_format(7, OFF)
    assert registry.modify_format(7, INIT).state is INIT
    assert 7 not in registry.formats


@pytest.mark.parametrize(
    ("mode", "widths", "error", "field"),
    [
        (FormatMode.SRV6, [32, 16], NotSupported, "ev_fmt_mode"),
        (FormatMode.STEV, [16, 16, 8], InvalidArgument, "fmt_fields"),
        (FormatMode.UDP, [16, 1], InvalidArgument, "fmt_fields"),
        (FormatMode.STEV, [4] * 9, TooBig, "fmt_fields"),
        (FormatMode.STEV, [0], InvalidArgument, "fmt_fields[0].width"),
    ],
)
def test_formats_the_device_cannot_carry_are_refused(mode, widths, error, field):
    registry = ProfileRegistry(MrcConfig(), 1)
    with pytest.raises(error) as raised:
        registry.modify_format(3, OFF, mode, widths)
    assert raised.value.field == field
    assert registry.format(3).state is INIT, "nothing changed"


def test_an_explicit_profile_goes_online_once_every_ev_is_populated():
    registry = _registry()
    registry.modify_ev_profile(1, state=OFF, mode=EvMode.EXP, fmt_id=13, ev_count=2, fields=FULL)
    assert registry.ev_profile(1).evs == [None, None]
    with pytest.raises(InvalidArgument, match="2 explicit EVs are unpopulated"):
        registry.modify_ev_profile(1, state=ON)
    first, second = Ev.stev(0xC0010001), Ev.stev(0xC0020002, port=2)
    registry.modify_ev_profile(1, ev_op=EvOp.REPLACE_EV,
                               entries=[EvOpEntry(Ev(b"", 0), first)])  # fmt: skip
    registry.modify_ev_profile(1, ev_op=EvOp.REPLACE_EV, entries=[EvOpEntry(Ev(b"", 0), second)])
    profile, _ = registry.modify_ev_profile(1, state=ON)
    assert profile.state is ON and profile.evs == [first, second]
    binding = registry.bind(100, 1, 0, ipv6=True)
    assert binding.evs == ((first, 0xC0010001), (second, 0xC0020002))
    with pytest.raises(Busy):
        registry.modify_ev_profile(1, state=OFF)
    registry.release(100)
    registry.modify_ev_profile(1, state=OFF)


def test_replacing_every_copy_of_an_ev():
    registry = _registry()
    registry.modify_ev_profile(1, state=OFF, mode=EvMode.EXP, fmt_id=13, ev_count=3, fields=FULL)
    a, b = Ev.stev(0xC0010001), Ev.stev(0xC0020002)
    every_copy = EvOpEntry(Ev(b"", 0), a, flags=EV_OP_F_ALL_COPIES)
    registry.modify_ev_profile(1, ev_op=EvOp.REPLACE_EV, entries=[every_copy])
    assert registry.ev_profile(1).evs == [a, a, a]
    registry.modify_ev_profile(1, ev_op=EvOp.REPLACE_EV, entries=[EvOpEntry(a, b)])
    assert registry.ev_profile(1).evs == [b, a, a]
    with pytest.raises(NotFound) as raised:
        registry.modify_ev_profile(1, ev_op=EvOp.REPLACE_EV,
                                   entries=[EvOpEntry(Ev.stev(0xC0990000), b)])  # fmt: skip
    assert raised.value.field == "ev_op.entries[0].ev"
    with pytest.raises(InvalidArgument) as raised:
        registry.modify_ev_profile(1, ev_op=EvOp.REPLACE_EV,
                                   entries=[EvOpEntry(a, Ev.stev(0xC0030003, port=3))])  # fmt: skip
    assert raised.value.field == "ev_op.entries[0].ev_new.port"


def test_an_online_profile_changes_only_its_state_and_its_evs_states():
    registry = _registry()
    _explicit(registry)
    registry.modify_ev_profile(1, state=ON)
    with pytest.raises(InvalidArgument, match="ONLINE") as raised:
        registry.modify_ev_profile(1, event_mask=int(CtlEvState.GOOD))
    assert raised.value.field == "ev_event_mask"
    ev = registry.ev_profile(1).evs[0]
    assert ev is not None
    _, effects = registry.modify_ev_profile(
        1, ev_op=EvOp.MODIFY_EV_STATE, entries=[EvOpEntry(ev, state=CtlEvState.DENIED)]
    )
    assert effects == [(ev, CtlEvState.DENIED)]
    assert registry.ev_profile(1).denied == {ev}
    with pytest.raises(NotFound) as raised:
        registry.modify_ev_profile(1, ev_op=EvOp.MODIFY_EV_STATE, entries=[
            EvOpEntry(ev, state=CtlEvState.GOOD),
            EvOpEntry(Ev.stev(0xC0FF0000), state=CtlEvState.GOOD),
        ])  # fmt: skip
    assert raised.value.field == "ev_op.entries[1].ev"
    with pytest.raises(InvalidArgument) as raised:
        registry.modify_ev_profile(1, ev_op=EvOp.MODIFY_EV_STATE,
                                   entries=[EvOpEntry(ev, state=CtlEvState.UNKNOWN)])  # fmt: skip
    assert raised.value.field == "ev_op.entries[0].state"


@pytest.mark.parametrize(
    ("settings", "error", "field"),
    [
        ({"ev_count": 5000}, TooBig, "ev_count"),
        ({"ev_count": 0}, InvalidArgument, "ev_count"),
        ({"fields": [EvField(17, mask=1), EvField(15)]}, InvalidArgument, "fields[0].width"),
        ({"fields": [EvField(16, mask=0x1FFFF)]}, InvalidArgument, "fields[0].mask"),
        ({"fields": [EvField(16, init_val=0x10000)]}, InvalidArgument, "fields[0].init_val"),
        ({"fields": [EvField(4, mask=0x3, max_val=4)]}, InvalidArgument, "fields[0].max_val"),
        ({"fields": [EvField(8)] * 3}, InvalidArgument, "fields"),
        ({"fmt_id": None}, InvalidArgument, "ev_fmt_profile_id"),
        ({"event_mask": int(CtlEvState.DENIED)}, InvalidArgument, "ev_event_mask"),
    ],
)
def test_profiles_that_do_not_fit_are_refused_and_name_the_field(settings, error, field):
    registry = _registry()
    arguments = {"mode": EvMode.EXP, "fmt_id": 13, "ev_count": 4, "fields": FULL, **settings}
    with pytest.raises(error) as raised:
        registry.modify_ev_profile(5, state=OFF, **arguments)
    assert raised.value.field == field
    assert registry.ev_profile(5).state is INIT


def test_generated_evs_are_drawn_at_online_round_the_ports():
    registry = _registry()
    tiers = [EvField(16, init_val=0x0100, mask=0xFF, min_val=0, max_val=179), FULL[1]]
    registry.modify_ev_profile(2, state=OFF, mode=EvMode.GEN, fmt_id=13, ev_count=64,
                               fields=tiers, min_active=16)  # fmt: skip
    profile, _ = registry.modify_ev_profile(2, state=ON)
    assert len(set(profile.evs)) == 64
    assert [ev.port for ev in profile.evs if ev][:4] == [1, 2, 1, 2]
    wires = registry.wire_evs(profile, ipv6=True)
    assert all(0x0100 <= value >> 16 <= 0x01B3 for _ev, value in wires)


def test_an_ipv4_agent_refuses_evs_that_differ_only_in_the_flow_label():
    registry = _registry()
    registry.modify_ev_profile(1, state=OFF, mode=EvMode.EXP, fmt_id=13, ev_count=2, fields=FULL)
    for value in (0xC0010001, 0xC0010002):
        registry.modify_ev_profile(1, ev_op=EvOp.REPLACE_EV,
                                   entries=[EvOpEntry(Ev(b"", 0), Ev.stev(value))])  # fmt: skip
    registry.modify_ev_profile(1, state=ON)
    assert len(registry.bind(1, 1, 0, ipv6=True).evs or ()) == 2
    with pytest.raises(InvalidArgument, match="flow label") as raised:
        registry.bind(2, 1, 0, ipv6=False)
    assert raised.value.field == "evs[1]"


def test_the_device_profiles_are_online_and_read_only():
    registry = ProfileRegistry(MrcConfig(ev_set_size=128), 1)
    assert registry.ev_profile(0).ev_count == 128
    assert registry.bind(1, 0, 0, ipv6=False).config.ev_set_size == 128
    with pytest.raises(InvalidArgument):
        registry.modify_ev_profile(0, state=OFF)
    with pytest.raises(InvalidArgument):
        registry.modify_cc_profile(0, state=OFF)
    with pytest.raises(InvalidArgument, match="not ONLINE") as raised:
        registry.bind(2, 9, 0, ipv6=False)
    assert raised.value.field == "ev_profile_id"


def test_cc_profiles_map_ocp_nscc_parameters_and_refuse_the_rest():
    registry = ProfileRegistry(MrcConfig(), 1)
    with pytest.raises(InvalidArgument):
        registry.modify_cc_profile(3, ON, "uet-1.0-nscc", {})
    registry.modify_cc_profile(3, OFF, "uet-1.0-nscc")
    with pytest.raises(InvalidArgument) as raised:
        registry.modify_cc_profile(3, ON)
    assert raised.value.field == "cc_config"
    with pytest.raises(NotSupported) as raised:
        registry.modify_cc_profile(3, config={"qa_threshold": 5})
    assert raised.value.field == "cc_config.qa_threshold"
    with pytest.raises(InvalidArgument) as raised:
        registry.modify_cc_profile(3, config={"colour": 1})
    assert raised.value.field == "cc_config.colour"
    with pytest.raises(InvalidArgument) as raised:
        registry.modify_cc_profile(3, config={"gamma": 1.5})
    assert raised.value.field == "cc_config"
    registry.modify_cc_profile(3, ON, config={"target_delay": 50_000, "gamma": 0.5,
                                                  "base_rtt": 0, "max_cwnd": 1 << 20})  # fmt: skip
    config = registry.bind(1, 0, 3, ipv6=False).config
    assert config.nscc.target_queue_delay == pytest.approx(50e-6)
    assert config.nscc.decrease_gain == 0.5
    assert config.max_window == 1 << 20
    with pytest.raises(Busy):
        registry.modify_cc_profile(3, OFF)
    registry.modify_cc_profile(4, OFF, "testbed-dcqcn", {"line_rate": 1e9})
    registry.modify_cc_profile(4, ON)
    assert registry.bind(2, 0, 4, ipv6=False).config.congestion_control == "dcqcn"
    with pytest.raises(NotSupported) as raised:
        registry.modify_cc_profile(5, OFF, "cubic")
    assert raised.value.field == "algorithm"


def test_device_limits_bound_profiles_and_evs():
    registry = _registry(ev_max_profiles=2, ev_max_count=10)
    registry.modify_ev_profile(1, state=OFF, mode=EvMode.AUTO, ev_count=6)
    with pytest.raises(TooBig, match="only 4 are free"):
        registry.modify_ev_profile(2, state=OFF, mode=EvMode.AUTO, ev_count=5)
    registry.modify_ev_profile(2, state=OFF, mode=EvMode.AUTO, ev_count=4)
    with pytest.raises(TooBig) as raised:
        registry.modify_ev_profile(3, state=OFF, mode=EvMode.AUTO, ev_count=1)
    assert raised.value.field == "id"


def test_a_refused_ev_state_batch_changes_no_ev_state():
    """Every entry is checked before any applies: a batch refused for its second entry leaves
    the first as it was."""
    registry = _registry()
    _explicit(registry)
    registry.modify_ev_profile(1, state=ON)
    first, second = registry.ev_profile(1).evs[:2]
    assert first is not None and second is not None
    registry.modify_ev_profile(
        1, ev_op=EvOp.MODIFY_EV_STATE, entries=[EvOpEntry(first, state=CtlEvState.DENIED)]
    )
    with pytest.raises(NotFound):
        registry.modify_ev_profile(1, ev_op=EvOp.MODIFY_EV_STATE, entries=[
            EvOpEntry(first, state=CtlEvState.GOOD),
            EvOpEntry(Ev.stev(0xC0FF0000), state=CtlEvState.GOOD),
        ])  # fmt: skip
    with pytest.raises(InvalidArgument):
        registry.modify_ev_profile(1, ev_op=EvOp.MODIFY_EV_STATE, entries=[
            EvOpEntry(second, state=CtlEvState.DENIED),
            EvOpEntry(first, state=CtlEvState.UNKNOWN),
        ])  # fmt: skip
    assert registry.ev_profile(1).denied == {first}


def test_ev_states_set_with_a_refused_state_change_are_not_kept():
    registry = _registry()
    _explicit(registry)
    registry.modify_ev_profile(1, state=ON)
    registry.bind(7, 1, 0, ipv6=True)
    ev = registry.ev_profile(1).evs[0]
    assert ev is not None
    with pytest.raises(Busy):
        registry.modify_ev_profile(1, state=OFF, ev_op=EvOp.MODIFY_EV_STATE,
                                   entries=[EvOpEntry(ev, state=CtlEvState.DENIED)])  # fmt: skip
    assert registry.ev_profile(1).denied == set()
