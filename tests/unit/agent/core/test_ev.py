"""EV set and EV health: rotation, SKIP, ASSUMED_BAD with stand-ins, probing back, a
disproved loss reinstating its EV, DENIED, per-plane split and unusable planes."""

from __future__ import annotations

import random
from collections import Counter

import pytest

from agent.core.config import MrcConfig
from agent.core.ev import EvEntry, EvSet
from wire.constants import EvState

INTERVAL = 1e-3


def _set(size: int = 8, planes: int = 1, ipv6: bool = False, **overrides) -> EvSet:
    config = MrcConfig(ev_set_size=size, probe_interval=INTERVAL, **overrides)
    return EvSet(config, planes, ipv6, random.Random(3))


def _rotation(evs: EvSet, count: int) -> list[EvEntry]:
    picked = []
    for _ in range(count):
        entry = evs.next_for_data()
        assert entry is not None
        picked.append(entry)
    return picked


def _answer_all(evs: EvSet, now: float) -> list[EvEntry]:
    """Send the due probes at ``now`` and answer every one; returns the probed EVs."""
    due = evs.probes_due(now, timeout=INTERVAL)
    for entry, seq in due:
        assert evs.on_probe_answered(seq, entry.value)
    return [entry for entry, _seq in due]


def test_set_is_split_evenly_across_planes_with_unique_values_in_the_entropy_range():
    evs = _set(size=256, planes=4)
    entries = evs.active_entries()
    assert Counter(e.plane for e in entries) == {0: 64, 1: 64, 2: 64, 3: 64}
    assert len({e.value for e in entries}) == 256
    for entry in entries:
        assert 0xC000 <= entry.value >> 16 <= 0xFFFF
        assert entry.value & 0xFFFF == 0  # IPv4: only the UDP source port carries entropy
        assert entry.state is EvState.GOOD and entry.home


def test_ipv6_evs_also_use_the_flow_label_half():
    evs = _set(size=64, ipv6=True)
    assert any(e.value & 0xFFFF for e in evs.active_entries())


def test_each_packet_gets_a_different_ev_until_the_rotation_wraps():
    evs = _set(size=8)
    first = _rotation(evs, 8)
    assert len({id(e) for e in first}) == 8
    assert _rotation(evs, 8) == first
    assert all(e.uses == 2 for e in first)


def test_skip_passes_an_ev_over_for_one_rotation_only():
    evs = _set(size=4)
    a, b, c, d = _rotation(evs, 4)
    evs.skip(b)
    assert b.state is EvState.SKIP
    assert _rotation(evs, 3) == [a, c, d]
    assert b.state is EvState.GOOD
    assert _rotation(evs, 4) == [a, b, c, d]


def test_when_every_ev_is_skipped_the_rotation_still_finds_one():
    evs = _set(size=3)
    entries = _rotation(evs, 3)
    for entry in entries:
        evs.skip(entry)
    assert evs.next_for_data() is not None


def test_a_silent_loss_retires_the_ev_and_a_fresh_one_of_the_same_plane_takes_its_slot():
    evs = _set(size=4, planes=2)
    victim = _rotation(evs, 4)[1]
    evs.retire(victim, now=0.0)
    assert victim.state is EvState.ASSUMED_BAD
    standin = victim.slot.current
    assert standin is not victim and not standin.home
    assert standin.plane == victim.plane and standin.value != victim.value
    # the stand-in is on probation: it carries nothing until its first probe is answered
    assert standin.state is EvState.ASSUMED_BAD
    assert standin not in _rotation(evs, 6)


def test_a_stand_in_carries_data_once_its_admission_probe_is_answered():
    evs = _set(size=4)
    victim = _rotation(evs, 4)[0]
    evs.retire(victim, now=0.0)
    standin = victim.slot.current
    assert evs.next_probe_time() == 0.0  # probed at once
    assert _answer_all(evs, now=0.0) == [standin]
    assert standin.state is EvState.GOOD
    assert standin in _rotation(evs, 4)


def test_a_stand_in_that_fails_its_probe_is_replaced_by_another():
    evs = _set(size=4)
    victim = _rotation(evs, 4)[0]
    evs.retire(victim, now=0.0)
    first = victim.slot.current
    evs.probes_due(0.0, timeout=INTERVAL)  # probe sent, never answered
    evs.probes_due(INTERVAL, timeout=INTERVAL)  # round: judged failed
    second = victim.slot.current
    assert second is not first and not second.home
    assert not first.active


