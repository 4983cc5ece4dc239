"""`make bench-targets` condenses each target's spray summary into one comparison per target."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.unit.experiments.run_records import Transfers, transfer
from tools import bench_targets


def spray_summary(ratio: float | None, lost: int = 0, completed: bool = True) -> dict:
    mode = {"aggregate_goodput_bps_mean": 4e6, "cpu_busy_fraction_max": 0.4}
    return {
        "figures": {
            "goodput_ratio_mean": ratio,
            "goodput_ratio_min": ratio,
            "goodput_ratio_max": ratio,
            "goodput_ratio_stdev": 0.0,
            "goodput_ratio_mrc_over_single": {"0": ratio},
            "mrc": mode,
            "single": {**mode, "aggregate_goodput_bps_mean": 3e6},
        },
        "invariants": {"bytes_lost": lost, "all_completed": completed},
    }


def test_condense_reports_goodput_per_mode_and_the_ratio_against_the_target() -> None:
    condensed = bench_targets.condense(spray_summary(1.45), Path("/r"))
    assert condensed["aggregate_goodput_bps"] == {"mrc": 4e6, "single": 3e6}
    assert condensed["ratio_mrc_over_single"]["mean"] == 1.45
    assert condensed["meets_target"] is True
    assert condensed["results"] == "/r"


@pytest.mark.parametrize("ratio", [1.1, None])
def test_a_ratio_below_the_target_or_unknown_does_not_meet_it(ratio: float | None) -> None:
    assert bench_targets.condense(spray_summary(ratio), Path("/r"))["meets_target"] is False


def test_lost_bytes_and_incomplete_transfers_are_carried_through() -> None:
    condensed = bench_targets.condense(spray_summary(1.5, lost=10, completed=False), Path("/r"))
    assert condensed["bytes_lost"] == 10
    assert condensed["all_completed"] is False


def test_an_unknown_target_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_targets.main(["--targets", "netfpga"]) == 2
    assert "unknown targets ['netfpga']" in capsys.readouterr().err


def test_tofino_is_refused_because_there_is_no_tofino_switch_here(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert bench_targets.main(["--targets", "linux,tofino"]) == 2
    assert "there is no Tofino switch to start here" in capsys.readouterr().err


def test_the_seed_table_puts_every_targets_ratio_beside_the_order_that_seed_ran_them():
    schedule = [(0, "bmv2"), (0, "linux"), (1, "linux"), (1, "bmv2")]
    table = bench_targets.seed_table(schedule, {"bmv2": [1.5, 1.6], "linux": [1.4, None]})
    assert table == [
        {"seed": 0, "order": ["bmv2", "linux"], "bmv2": 1.5, "linux": 1.4},
        {"seed": 1, "order": ["linux", "bmv2"], "linux": None, "bmv2": 1.6},
    ]


def test_a_seed_a_target_has_no_ratio_for_reads_as_none():
    table = bench_targets.seed_table([(0, "linux"), (1, "linux")], {"linux": [1.2]})
    assert table[1]["linux"] is None


def test_invariants_sum_lost_bytes_and_require_every_transfer_complete():
    ok = transfer(completed=True, lost=0)
    lost = transfer(completed=False, lost=5)
    runs = {"mrc": {0: Transfers({"a": ok, "b": lost})}, "single": {0: Transfers({})}}
    assert bench_targets.invariants(runs) == {"bytes_lost": 5, "all_completed": False}
    clean = {"mrc": {0: Transfers({"a": ok})}}
    assert bench_targets.invariants(clean) == {"bytes_lost": 0, "all_completed": True}
