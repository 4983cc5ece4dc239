"""The local ACK timer: the verbs one is fixed; the adaptive one follows RFC 6298 from its RTT
samples, never goes below its floor, doubles per timeout up to the verbs timeout and forgets
the backoff on progress."""

from __future__ import annotations

import pytest

from agent.roce.config import RoceConfig
from agent.roce.rto import RetransmitTimer

VERBS_14 = 4.096e-6 * 2**14


def adaptive(**changes) -> RetransmitTimer:
    return RetransmitTimer(RoceConfig(adaptive_retransmission=True, **changes))


def test_the_verbs_timer_is_the_local_ack_timeout_whatever_happens():
    timer = RetransmitTimer(RoceConfig(timeout=14))
    assert not timer.adaptive
    timer.on_sample(0.001)
    timer.on_timeout()
    timer.on_timeout()
    assert timer.rto == pytest.approx(VERBS_14)


def test_before_any_sample_the_adaptive_timer_waits_its_initial_rto():
    assert adaptive(initial_rto=0.02).rto == pytest.approx(0.02)


def test_the_first_sample_sets_srtt_and_half_of_it_as_rttvar():
    timer = adaptive()
    timer.on_sample(0.004)
    assert (timer.srtt, timer.rttvar) == pytest.approx((0.004, 0.002))
    assert timer.rto == pytest.approx(0.004 + 4 * 0.002)


def test_later_samples_are_smoothed_with_rfc_6298s_gains():
    timer = adaptive()
    timer.on_sample(0.004)
    timer.on_sample(0.012)
    rttvar = 0.75 * 0.002 + 0.25 * abs(0.004 - 0.012)
    srtt = 0.875 * 0.004 + 0.125 * 0.012
    assert (timer.srtt, timer.rttvar) == pytest.approx((srtt, rttvar))
    assert timer.rto == pytest.approx(srtt + 4 * rttvar)
    assert timer.samples == 2


def test_the_rto_never_goes_below_the_floor():
    timer = adaptive(min_rto=1e-3)
    for _ in range(50):
        timer.on_sample(10e-6)
    assert timer.rto == pytest.approx(1e-3)


def test_backoff_doubles_up_to_the_verbs_timeout_and_progress_ends_it():
    timer = adaptive(timeout=14)
    timer.on_sample(0.004)  # RTO 12 ms
    waits = []
    for _ in range(5):
        timer.on_timeout()
        waits.append(timer.rto)
    assert waits == pytest.approx([0.024, 0.048, VERBS_14, VERBS_14, VERBS_14])
    timer.on_progress()
    assert timer.rto == pytest.approx(0.012)


def test_a_measured_rto_above_the_verbs_timeout_is_kept_not_cut():
    timer = adaptive(timeout=10)  # 4.2 ms
    timer.on_sample(0.010)
    assert timer.rto == pytest.approx(0.030)
    timer.on_timeout()
    assert timer.rto == pytest.approx(0.030)  # the backoff, not the measurement, is capped


def test_timeout_zero_means_no_timer_even_when_adaptive():
    timer = adaptive(timeout=0)
    timer.on_sample(0.004)
    assert timer.rto is None and not timer.adaptive
