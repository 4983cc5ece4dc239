"""`make bench-controller`: the write-rate pairs and speedup, the failover spread, and the
controller's command line on each target."""

from __future__ import annotations

from pathlib import Path

import pytest

from tools import bench_controller as bench


def write_run(rate: float) -> dict[str, float]:
    return {"seconds": 1.0, "requests": 1, "entries_per_s": rate}


def test_the_speedup_is_the_median_of_the_rounds_paired_ratios():
    runs = {
        bench.BATCHED: [write_run(r) for r in (1000.0, 1200.0, 900.0, 1100.0)],
        bench.SINGLE: [write_run(r) for r in (100.0, 200.0, 100.0, 100.0)],
    }
    orders = [
        [bench.BATCHED, bench.SINGLE],
        [bench.SINGLE, bench.BATCHED],
        [bench.BATCHED, bench.SINGLE],
        [bench.SINGLE, bench.BATCHED],
    ]
    summary = bench.write_rate_summary(runs, orders, max_batch=500)
    assert [pair["ratio"] for pair in summary["pairs"]] == [10.0, 6.0, 9.0, 11.0]
    assert [pair["order"][0] for pair in summary["pairs"]] == [
        bench.BATCHED,
        bench.SINGLE,
        bench.BATCHED,
        bench.SINGLE,
    ]
    assert summary["speedup"] == 9.5
    assert (summary["speedup_spread"]["min"], summary["speedup_spread"]["max"]) == (6.0, 11.0)
    assert summary["speedup_median_by_first"] == {bench.BATCHED: 9.5, bench.SINGLE: 8.5}
    assert summary[bench.BATCHED]["entries_per_s"] == 1050.0
    assert summary[bench.SINGLE]["entries_per_s"] == 100.0
    assert summary["meets_target"] is True


def test_a_speedup_below_five_misses_the_target():
    runs = {bench.BATCHED: [write_run(300.0)], bench.SINGLE: [write_run(100.0)]}
    summary = bench.write_rate_summary(runs, [[bench.BATCHED, bench.SINGLE]], max_batch=500)
    assert summary["speedup"] == 3.0
    assert summary["meets_target"] is False


def cut(to_update: float, duration: float, writes: int = 4) -> dict:
    return {
        "link": "l1:3<->s1:1",
        "cut_to_update_ms": to_update,
        "duration_ms": duration,
        "detection_ms": 1.0,
        "programming_ms": duration - 1.0,
        "writes": writes,
        "complete": True,
    }


def test_the_failover_summary_gives_the_spread_of_every_timing():
    summary = bench.failover_summary([cut(20.0, 12.0), cut(40.0, 14.0), cut(200.0, 30.0)])
    assert summary["cut_to_last_update_ms"] == {
        "n": 3,
        "min": 20.0,
        "median": 40.0,
        "max": 200.0,
        "mean": 86.67,
    }
    assert summary["controller_reported_ms"]["evidence_to_last_update"]["median"] == 14.0
    assert summary["controller_reported_ms"]["programming"]["max"] == 29.0
    assert summary["writes"]["median"] == 4
    assert summary["meets_target"] is True


def test_a_median_over_the_target_does_not_meet_it():
    summary = bench.failover_summary([cut(150.0, 10.0), cut(120.0, 10.0)])
    assert summary["meets_target"] is False


def test_the_linux_controller_is_told_its_namespaces_and_gets_no_probe_interval(tmp_path: Path):
    command = bench.controller_command(
        tmp_path / "t.yaml", tmp_path, tmp_path / "e.jsonl", 10, "linux", "mrcx1"
    )
    assert command[command.index("--target") + 1] == "linux"
    assert command[command.index("--netns-prefix") + 1] == "mrcx1"
    assert "--probe-interval-ms" not in command


def test_the_bmv2_controller_probes_at_the_asked_interval(tmp_path: Path):
    command = bench.controller_command(
        tmp_path / "t.yaml", tmp_path, tmp_path / "e.jsonl", 7, "bmv2", "mrcx1"
    )
    assert command[command.index("--probe-interval-ms") + 1] == "7"
    assert "--target" not in command


@pytest.mark.parametrize("args", [["--rounds", "0"], ["--cuts", "0"]])
def test_zero_rounds_or_cuts_is_a_usage_error(args: list[str], capsys: pytest.CaptureFixture[str]):
    assert bench.main(args) == 2
    assert "at least 1" in capsys.readouterr().err


def busy(busiest: float) -> dict:
    return {"busiest_core": busiest, "verdict": "CPU-bound" if busiest > 0.8 else "calm"}


def test_the_write_speedup_says_cpu_bound_when_a_rounds_core_was_saturated():
    runs = {
        bench.BATCHED: [{**write_run(1000.0), "cores": busy(0.95)}],
        bench.SINGLE: [{**write_run(100.0), "cores": busy(0.5)}],
    }
    summary = bench.write_rate_summary(runs, [[bench.BATCHED, bench.SINGLE]], max_batch=500)
    assert summary["pairs"][0]["cores"] == "CPU-bound"
    assert summary["bottleneck"]["busiest_core_max"] == 0.95
    assert summary["summary"].startswith("batched / single 10, CPU-bound")


def test_a_failover_with_no_saturated_core_says_so_beside_its_median():
    samples = [{**cut(20.0, 12.0), "cores": busy(0.3)}, {**cut(40.0, 14.0), "cores": busy(0.5)}]
    summary = bench.failover_summary(samples)
    assert summary["bottleneck"]["verdict"] == "no core saturated"
    assert summary["summary"] == (
        "median cut to last update 30 ms (no core saturated: busiest core 50 %)"
    )


def test_the_write_rates_progress_steps_are_its_timed_runs_round_by_round():
    assert [step.label for step in bench.write_steps(rounds=2)] == [
        "batched writes, round 0",
        "single writes, round 0",
        "single writes, round 1",
        "batched writes, round 1",
    ]
