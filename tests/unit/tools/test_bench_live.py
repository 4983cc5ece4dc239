"""The live view's cost bench: its windows alternate closed and open in ABBA order, and its
report pairs each closed window with the open one of the same pair."""

from __future__ import annotations

import pytest

from tools import bench_live as bench
from tools.bench_live import CLOSED, OPEN


def test_the_windows_run_closed_open_open_closed_and_on():
    assert bench.schedule(3) == [
        (0, CLOSED),
        (0, OPEN),
        (1, OPEN),
        (1, CLOSED),
        (2, CLOSED),
        (2, OPEN),
    ]


def test_fewer_than_two_pairs_are_refused():
    with pytest.raises(ValueError, match="at least 2 pairs"):
        bench.schedule(1)


def window(pair: int, side: str, fraction: float, busiest: float) -> dict:
    verdict = "CPU-bound" if busiest > 0.8 else "no core saturated"
    return {
        "pair": pair,
        "side": side,
        bench.FIGURE: fraction,
        "cores": {"busiest_core": busiest, "verdict": verdict},
    }


def test_each_pair_compares_the_open_window_with_the_closed_one_of_the_same_pair():
    windows = [
        window(0, CLOSED, 0.001, 0.5),
        window(0, OPEN, 0.005, 0.5),
        window(1, OPEN, 0.006, 0.9),
        window(1, CLOSED, 0.002, 0.6),
    ]
    result = bench.summarize(windows)
    assert result["order"] == [CLOSED, OPEN, OPEN, CLOSED]
    assert [pair["order"] for pair in result["pairs"]] == [[CLOSED, OPEN], [OPEN, CLOSED]]
    assert [pair["ratio"] for pair in result["pairs"]] == [5.0, 3.0]
    assert [pair["difference"] for pair in result["pairs"]] == [0.004, 0.004]
    assert result["ratio_open_to_closed"] == 4.0
    assert (result["ratio_spread"]["min"], result["ratio_spread"]["max"]) == (3.0, 5.0)
    assert result["ratio_median_by_first"] == {OPEN: 3.0, CLOSED: 5.0}
    assert result[CLOSED]["median"] == 0.0015
    assert result["bottleneck"]["cpu_bound_runs"] == 1
    assert result["difference_open_minus_closed"]["median"] == 0.004
    assert result["summary"].startswith("page server CPU, open - closed, in cores 0.004, CPU-bound")
    assert result["summary"].endswith("open / closed 4.0")


def test_a_closed_window_of_no_measurable_cpu_leaves_the_pair_without_a_ratio_but_a_difference():
    windows = [
        window(0, CLOSED, 0.0, 0.5),
        window(0, OPEN, 0.003, 0.5),
        window(1, OPEN, 0.004, 0.5),
        window(1, CLOSED, 0.001, 0.5),
    ]
    result = bench.summarize(windows)
    assert [pair["ratio"] for pair in result["pairs"]] == [None, 4.0]
    assert result["ratio_spread"]["n"] == 1
    assert result["difference_open_minus_closed"]["n"] == 2
    assert result["bottleneck"]["verdict"] == "no core saturated"
