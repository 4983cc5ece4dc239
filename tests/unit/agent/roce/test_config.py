"""The RoCE baseline's DCQCN parameters: the paper's defaults, run by the shared rate law with
a NIC's byte counter, and scaled to a NIC's line rate."""

from __future__ import annotations

import math

import pytest

from agent.roce.config import (
    MAX_CATCH_UP_PERIODS,
    MAX_LINE_RATE,
    MIN_BYTE_COUNTER,
    MIN_LINE_RATE,
    DcqcnParams,
)


def test_the_papers_defaults():
    params = DcqcnParams()
    assert params.g == 1 / 256
    assert params.alpha_timer == 55e-6
    assert params.cnp_interval == 50e-6
    assert params.fast_recovery_steps == 5


def test_the_law_runs_these_constants_with_the_byte_counter():
    params = DcqcnParams(g=1 / 16, byte_counter=1000, fast_recovery_steps=3)
    law = params.law()
    assert (law.g, law.byte_counter, law.fast_recovery_steps) == (1 / 16, 1000, 3)
    assert (law.line_rate, law.hyper_increase) == (params.line_rate, params.hyper_increase)
    assert law.catch_up_limit == MAX_CATCH_UP_PERIODS


@pytest.mark.parametrize("name", ["byte_counter", "hyper_increase", "cnp_interval", "g"])
def test_a_nics_rp_needs_every_constant(name):
    with pytest.raises(ValueError, match=name):
        DcqcnParams(**{name: 0})


# --- scaled to a NIC's line rate ------------------------------------------------------------


def test_scaled_to_ten_gigabit_is_the_defaults():
    assert DcqcnParams.scaled_to(DcqcnParams().line_rate) == DcqcnParams()


@pytest.mark.parametrize("line_rate", [50e3, 200e3, 12.5e6, 5e10])
def test_scaling_keeps_the_defaults_proportions_to_the_line_rate_and_its_timers(line_rate):
    params = DcqcnParams.scaled_to(line_rate)
    assert params.line_rate == line_rate
    assert params.min_rate == pytest.approx(line_rate / 1000)
    assert params.additive_increase == pytest.approx(line_rate / 250)
    assert params.hyper_increase == pytest.approx(line_rate / 25)
    default = DcqcnParams()
    assert params.byte_counter == max(
        MIN_BYTE_COUNTER, round(default.byte_counter * line_rate / default.line_rate)
    )
    timers = ("g", "alpha_timer", "rate_timer", "cnp_interval", "fast_recovery_steps")
    assert [getattr(params, n) for n in timers] == [getattr(default, n) for n in timers]


@pytest.mark.parametrize("sharers", [2, 16, 64])
def test_qps_sharing_a_port_each_run_at_their_even_share_and_keep_the_ports_constants(sharers):
    port = DcqcnParams.scaled_to(55e3)
    shared = DcqcnParams.scaled_to(55e3, sharers)
    assert shared.line_rate == pytest.approx(port.line_rate / sharers)
    assert shared.min_rate == min(port.min_rate, shared.line_rate)
    assert (shared.additive_increase, shared.hyper_increase, shared.byte_counter) == (
        port.additive_increase,
        port.hyper_increase,
        port.byte_counter,
    )


def test_a_port_shared_by_no_qp_is_refused():
    with pytest.raises(ValueError, match="at least one QP"):
        DcqcnParams.scaled_to(55e3, 0)


def test_a_slow_ports_byte_counter_keeps_a_largest_packet_per_stage():
    assert DcqcnParams.scaled_to(50e3).byte_counter == MIN_BYTE_COUNTER == 4096


@pytest.mark.parametrize(
    "line_rate", [0.0, -1e6, MIN_LINE_RATE / 2, MAX_LINE_RATE * 2, math.inf, math.nan]
)
def test_a_line_rate_out_of_bounds_is_refused_in_bits_per_second(line_rate):
    with pytest.raises(ValueError, match=r"line rate must be 100000-1\.6e\+12 bit/s"):
        DcqcnParams.scaled_to(line_rate)
