"""A bench run's core verdict: each core's busy share over the run's window, ``CPU-bound`` when
one was above the experiments' threshold, and the verdict over the runs behind a figure."""

from __future__ import annotations

from experiments.bottleneck import CPU_BOUND, CPU_BOUND_SHARE
from experiments.cpu import CoreTimes, parse_stat
from tools import core_load
from tools.core_load import (
    NOT_CPU_BOUND,
    UNREAD,
    CoreWindow,
    beside,
    overall,
    verdict,
    window_load,
)

#: user nice system idle iowait irq softirq steal
START = "cpu  0 0 0 0 0 0 0 0\ncpu0 100 0 100 800 0 0 0 0\ncpu1 100 0 100 800 0 0 0 0\n"
#: cpu0: 90 of 100 jiffies busy (5 of them stolen); cpu1: 30 of 100 busy, 20 nice, 50 idle.
END = "cpu  0 0 0 0 0 0 0 0\ncpu0 170 0 115 810 0 0 0 5\ncpu1 110 20 120 850 0 0 0 0\n"


def load(busiest: float | None) -> dict:
    return {"busiest_core": busiest, "verdict": verdict(busiest)}


def test_a_window_records_each_cores_busy_and_steal_share_and_the_verdict():
    record = window_load(parse_stat(START), parse_stat(END))
    assert record["busy"] == {"cpu0": 0.9, "cpu1": 0.3}  # nice time yields: not busy
    assert record["steal"] == {"cpu0": 0.05, "cpu1": 0.0}
    assert record["busiest_core"] == 0.9
    assert record["verdict"] == CPU_BOUND
    assert record["jiffies"] == 100


def test_a_window_shorter_than_a_jiffy_is_unread_not_idle():
    record = window_load(parse_stat(START), parse_stat(START))
    assert record["verdict"] == UNREAD
    assert record["busy"] == {} and record["busiest_core"] is None
    result = overall([record, load(0.5)])
    assert (result["unread_runs"], result["busiest_core_max"]) == (1, 0.5)
    assert result["verdict"] == NOT_CPU_BOUND
    # one core moved one jiffy, the other none: half a jiffy per core is still unread
    one_tick = START.replace("cpu0 100 0 100 800", "cpu0 101 0 100 800")
    assert window_load(parse_stat(START), parse_stat(one_tick))["verdict"] == UNREAD


def test_a_core_at_the_threshold_is_not_saturated_and_one_above_it_is():
    assert verdict(CPU_BOUND_SHARE) == NOT_CPU_BOUND
    assert verdict(CPU_BOUND_SHARE + 0.01) == CPU_BOUND
    assert verdict(None) == NOT_CPU_BOUND


def test_one_cpu_bound_run_makes_the_figure_cpu_bound():
    result = overall([load(0.5), load(0.95), None, load(0.7)])
    assert result["verdict"] == CPU_BOUND
    assert (result["runs"], result["cpu_bound_runs"], result["unread_runs"]) == (4, 1, 1)
    assert result["busiest_core_max"] == 0.95
    assert overall([load(0.5), load(0.7)])["verdict"] == NOT_CPU_BOUND


def test_the_summary_puts_cpu_bound_beside_the_figure_only_when_a_core_was_saturated():
    saturated = beside(0.58, overall([load(0.99), load(0.6)]))
    assert saturated.startswith("0.58, CPU-bound (1 of 2 runs had a core above 80 % busy")
    assert "busiest 99 %" in saturated
    calm = beside(70.8, overall([load(0.4)]), "ms")
    assert calm == "70.8 ms (no core saturated: busiest core 40 %)"
    assert CPU_BOUND not in calm
    assert beside(None, overall([])).startswith("no figure")


def test_a_core_window_reads_the_cores_before_and_after_its_block(monkeypatch):
    readings = iter([parse_stat(START), parse_stat(END)])

    def fake_times() -> dict[str, CoreTimes]:
        return next(readings)

    monkeypatch.setattr(core_load, "core_times", fake_times)
    with CoreWindow() as window:
        assert window.load is None
    assert window.load is not None
    assert window.load["busy"] == {"cpu0": 0.9, "cpu1": 0.3}
