"""The veth benches' CPU accounting: each pinned core's busy and stolen share comes right from
/proc/stat, and a run the hypervisor stole too much from is measured again, a bounded number of
times."""

from __future__ import annotations

from typing import Any

import pytest

from hostenv.proc_stat import parse_proc_stat
from tools.cpu_accounting import busy_share, run_unstolen, steal_share

PROC_STAT_BEFORE = """cpu  500 0 300 9000 10 0 20 0 0 0
cpu0 200 0 100 4000 5 0 10 0 0 0
cpu1 300 0 200 5000 5 0 10 0 0 0
intr 12345
"""
PROC_STAT_AFTER = """cpu  900 0 400 9200 10 0 40 0 0 0
cpu0 500 0 150 4010 5 0 30 0 0 0
cpu1 400 0 250 5190 5 0 10 60 0 0
intr 23456
"""


def test_cpu_busy_share_is_the_non_idle_part_of_each_cores_time():
    before = parse_proc_stat(PROC_STAT_BEFORE)
    after = parse_proc_stat(PROC_STAT_AFTER)
    assert set(before) == {0, 1}  # the aggregate "cpu" line is not a core
    # core 0: user +300, system +50, softirq +20 busy; idle +10
    assert busy_share(before, after, 0) == pytest.approx(370 / 380)
    # core 1: user +100, system +50, steal +60 busy; idle +190
    assert busy_share(before, after, 1) == pytest.approx(210 / 400)
    assert busy_share(before, before, 1) == 0.0  # no time passed: nothing to divide


def test_steal_share_is_the_part_of_each_cores_time_the_hypervisor_took():
    before = parse_proc_stat(PROC_STAT_BEFORE)
    after = parse_proc_stat(PROC_STAT_AFTER)
    assert steal_share(before, after, 0) == 0.0
    assert steal_share(before, after, 1) == pytest.approx(60 / 400)
    assert steal_share(before, before, 1) == 0.0


def _stolen(share: float) -> dict[str, Any]:
    return {"goodput_bps": 1.0, "cpu_busy": {"sender_steal": share, "receiver_steal": 0.0}}


def test_a_run_the_hypervisor_stole_from_is_measured_again_and_set_aside():
    runs = iter([_stolen(0.2), _stolen(0.01)])
    retried: list[dict[str, Any]] = []
    kept = run_unstolen(lambda: next(runs), limit=0.05, retries=2, retried=retried)
    assert kept == _stolen(0.01)
    assert retried == [_stolen(0.2)]


def test_a_run_within_the_steal_limit_is_kept_at_once():
    calls: list[int] = []

    def measure() -> dict[str, Any]:
        calls.append(1)
        return _stolen(0.05)

    assert run_unstolen(measure, limit=0.05, retries=2, retried=[]) == _stolen(0.05)
    assert len(calls) == 1


def test_retries_are_bounded_and_the_last_run_is_kept_whatever_its_steal():
    runs = iter([_stolen(0.3), _stolen(0.2), _stolen(0.1), _stolen(0.0)])
    retried: list[dict[str, Any]] = []
    kept = run_unstolen(lambda: next(runs), limit=0.05, retries=2, retried=retried)
    assert kept == _stolen(0.1)
    assert retried == [_stolen(0.3), _stolen(0.2)]
