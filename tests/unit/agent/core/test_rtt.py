"""RTT estimation and the retransmission timeout: RFC 6298 smoothing, bounds, backoff."""

from __future__ import annotations

import pytest

from agent.core.config import MrcConfig
from agent.core.rtt import RttEstimator


def test_before_any_sample_the_rto_is_the_initial_one():
    config = MrcConfig(rto_initial=0.01, rto_min=0.001)
    assert RttEstimator(config).rto() == pytest.approx(0.01)


def test_first_sample_sets_srtt_and_half_of_it_as_rttvar():
    estimator = RttEstimator(MrcConfig())
    estimator.update(0.002)
    assert estimator.srtt == pytest.approx(0.002)
    assert estimator.rttvar == pytest.approx(0.001)
    assert estimator.min_rtt == pytest.approx(0.002)
    assert estimator.rto() == pytest.approx(0.002 + 4 * 0.001)


def test_later_samples_are_smoothed_and_the_minimum_kept():
    estimator = RttEstimator(MrcConfig())
    estimator.update(0.002)
    estimator.update(0.004)
    assert estimator.srtt == pytest.approx(0.875 * 0.002 + 0.125 * 0.004)
    assert estimator.rttvar == pytest.approx(0.75 * 0.001 + 0.25 * 0.002)
    estimator.update(0.001)
    assert estimator.min_rtt == pytest.approx(0.001)


def test_rto_doubles_per_consecutive_timeout_up_to_the_ceiling():
    config = MrcConfig(rto_min=0.001, rto_max=0.05, rto_backoff=2.0)
    estimator = RttEstimator(config)
    estimator.update(0.001)  # rto = 0.001 + 4 * 0.0005 = 0.003
    assert [estimator.rto(k) for k in range(6)] == pytest.approx(
        [0.003, 0.006, 0.012, 0.024, 0.048, 0.05]
    )


def test_rto_never_drops_below_its_floor():
    config = MrcConfig(rto_min=0.001)
    estimator = RttEstimator(config)
    for _ in range(50):
        estimator.update(10e-6)
    assert estimator.rto() == pytest.approx(0.001)


def test_reorder_window_grows_with_rtt_spread_across_paths():
    steady = RttEstimator(MrcConfig())
    spread = RttEstimator(MrcConfig())
    for _ in range(40):
        steady.update(100e-6)
        spread.update(100e-6)
        spread.update(300e-6)
    assert steady.reorder_window() == pytest.approx(25e-6, rel=0.05)
    assert spread.reorder_window() > 4 * steady.reorder_window()
    assert spread.loss_delay() > spread.srtt


def test_non_positive_samples_are_ignored():
    estimator = RttEstimator(MrcConfig())
    estimator.update(0.0)
    estimator.update(-1.0)
    assert estimator.srtt is None


def test_a_measured_rto_above_the_ceiling_is_kept_the_ceiling_caps_only_the_backoff():
    config = MrcConfig(rto_min=0.001, rto_max=1.0, rto_backoff=2.0)
    estimator = RttEstimator(config)
    estimator.update(2.0)  # a queue holding seconds of packets: rto = 2 + 4 * 1 = 6 s
    assert [estimator.rto(k) for k in range(3)] == pytest.approx([6.0, 6.0, 6.0])


def test_a_widened_reorder_window_grows_by_base_widths_up_to_srtt():
    estimator = RttEstimator(MrcConfig())
    for _ in range(200):  # steady samples: rttvar decays, the base is min_rtt / 4
        estimator.update(0.004)
    base = estimator.reorder_window()
    assert base == pytest.approx(0.001)
    assert estimator.reorder_window(2) == pytest.approx(0.002)
    assert estimator.reorder_window(3) == pytest.approx(0.003)
    assert estimator.reorder_window(10) == pytest.approx(estimator.srtt)
    assert estimator.loss_delay(2) == pytest.approx(estimator.srtt + 0.002)


def test_a_reorder_window_persistence_below_one_is_refused():
    with pytest.raises(ValueError, match="reorder_window_persist"):
        MrcConfig(reorder_window_persist=0)
