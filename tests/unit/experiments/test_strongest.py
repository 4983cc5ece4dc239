"""MRC is held against the strongest RoCE contender of each measure, whichever way the measure
improves; contenders without a value are listed last and never chosen."""

from __future__ import annotations

import pytest

from experiments.strongest import against_strongest


def test_the_strongest_on_goodput_is_the_roce_with_the_most() -> None:
    result = against_strongest(
        "goodput",
        {"mrc": 90.0, "single": 95.0, "roce:perftest": 10.0, "roce:adaptive": 45.0},
        higher_is_better=True,
    )
    assert (result.strongest, result.strongest_value) == ("roce:adaptive", 45.0)
    assert result.mrc_over_strongest == pytest.approx(2.0)
    assert result.roce_values == (("roce:adaptive", 45.0), ("roce:perftest", 10.0))
    assert result.line(" Mbit/s") == (
        "goodput (higher is better): strongest RoCE roce:adaptive 45 Mbit/s, mrc 90 Mbit/s, "
        "mrc / strongest 2.00 (others: roce:perftest 10)"
    )


def test_the_strongest_on_a_stall_is_the_roce_with_the_least_and_unknowns_come_last() -> None:
    result = against_strongest(
        "longest stall",
        {"mrc": 0.1, "roce:perftest": 0.5, "roce:nccl": None, "roce:adaptive": 0.2},
        higher_is_better=False,
    )
    assert result.strongest == "roce:adaptive"
    assert result.mrc_over_strongest == pytest.approx(0.5)
    assert [label for label, _ in result.roce_values] == [
        "roce:adaptive",
        "roce:perftest",
        "roce:nccl",
    ]


def test_without_a_roce_value_or_with_a_zero_there_is_no_ratio() -> None:
    none = against_strongest("goodput", {"mrc": 1.0, "roce:nccl": None}, higher_is_better=True)
    assert none.strongest is None and none.mrc_over_strongest is None
    assert none.line().startswith("goodput: no RoCE contender gave a value")
    zero = against_strongest("stall", {"mrc": 0.0, "roce:nccl": 0.0}, higher_is_better=False)
    assert zero.strongest == "roce:nccl" and zero.mrc_over_strongest is None