def test_a_retired_ev_returns_after_three_consecutive_answered_probes():
    evs = _set(size=4, probe_share=1.0)  # budget enough to probe it from the first round
    victim = _rotation(evs, 4)[2]
    evs.retire(victim, now=0.0)
    _answer_all(evs, now=0.0)  # admits the stand-in
    standin = victim.slot.current
    answered_rounds = 0
    now = 0.0
    while victim.state is not EvState.GOOD:
        now += INTERVAL
        probed = _answer_all(evs, now)
        assert victim in probed
        answered_rounds += 1
        assert answered_rounds <= 3
    assert answered_rounds == 3
    assert victim.slot.current is victim  # took its slot back
    assert not standin.active
    assert victim in _rotation(evs, 4)


def test_a_missed_probe_restarts_the_count():
    evs = _set(size=2, probe_share=1.0)  # budget enough to probe it from the first round
    victim = _rotation(evs, 2)[0]
    evs.retire(victim, now=0.0)
    _answer_all(evs, now=0.0)
    _answer_all(evs, now=INTERVAL)
    _answer_all(evs, now=2 * INTERVAL)
    assert victim.probe_streak == 2
    evs.probes_due(3 * INTERVAL, timeout=INTERVAL)  # sent, lost
    evs.probes_due(4 * INTERVAL, timeout=INTERVAL)  # judged failed, sent again
    assert victim.probe_streak == 0
    assert victim.state is EvState.ASSUMED_BAD


def test_a_late_or_forged_probe_answer_is_not_counted():
    evs = _set(size=2)
    victim = _rotation(evs, 2)[0]
    evs.retire(victim, now=0.0)
    due = evs.probes_due(0.0, timeout=INTERVAL)
    entry, seq = due[0]
    assert not evs.on_probe_answered(seq, entry.value ^ 0x10000)
    assert not evs.on_probe_answered((seq + 100) & 0xFFFF, entry.value)


def test_a_stand_in_that_loses_a_packet_is_dropped_not_probed():
    evs = _set(size=2)
    victim = _rotation(evs, 2)[0]
    evs.retire(victim, now=0.0)
    _answer_all(evs, now=0.0)
    standin = victim.slot.current
    evs.retire(standin, now=0.5 * INTERVAL)
    assert not standin.active
    replacement = victim.slot.current
    assert replacement is not standin and not replacement.home
    probed = {entry.value for entry, _ in evs.probes_due(0.5 * INTERVAL, INTERVAL)}
    assert standin.value not in probed


def test_denied_evs_are_neither_used_nor_probed_until_allowed():
    evs = _set(size=4)
    victim = _rotation(evs, 4)[1]
    evs.deny(victim.plane, victim.value, now=0.0)
    assert victim.state is EvState.DENIED
    _answer_all(evs, now=0.0)
    for step in range(1, 6):
        assert victim not in _answer_all(evs, now=step * INTERVAL)
        assert victim not in _rotation(evs, 4)
    evs.allow(victim.plane, victim.value, now=10 * INTERVAL)
    assert victim.state is EvState.ASSUMED_BAD
    now = 10 * INTERVAL
    for _ in range(4):
        _answer_all(evs, now)
        now += INTERVAL
    assert victim.state is EvState.GOOD and victim.active


def test_evs_of_an_unusable_plane_are_not_used():
    evs = _set(size=8, planes=2)
    evs.set_plane_usable(1, False)
    assert {e.plane for e in _rotation(evs, 16)} == {0}
    evs.set_plane_usable(0, False)
    assert evs.next_for_data() is None
    evs.set_plane_usable(1, True)
    assert {e.plane for e in _rotation(evs, 8)} == {1}


def test_report_lists_slot_holders_and_retired_home_evs():
    evs = _set(size=4)
    victim = _rotation(evs, 4)[0]
    evs.retire(victim, now=0.0)
    report = evs.report()
    assert len(report) == 5
    retired = [r for r in report if r.ev == victim.value]
    assert retired[0].state is EvState.ASSUMED_BAD and retired[0].losses == 1
    assert sum(not r.home for r in report) == 1


