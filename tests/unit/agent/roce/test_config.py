"""The RoCE baseline's DCQCN parameters: the paper's defaults, run by the shared rate law with
a NIC's byte counter."""

from __future__ import annotations

import pytest

from agent.roce.config import MAX_CATCH_UP_PERIODS, DcqcnParams


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
