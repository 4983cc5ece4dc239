"""Congestion control: NSCC's four cases, at most one cut per base RTT, trims and timeouts;
the DCQCN-like rate controller; the fixed window; selection by name."""

from __future__ import annotations

import pytest

from agent.core.cc import DcqcnRate, FixedWindow, Nscc, NsccCase, create_congestion_control
from agent.core.cc.dcqcn import law_params
from agent.core.cc.dcqcn_law import ReactionPoint
from agent.core.config import DcqcnConfig, MrcConfig, NsccConfig

MSS = 1024
BASE = 100e-6
TARGET = 50e-6


def _nscc(window: int = 100 * MSS) -> Nscc:
    return Nscc(NsccConfig(target_queue_delay=TARGET), window, MSS, 10_000 * MSS)


def test_no_ecn_and_delay_below_target_increases_in_proportion_to_the_headroom():
    empty, half = _nscc(), _nscc()
    empty.on_ack(0.0, MSS, BASE, BASE, ecn=False)
    half.on_ack(0.0, MSS, BASE + TARGET / 2, BASE, ecn=False)
    assert empty.last_case is NsccCase.PROPORTIONAL_INCREASE
    assert empty.window == 101 * MSS  # full headroom: one byte of window per byte acked
    assert half.window == 100 * MSS + MSS // 2


def test_no_ecn_and_delay_above_target_is_a_fair_additive_increase():
    cc = _nscc()
    cc.on_ack(0.0, MSS, BASE + 2 * TARGET, BASE, ecn=False)
    assert cc.last_case is NsccCase.FAIR_INCREASE
    assert cc.window == 100 * MSS + MSS // 100  # one MSS per window's worth of acks


def test_ecn_and_delay_above_target_cuts_multiplicatively_by_g_times_the_excess():
    cc = _nscc()
    rtt = BASE + 3 * TARGET
    cc.on_ack(0.0, MSS, rtt, BASE, ecn=True)
    assert cc.last_case is NsccCase.MULTIPLICATIVE_DECREASE
    expected = 100 * MSS * (1 - 0.8 * (rtt - (BASE + TARGET)) / rtt)
    assert cc.window == int(expected)


def test_ecn_and_delay_below_target_holds_the_window():
    cc = _nscc()
    cc.on_ack(0.0, MSS, BASE + TARGET / 4, BASE, ecn=True)
    assert cc.last_case is NsccCase.HOLD
    assert cc.window == 100 * MSS


def test_at_most_one_cut_per_base_rtt():
    cc = _nscc()
    rtt = BASE + 3 * TARGET
    cc.on_ack(0.0, MSS, rtt, BASE, ecn=True)
    after_first = cc.window
    cc.on_ack(BASE / 2, MSS, rtt, BASE, ecn=True)
    assert cc.window == after_first
    cc.on_ack(BASE * 1.01, MSS, rtt, BASE, ecn=True)
    assert cc.window < after_first


def test_a_trim_cuts_like_a_marked_packet_at_a_full_queue_and_shares_the_cut_clock():
    cc = _nscc()
    cc.on_trim(0.0, last_hop=False, base_rtt=BASE)
    rtt = BASE + 2 * TARGET
    assert cc.window == int(100 * MSS * (1 - 0.8 * (rtt - (BASE + TARGET)) / rtt))
    before = cc.window
    cc.on_trim(BASE / 2, last_hop=True, base_rtt=BASE)
    assert cc.window == before


def test_timeout_halves_and_the_window_stays_within_bounds():
    cc = Nscc(NsccConfig(), 4 * MSS, MSS, 8 * MSS)
    cc.on_timeout(0.0)
    assert cc.window == 2 * MSS
    for _ in range(5):
        cc.on_timeout(0.0)
    assert cc.window == MSS
    for _ in range(100):
        cc.on_ack(0.0, MSS, BASE, BASE, ecn=False)
    assert cc.window == 8 * MSS


def test_dcqcn_cuts_its_rate_on_ecn_then_recovers_towards_the_target():
    config = DcqcnConfig(line_rate=1e9, decrease_interval=50e-6, increase_interval=55e-6)
    cc = DcqcnRate(config, max_window=1 << 20)
    cc.on_ack(0.0, MSS, None, None, ecn=True)
    cut = cc.rate
    assert cut == pytest.approx(0.5e9)  # alpha starts at 1: halve
    cc.on_ack(10e-6, MSS, None, None, ecn=True)
    assert cc.rate == cut  # within the decrease interval
    cc.on_ack(2e-3, MSS, None, None, ecn=False)
    assert cut < cc.rate <= 1e9


def test_dcqcn_paces_packets_at_its_rate():
    cc = DcqcnRate(DcqcnConfig(line_rate=1e6, min_rate=1e3), max_window=1 << 20)
    assert cc.next_send_time(0.0) == 0.0
    cc.on_sent(0.0, 1000)
    assert cc.next_send_time(0.0) == pytest.approx(1e-3)


def test_dcqcn_recovers_fast_for_its_fast_recovery_steps_periods_then_additively():
    config = DcqcnConfig(fast_recovery_steps=2, increase_interval=100e-6)
    law = ReactionPoint(law_params(config))
    law.on_cnp(0.0)
    law.advance(2 * 100e-6 + 1e-9)
    assert law.stage == "fast_recovery"
    law.advance(3 * 100e-6 + 1e-9)
    assert law.stage == "additive_increase"


def test_fixed_window_ignores_every_signal():
    cc = FixedWindow(10 * MSS)
    cc.on_ack(0.0, MSS, 1.0, 0.001, ecn=True)
    cc.on_trim(0.0, False, 0.001)
    cc.on_timeout(0.0)
    assert cc.window == 10 * MSS


@pytest.mark.parametrize(
    ("name", "kind"), [("nscc", Nscc), ("dcqcn", DcqcnRate), ("fixed", FixedWindow)]
)
def test_controllers_are_chosen_by_name(name, kind):
    assert isinstance(create_congestion_control(MrcConfig(congestion_control=name)), kind)


def test_an_unknown_controller_name_is_refused_at_configuration():
    with pytest.raises(ValueError, match="unknown congestion control"):
        MrcConfig(congestion_control="cubic")