def test_an_ev_with_an_unanswered_packet_waits_while_answered_ones_are_free():
    evs = _set(size=4)
    a, b, c, d = _rotation(evs, 4)
    for entry in (c, a):
        evs.release(entry)  # answers arrive for c, then a
    assert _rotation(evs, 2) == [c, a]  # answered EVs first, in the order answers came
    assert b.outstanding == 1 and d.outstanding == 1


def test_when_every_ev_has_a_packet_outstanding_the_plain_rotation_decides():
    evs = _set(size=3)
    first = _rotation(evs, 3)
    assert _rotation(evs, 3) == first
    assert all(e.outstanding == 2 for e in first)


def test_a_disproved_loss_gives_the_retired_home_ev_its_slot_back_without_probes():
    evs = _set(size=4)
    victim = _rotation(evs, 4)[1]
    assert evs.retire(victim, now=0.0)
    reports = victim.loss_reports
    standin = victim.slot.current
    assert evs.reinstate(victim, reports)
    assert victim.state is EvState.GOOD and victim.slot.current is victim
    assert victim.losses == 0  # the loss was not one
    assert not standin.active
    assert not evs.reinstate(victim, reports)  # once


def test_an_ev_that_lost_more_since_its_retirement_stays_retired():
    evs = _set(size=4)
    victim = _rotation(evs, 4)[1]
    assert evs.retire(victim, now=0.0)
    reports = victim.loss_reports
    assert not evs.retire(victim, now=0.0)  # another of its packets, reported while retired
    assert not evs.reinstate(victim, reports)
    assert victim.state is EvState.ASSUMED_BAD


def test_a_released_ev_that_was_retired_meanwhile_does_not_return():
    evs = _set(size=2)
    a, b = _rotation(evs, 2)
    evs.retire(a, now=0.0)
    evs.release(a)
    evs.release(b)
    assert evs.next_for_data() is b


def test_control_picks_do_not_hold_an_ev():
    evs = _set(size=2)
    entry = evs.next_for_control()
    assert entry is not None and entry.outstanding == 0


# --- the probe budget: a dead path's many retired EVs cost a bounded share of packets --------


def _retire_without_data(evs: EvSet, count: int) -> list[EvEntry]:
    """Retire the first ``count`` home EVs (stand-ins need no probe: probes_to_admit=0)."""
    victims = evs.active_entries()[:count]
    for entry in victims:
        evs.retire(entry, now=0.0)
    return victims


def test_a_round_without_data_earns_one_data_packets_worth_and_each_retired_ev_gets_its_turn():
    evs = _set(size=16, probes_to_admit=0, probe_share=0.5)
    victims = _retire_without_data(evs, 8)
    probed: list[EvEntry] = []
    for step in range(1, 17):
        now = evs.next_probe_time()  # the next round, as the connection drives it
        assert now is not None
        due = evs.probes_due(now, timeout=INTERVAL)  # never answered
        assert len(due) == (step % 2 == 0)  # half a probe per idle round: every other round
        probed.extend(entry for entry, _seq in due)
    assert sorted(probed, key=id) == sorted(victims, key=id)  # each once, round robin


def test_data_sent_since_the_last_round_buys_probes_in_proportion():
    evs = _set(size=16, probes_to_admit=0, probe_share=0.25)
    _retire_without_data(evs, 8)
    for _ in range(8):
        entry = evs.next_for_data()
        assert entry is not None
        evs.release(entry)
    assert len(evs.probes_due(INTERVAL, timeout=INTERVAL)) == 2  # 0.25 x 8 data packets
    _rotation(evs, 2)  # 0.5 probe: not enough for one, and data flowed, so no floor either
    assert evs.probes_due(2 * INTERVAL, timeout=INTERVAL) == []
    _rotation(evs, 2)  # the half left over and another half make one
    assert len(evs.probes_due(3 * INTERVAL, timeout=INTERVAL)) == 1


