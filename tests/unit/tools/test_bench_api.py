"""``make bench-api``'s schedule and summary: which side runs first at each size of each repeat,
and what the runs add up to (the measuring itself needs root and is ``make bench-api``)."""

from __future__ import annotations

import pytest

from tools.bench_api import (
    SIDES,
    TARGET_SIZE,
    figure,
    parse_args,
    run_order,
    steps,
    summarize,
)


def test_adjacent_sizes_swap_the_first_side_and_every_size_swaps_it_between_repeats():
    sizes = [4096, 65536, 262144]
    first = run_order(sizes, 0)
    second = run_order(sizes, 1)
    assert first == [
        (4096, ["api", "mrc_perf"]),
        (65536, ["mrc_perf", "api"]),
        (262144, ["api", "mrc_perf"]),
    ]
    for (size_a, sides_a), (size_b, sides_b) in zip(first, second, strict=True):
        assert size_a == size_b and sides_b == list(reversed(sides_a))


def test_over_two_repeats_each_size_has_each_side_first_once():
    sizes = [1024, 4096, 16384, 65536]
    firsts = {size: [] for size in sizes}
    for repeat in (0, 1):
        for size, sides in run_order(sizes, repeat):
            firsts[size].append(sides[0])
    assert all(sorted(f) == sorted(SIDES) for f in firsts.values())


def _run(goodput: float, rate: float) -> dict[str, float]:
    return {"goodput_bps": goodput, "messages_per_s": rate}


def test_summary_pairs_the_runs_of_one_repeat_and_takes_the_median_ratio():
    sizes = [TARGET_SIZE]
    orders = [run_order(sizes, 0), run_order(sizes, 1), run_order(sizes, 2)]
    runs = {
        TARGET_SIZE: {
            "api": [_run(80.0, 8.0), _run(90.0, 9.0), _run(50.0, 5.0)],
            "mrc_perf": [_run(100.0, 10.0), _run(100.0, 10.0), _run(100.0, 10.0)],
        }
    }
    entry = summarize(sizes, runs, orders)[str(TARGET_SIZE)]
    ratio = entry["goodput_ratio"]
    assert [p["ratio"] for p in ratio["pairs"]] == [0.8, 0.9, 0.5]
    assert ratio["ratio"]["median"] == 0.8
    assert [p["order"] for p in ratio["pairs"]] == [
        ["api", "mrc_perf"],
        ["mrc_perf", "api"],
        ["api", "mrc_perf"],
    ]
    assert entry["api"]["goodput_bps"] == 80.0 and entry["api"]["messages_per_s"] == 8.0
    assert entry["mrc_perf"]["goodput_spread"]["n"] == 3


@pytest.mark.parametrize(
    "argv",
    [["--sizes", "4"], ["--sizes", "64K"], ["--duration", "0"], ["--tx-depth", "1"]],
)
def test_bad_options_are_refused(argv):
    with pytest.raises(SystemExit):
        parse_args(argv)


def test_sizes_are_read_as_a_comma_separated_list():
    assert parse_args(["--sizes", "1024,0x10000"]).sizes == [1024, 65536]


def test_the_progress_steps_are_the_runs_in_the_order_they_are_made_each_its_duration_long():
    args = parse_args(["--sizes", "4096,65536", "--repeat", "2", "--duration", "2"])
    labels = [step.label for step in steps(args)]
    assert labels == [
        f"{side} {size} B repeat {repeat}"
        for repeat in range(2)
        for size, sides in run_order([4096, 65536], repeat)
        for side in sides
    ]
    assert labels[:2] == ["api 4096 B repeat 0", "mrc_perf 4096 B repeat 0"]
    assert {step.planned_s for step in steps(args)} == {2.0}


def test_a_runs_progress_figure_is_its_goodput_and_message_rate():
    run = {"goodput_bps": 160_101_000.0, "messages_per_s": 4886.2}
    assert figure(run, []) == "goodput 160.101 Mbit/s, 4886 messages/s"
