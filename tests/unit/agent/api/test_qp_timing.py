"""What a QP's verbs attributes mean to the core, from OCP's and verbs' definitions: the local
ACK timeout is 1.024 us x 2**timeout; the retries wait one timeout each (linear), then twice
the previous wait each (exponential); 25 exponential retries, or a timeout of 0, never end.
A path MTU enum is 128 << n bytes."""

from __future__ import annotations

import pytest

from agent.api.qp_timing import active_mtu, max_mpr, mtu_bytes, retry_budget

US = 1e-6


@pytest.mark.parametrize(
    ("timeout", "linear", "exponential", "timeouts"),
    [
        # (the first wait) + linear waits + exponential waits 2, 4, ... timeouts
        (10, 0, 0, 1),  # one wait, no retry
        (10, 7, 0, 8),  # verbs' retry_cnt 7: eight waits
        (10, 0, 1, 1 + 2),
        (10, 2, 3, 1 + 2 + 2 + 4 + 8),
        (14, 7, 2, 1 + 7 + 2 + 4),
    ],
)
def test_the_retry_budget_is_the_sum_of_every_wait(timeout, linear, exponential, timeouts):
    unit = 1.024 * US * 2**timeout
    assert retry_budget(timeout, linear, exponential) == pytest.approx(unit * timeouts)


def test_the_largest_timeout_is_seventeen_seconds_a_wait():
    assert retry_budget(24, 0, 0) == pytest.approx(17.18, abs=0.01)


@pytest.mark.parametrize(("timeout", "exponential"), [(0, 0), (0, 3), (8, 25), (24, 25)])
def test_timeout_zero_or_25_exponential_retries_never_give_up(timeout, exponential):
    assert retry_budget(timeout, 7, exponential) is None


@pytest.mark.parametrize(
    ("path_mtu", "size"), [(1, 256), (2, 512), (3, 1024), (4, 2048), (5, 4096)]
)
def test_a_path_mtu_enum_is_its_payload_bytes(path_mtu, size):
    assert mtu_bytes(path_mtu) == size


@pytest.mark.parametrize(
    ("payload", "expected"),
    [(100, 1), (256, 1), (1000, 2), (1024, 3), (1500, 3), (4096, 5), (8192, 5)],
)
def test_a_ports_active_mtu_is_the_largest_that_fits_the_agents_payload(payload, expected):
    assert active_mtu(payload) == expected


@pytest.mark.parametrize(("psn_window", "mpr"), [(4096, 32), (128, 1), (64, 0)])
def test_max_mpr_is_the_psn_window_in_units_of_128_psns(psn_window, mpr):
    assert max_mpr(psn_window) == mpr