def test_a_retired_ev_whose_probe_was_answered_is_probed_every_round_beyond_the_budget():
    evs = _set(size=16, probes_to_admit=0, probe_share=1.0)  # one other probe per idle round
    _retire_without_data(evs, 8)
    (promising,) = _answer_all(evs, now=INTERVAL)
    for step in range(2, 4):
        due = dict(evs.probes_due(step * INTERVAL, timeout=INTERVAL))
        assert promising in due and len(due) == 2  # it, and the budget's one other
        assert evs.on_probe_answered(due[promising], promising.value)  # the other is lost
    assert promising.state is EvState.GOOD and promising.active


def test_a_stand_in_whose_admission_probe_timed_out_is_not_probed_again():
    evs = _set(size=4)
    victim = _rotation(evs, 4)[0]
    evs.retire(victim, now=0.0)
    first = victim.slot.current
    evs.probes_due(0.0, timeout=INTERVAL)  # admission probe sent, never answered
    probed = [entry for entry, _seq in evs.probes_due(INTERVAL, timeout=INTERVAL)]
    assert first not in probed  # discarded: its value may be drawn again, never re-admitted
    assert victim.slot.current is not first


@pytest.mark.parametrize("share", [0.0, -0.1, 1.5])
def test_a_probe_share_outside_0_to_1_is_refused_since_zero_would_never_revive_an_ev(share):
    with pytest.raises(ValueError, match="probe_share"):
        MrcConfig(probe_share=share)


def test_the_stand_in_drawn_after_a_stand_in_failed_waits_for_the_budget():
    evs = _set(size=16, probe_share=0.5)
    victims = evs.active_entries()[:8]
    for entry in victims:
        evs.retire(entry, now=0.0)
    assert len(evs.probes_due(0.0, timeout=INTERVAL)) == 8  # first stand-ins: probed at once
    now = evs.next_probe_time()
    assert now is not None
    assert evs.probes_due(now, timeout=INTERVAL) == []  # all 8 failed: no storm of redraws
    assert all(
        not v.slot.current.home and v.slot.current.state is EvState.ASSUMED_BAD for v in victims
    )
    now = evs.next_probe_time()
    assert now is not None
    assert len(evs.probes_due(now, timeout=INTERVAL)) == 1  # half a probe per idle round


def test_probe_rounds_come_every_given_interval_so_a_slow_path_does_not_wake_the_agent_per_ms():
    evs = _set()  # probe_interval INTERVAL, far below the 1 s rounds asked for
    evs.retire(evs.active_entries()[0], now=0.0)
    evs.probes_due(0.0, timeout=5.0, interval=1.0)  # the stand-in's probe goes out at once
    first_round = evs.next_probe_time()
    assert first_round is not None
    evs.probes_due(first_round, timeout=5.0, interval=1.0)
    assert evs.next_probe_time() == pytest.approx(first_round + 1.0)


def test_a_stand_in_dropped_before_its_first_probe_is_never_probed_or_admitted():
    # The home EV is on its last probe when the stand-in covering for it loses a packet: the
    # new stand-in waits for its at-once probe, then the home's answer gives it its slot back
    # in the same batch. The dropped stand-in must not be probed after all: its answer would
    # admit it over the home EV, which would then leave the set for good.
    evs = _set(size=4, probes_to_revive=2, probes_to_admit=1, probe_share=1.0)
    home = _rotation(evs, 1)[0]
    evs.release(home)
    evs.retire(home, 0.0)
    first_standin = home.slot.current
    _answer_all(evs, 0.0)  # the stand-in's at-once probe: admitted
    assert first_standin.active and first_standin.state is EvState.GOOD
    (probe,) = [(e, seq) for e, seq in evs.probes_due(INTERVAL, timeout=INTERVAL) if e is home]
    assert evs.on_probe_answered(probe[1], home.value)  # home: one answer of two
    (probe,) = evs.probes_due(2 * INTERVAL, timeout=10 * INTERVAL)  # home: second probe out
    evs.retire(first_standin, 2 * INTERVAL)  # the stand-in loses a packet: a new one is drawn
    second_standin = home.slot.current
    assert second_standin is not first_standin and not second_standin.home
    assert evs.on_probe_answered(probe[1], home.value)  # home revived, second stand-in dropped
    assert home.slot.current is home and home.state is EvState.GOOD
    assert [e for e, _seq in evs.probes_due(3 * INTERVAL, timeout=10 * INTERVAL)] == []
    assert home.slot.current is home and home.state is EvState.GOOD
