"""The benches' counter-balancing: who goes first in each repeat, what the pairs say together,
and how an interleaved schedule of targets is cut into bring-ups."""

from __future__ import annotations

import pytest

from tools.counterbalance import blocks, interleaved, ordered, paired_summary, spread


def test_two_sides_alternate_which_goes_first_in_the_abba_pattern():
    runs = [side for repeat in range(4) for side in ordered(("A", "B"), repeat)]
    assert "".join(runs) == "ABBAABBA"


def test_over_two_repeats_every_side_has_the_same_mean_position():
    sides = ("a", "b", "c")
    positions: dict[str, list[int]] = {side: [] for side in sides}
    sequence = [side for repeat in range(2) for side in ordered(sides, repeat)]
    for position, side in enumerate(sequence):
        positions[side].append(position)
    assert {side: sum(p) for side, p in positions.items()} == {"a": 5, "b": 5, "c": 5}


def test_a_negative_repeat_is_refused():
    with pytest.raises(ValueError, match="negative"):
        ordered(("A", "B"), -1)


def test_spread_gives_min_median_max_mean_and_count():
    assert spread([3.0, 1.0, 2.0, 10.0]) == {
        "n": 4,
        "min": 1.0,
        "median": 2.5,
        "max": 10.0,
        "mean": 4.0,
    }


def test_spread_of_nothing_is_all_none():
    assert spread([]) == {"n": 0, "min": None, "median": None, "max": None, "mean": None}


def test_paired_summary_keeps_each_pair_and_takes_the_median_of_the_paired_ratios():
    repeats = [
        {"order": ["mrc", "base"], "mrc": 8.0, "base": 10.0},
        {"order": ["base", "mrc"], "mrc": 9.0, "base": 10.0},
        {"order": ["base", "mrc"], "mrc": 12.0, "base": 20.0},
        {"order": ["mrc", "base"], "mrc": 7.0, "base": 10.0},
    ]
    summary = paired_summary(repeats, "mrc", "base")
    assert [pair["ratio"] for pair in summary["pairs"]] == [0.8, 0.9, 0.6, 0.7]
    assert [pair["order"] for pair in summary["pairs"]][1] == ["base", "mrc"]
    assert summary["ratio"]["median"] == 0.75
    assert (summary["ratio"]["min"], summary["ratio"]["max"]) == (0.6, 0.9)
    # the ratio of the medians (10.5 / 10) would say 1.05: pairing is what the headline uses
    assert summary["mrc"]["median"] == 8.5
    assert summary["base"]["median"] == 10.0
    assert summary["ratio_median_by_first"] == {"mrc": 0.75, "base": 0.75}


def test_a_pair_with_a_zero_denominator_has_no_ratio_and_leaves_the_spread_alone():
    repeats = [
        {"order": ["a", "b"], "a": 1.0, "b": 0.0},
        {"order": ["b", "a"], "a": 3.0, "b": 2.0},
    ]
    summary = paired_summary(repeats, "a", "b")
    assert summary["pairs"][0]["ratio"] is None
    assert summary["ratio"]["n"] == 1
    assert summary["ratio"]["median"] == 1.5
    assert summary["ratio_median_by_first"] == {"a": None, "b": 1.5}


def test_paired_summary_refuses_an_order_that_names_other_sides():
    with pytest.raises(ValueError, match="repeat 0"):
        paired_summary([{"order": ["a", "c"], "a": 1.0, "b": 1.0}], "a", "b")


def test_interleaved_runs_every_side_per_repeat_and_alternates_the_first():
    assert interleaved(["bmv2", "linux"], 3) == [
        (0, "bmv2"),
        (0, "linux"),
        (1, "linux"),
        (1, "bmv2"),
        (2, "bmv2"),
        (2, "linux"),
    ]


def test_blocks_join_adjacent_runs_of_one_side_so_they_share_a_bring_up():
    schedule = interleaved(["bmv2", "linux"], 4)
    assert blocks(schedule) == [
        ("bmv2", [0]),
        ("linux", [0, 1]),
        ("bmv2", [1, 2]),
        ("linux", [2, 3]),
        ("bmv2", [3]),
    ]


def test_one_side_is_one_block():
    assert blocks(interleaved(["linux"], 3)) == [("linux", [0, 1, 2])]
    assert blocks([]) == []
