"""The benchmark: the core figure runs a real transfer and reports consistent figures; the
veth figure's per-core CPU share is read right from /proc/stat, its runs are counter-balanced
(phases and tools alternate which goes first) and each repeat's pairs are reported."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from agent.sim import run_core_benchmark
from tools.bench_agent import (
    busy_share,
    paired,
    per_repeat,
    read_cpu_times,
    run_order,
    run_unstolen,
    steal_share,
)


def test_benchmark_counts_datagrams_and_uses_the_callers_clock():
    ticks = itertools.count()
    result = run_core_benchmark(lambda: float(next(ticks)), messages=4, message_bytes=8192)
    assert result.wall_seconds == 1.0  # exactly one clock reading before and one after
    # Each datagram counted once: 4 x 8 data packets, and answers to them, at least one per
    # message and at most a SACK per data packet plus a completion ACK per message.
    data_packets = 4 * 8192 // 1024
    assert data_packets + 4 <= result.datagrams <= data_packets + data_packets + 4
    assert result.packets_per_second == result.datagrams  # over the one second of the clock
    assert result.simulated_seconds > 0
    assert result.as_dict()["messages"] == 4


def test_benchmark_refuses_meaningless_sizes():
    with pytest.raises(ValueError):
        run_core_benchmark(float, messages=0)


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
    before = read_cpu_times(PROC_STAT_BEFORE)
    after = read_cpu_times(PROC_STAT_AFTER)
    assert set(before) == {0, 1}  # the aggregate "cpu" line is not a core
    # core 0: user +300, system +50, softirq +20 busy; idle +10
    assert busy_share(before, after, 0) == pytest.approx(370 / 380)
    # core 1: user +100, system +50, steal +60 busy; idle +190
    assert busy_share(before, after, 1) == pytest.approx(210 / 400)
    assert busy_share(before, before, 1) == 0.0  # no time passed: nothing to divide


def test_steal_share_is_the_part_of_each_cores_time_the_hypervisor_took():
    before = read_cpu_times(PROC_STAT_BEFORE)
    after = read_cpu_times(PROC_STAT_AFTER)
    assert steal_share(before, after, 0) == 0.0
    assert steal_share(before, after, 1) == pytest.approx(60 / 400)
    assert steal_share(before, before, 1) == 0.0


def _runs(*goodputs: float) -> list[dict[str, float]]:
    return [{"goodput_bps": goodput} for goodput in goodputs]


def test_each_repeat_reports_its_own_ratio_and_retention_in_order():
    runs = {
        "lossless": {
            "iperf3_udp": _runs(2.0, 2.0, 0.0),
            "mrc_perf": _runs(1.0, 0.8, 0.9),
        },
        "lossy": {"iperf3_udp": _runs(1.8, 1.8, 1.8), "mrc_perf": _runs(0.9, 0.6, 0.9)},
    }
    figures = per_repeat(runs)
    assert figures["ratio_to_iperf3_lossless"] == [0.5, 0.4, 0.0]  # no iperf3 goodput: 0
    assert figures["loss_retention"] == pytest.approx([0.9, 0.75, 1.0])
    assert figures["iperf3_loss_retention"] == pytest.approx([0.9, 0.9, 0.0])  # 0: no baseline


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


TOOLS = ["iperf3_udp", "mrc_perf"]


def test_phases_alternate_from_repeat_to_repeat_and_tools_from_block_to_block():
    assert [run_order(TOOLS, repeat) for repeat in range(3)] == [
        [("lossless", ["iperf3_udp", "mrc_perf"]), ("lossy", ["mrc_perf", "iperf3_udp"])],
        [("lossy", ["iperf3_udp", "mrc_perf"]), ("lossless", ["mrc_perf", "iperf3_udp"])],
        [("lossless", ["iperf3_udp", "mrc_perf"]), ("lossy", ["mrc_perf", "iperf3_udp"])],
    ]


def test_over_two_repeats_each_side_of_every_comparison_goes_first_once():
    orders = [run_order(TOOLS, repeat) for repeat in range(2)]
    phase_first = [order[0][0] for order in orders]
    assert sorted(phase_first) == ["lossless", "lossy"]
    for phase in ("lossless", "lossy"):
        tool_first = [dict(order)[phase][0] for order in orders]
        assert sorted(tool_first) == TOOLS


def test_each_repeats_pairs_carry_their_order_and_ratio_with_the_spread():
    orders = [run_order(TOOLS, repeat) for repeat in range(2)]
    runs = {
        "lossless": {"iperf3_udp": _runs(2.0, 4.0), "mrc_perf": _runs(1.0, 3.0)},
        "lossy": {"iperf3_udp": _runs(1.0, 2.0), "mrc_perf": _runs(0.5, 2.4)},
    }
    figures = paired(runs, orders)
    lossless = figures["ratio_to_iperf3_lossless"]
    assert [(pair["order"], pair["ratio"]) for pair in lossless["pairs"]] == [
        (["iperf3_udp", "mrc_perf"], 0.5),
        (["mrc_perf", "iperf3_udp"], 0.75),
    ]
    assert (lossless["ratio"]["min"], lossless["ratio"]["max"]) == (0.5, 0.75)
    assert lossless["ratio"]["median"] == 0.625
    retention = figures["loss_retention"]
    assert [(pair["order"], pair["ratio"]) for pair in retention["pairs"]] == [
        (["lossless", "lossy"], 0.5),
        (["lossy", "lossless"], 0.8),
    ]
    assert [pair["ratio"] for pair in figures["iperf3_loss_retention"]["pairs"]] == [0.5, 0.5]
