"""DCQCN's reaction point and notification point, in the paper's terms: a CNP cuts R_C by
alpha/2 and raises alpha; quiet periods decay alpha and raise the rate in fast recovery,
additive and hyper increase stages, counted by the timer T and the byte counter B (or by the
timer alone, as MRC's controller counts them); a quiet spell counts for at most the catch-up
limit's periods."""

from __future__ import annotations

import dataclasses

import pytest

from agent.core.cc.dcqcn_law import CnpPacer, DcqcnLawParams, ReactionPoint

LINE = 1e9
PARAMS = DcqcnLawParams(
    line_rate=LINE,
    min_rate=1e6,
    g=1 / 16,
    alpha_timer=55e-6,
    rate_timer=100e-6,
    byte_counter=1_000_000,
    fast_recovery_steps=3,
    additive_increase=1e7,
    hyper_increase=1e8,
    catch_up_limit=4096,
)


def started(params: DcqcnLawParams = PARAMS, at: float = 0.0) -> ReactionPoint:
    rp = ReactionPoint(params)
    rp.advance(at)  # the timers start with the first event
    return rp


def test_a_qp_starts_at_line_rate_with_alpha_one():
    rp = started()
    assert (rp.rate, rp.target, rp.alpha) == (LINE, LINE, 1.0)


def test_a_cnp_sets_the_target_to_the_rate_cuts_by_alpha_over_two_and_raises_alpha():
    rp = started()
    rp.on_cnp(0.0)
    assert rp.target == LINE
    assert rp.rate == LINE * (1 - 1.0 / 2)
    assert rp.alpha == pytest.approx((1 - 1 / 16) * 1.0 + 1 / 16)
    alpha = rp.alpha
    rp.on_cnp(1e-6)  # back to back: the NP spaces CNPs, the RP reacts to each
    assert rp.target == LINE / 2
    assert rp.rate == pytest.approx(LINE / 2 * (1 - alpha / 2))
    assert rp.alpha == pytest.approx((1 - 1 / 16) * alpha + 1 / 16)


def test_alpha_decays_by_one_minus_g_each_k_without_cnps():
    rp = started()
    rp.on_cnp(0.0)
    alpha = rp.alpha
    rp.advance(54e-6)
    assert rp.alpha == alpha
    rp.advance(55e-6 * 4 + 1e-9)
    assert rp.alpha == pytest.approx(alpha * (1 - 1 / 16) ** 4)


def test_quiet_periods_recover_fast_then_additively_then_hyper():
    rp = started()
    rp.on_cnp(0.0)
    cut = rp.rate
    # fast recovery: R_C halves its distance to R_T, R_T stays (stages 1 and 2, below F = 3)
    rp.advance(100e-6 + 1e-9)
    assert rp.target == LINE and rp.rate == pytest.approx((cut + LINE) / 2)
    rp.advance(200e-6 + 1e-9)
    assert rp.rate == pytest.approx((cut + 3 * LINE) / 4)
    assert rp.target == LINE and rp.stage == "fast_recovery"
    rp.advance(300e-6 + 1e-9)  # T = 3 = F: additive increase from now on
    assert rp.stage == "additive_increase"


def test_increase_stages_follow_the_timer_and_byte_counts():
    params = dataclasses.replace(PARAMS, byte_counter=1000, fast_recovery_steps=2)
    rp = started(params)
    rp.on_cnp(0.0)
    rp.on_cnp(0.0)  # R_T = R_C = LINE/2 now, well below the line rate
    target = rp.target
    rp.advance(100e-6 + 1e-9)  # T = 1: fast recovery
    assert rp.target == target
    rp.advance(200e-6 + 1e-9)  # T = 2 = F: additive
    assert rp.target == pytest.approx(target + 1e7)
    rp.advance(300e-6 + 1e-9)  # T = 3 > F, BC = 0 <= F: still additive
    assert rp.target == pytest.approx(target + 2e7)
    for _ in range(3):  # BC = 1, 2, 3: the last with both above F -> hyper, i = 1
        rp.on_sent(300e-6 + 1e-9, 1000)
    assert rp.stage == "hyper_increase"
    assert rp.target == pytest.approx(target + 2e7 + 1e7 + 1e7 + 1e8)


def test_the_rate_never_exceeds_the_line_rate_nor_falls_below_the_floor():
    rp = started()
    for index in range(200):
        rp.on_cnp(index * 1e-6)
    assert rp.rate == PARAMS.min_rate
    rp.advance(10.0)  # a long quiet spell: caught up without running every period
    assert rp.rate == LINE and rp.target == LINE


def test_the_timers_start_with_the_first_event_not_at_construction():
    rp = ReactionPoint(PARAMS)
    rp.on_cnp(5.0)
    cut = rp.rate
    rp.advance(5.0 + 99e-6)
    assert rp.rate == cut  # the first rate-timer period ends 100 us after the CNP
    rp.advance(5.0 + 101e-6)
    assert rp.rate > cut


def test_the_np_sends_at_most_one_cnp_per_interval():
    pacer = CnpPacer(50e-6)
    marks = [0.0, 10e-6, 49.9e-6, 50e-6, 60e-6, 100e-6, 200e-6]
    assert [pacer.on_marked(t) for t in marks] == [True, False, False, True, False, True, True]
    assert (pacer.sent, pacer.suppressed) == (4, 3)


def test_without_a_byte_counter_the_timer_alone_counts_and_hyper_increase_never_comes():
    params = dataclasses.replace(PARAMS, byte_counter=0, fast_recovery_steps=1)
    rp = started(params)
    rp.on_cnp(0.0)
    rp.on_cnp(0.0)
    target = rp.target
    for _ in range(100):
        rp.on_sent(0.0, 1 << 20)  # bytes raise nothing
    assert (rp.target, rp.stage) == (target, "fast_recovery")
    rp.advance(500e-6 + 1e-9)  # T = 1 .. 5: additive from T = F = 1 on, never hyper
    assert rp.stage == "additive_increase"
    assert rp.target == pytest.approx(target + 5 * 1e7)


def test_a_quiet_spell_longer_than_the_catch_up_limit_counts_as_that_many_periods():
    limited = started(dataclasses.replace(PARAMS, catch_up_limit=4))
    unlimited = started()
    for rp in (limited, unlimited):
        rp.on_cnp(0.0)
        rp.on_cnp(0.0)
    alpha = limited.alpha
    limited.advance(10 * 100e-6 + 1e-9)  # 18 alpha periods, 10 rate periods: 4 of each count
    assert limited.alpha == pytest.approx(alpha * (1 - 1 / 16) ** 4)
    unlimited.advance(4 * 100e-6 + 1e-9)
    assert limited.rate == pytest.approx(unlimited.rate)
    assert limited.target == pytest.approx(unlimited.target)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"min_rate": 2e9}, "min_rate must not exceed line_rate"),
        ({"g": 0.0}, "g must be in"),
        ({"rate_timer": 0.0}, "rate_timer must be > 0"),
        ({"byte_counter": -1}, "byte_counter must be >= 0"),
        ({"catch_up_limit": 0}, "catch_up_limit must be >= 1"),
    ],
)
def test_constants_the_law_cannot_run_are_refused(change, message):
    with pytest.raises(ValueError, match=message):
        dataclasses.replace(PARAMS, **change)
