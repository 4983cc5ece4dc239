"""Inputs sum exactly in float32 in any order, and verification notices one wrong bit."""

from __future__ import annotations

import numpy as np

from collective.data import expected, fill_input, floats, values, verify
from collective.plans import Buf, Collective, make_plan


def test_inputs_are_small_integers_whose_sums_float32_holds_exactly():
    sums = sum(values(rank, 0, 1000).astype(np.float64) for rank in range(64))
    assert np.all(sums < 2**24)
    reversed_order = np.zeros(1000, dtype=np.float32)
    for rank in reversed(range(64)):
        reversed_order += values(rank, 0, 1000)
    assert np.array_equal(reversed_order, sums.astype(np.float32))


def test_verify_names_the_first_wrong_element():
    plan = make_plan(Collective.ALLREDUCE, 1, 2, 64)
    region = memoryview(bytearray(plan.layout.region_bytes))
    fill_input(region, plan)
    _offset, want = expected(plan)
    out = floats(region, plan.layout, Buf.OUT, 0, 64)
    out[:] = want
    assert verify(region, plan).ok
    out[5] = np.nextafter(want[5], np.float32(np.inf))  # one bit off
    verdict = verify(region, plan)
    assert (verdict.ok, verdict.wrong, verdict.first_wrong) == (False, 1, 5)
    assert "element 5" in verdict.describe()


def test_negative_zero_is_not_zero():
    plan = make_plan(Collective.ALLGATHER, 0, 2, 16)
    region = memoryview(bytearray(plan.layout.region_bytes))
    offset, want = expected(plan)
    assert want[0] == 0  # rank 0's element 0 is 0 by construction
    out = floats(region, plan.layout, Buf.OUT, offset, want.size * 4)
    out[:] = want
    out[0] = -0.0
    assert out[0] == 0, "equal as floats, different as bits"
    assert not verify(region, plan).ok
    out[:] = want
    assert verify(region, plan).ok


def test_all_gather_input_is_only_the_ranks_own_chunk():
    plan = make_plan(Collective.ALLGATHER, 2, 4, 64)
    region = memoryview(bytearray(plan.layout.region_bytes))
    fill_input(region, plan)
    given = floats(region, plan.layout, Buf.IN, 0, 64)
    assert np.all(given[:8] == 0) and np.all(given[12:] == 0)
    assert np.array_equal(given[8:12], values(2, 8, 4))
