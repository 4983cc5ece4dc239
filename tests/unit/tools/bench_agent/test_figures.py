"""The veth benchmark's figures: each repeat's own ratio and retention, and each repeat's pairs
with the order they ran in and their spread."""

from __future__ import annotations

import pytest

from tools.bench_agent.figures import RunRecord, paired, per_repeat, summarize
from tools.bench_agent.schedule import run_order

TOOLS = ["iperf3_udp", "mrc_perf"]


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


def test_the_report_gives_medians_ratios_targets_and_every_run_in_the_order_made():
    record = RunRecord(TOOLS)
    goodputs = {
        "lossless": {"iperf3_udp": 2.0, "mrc_perf": 1.2},
        "lossy": {"iperf3_udp": 1.8, "mrc_perf": 1.0},
    }
    for repeat in range(2):
        record.orders.append(run_order(TOOLS, repeat))
        for phase, tools in record.orders[-1]:
            for tool in tools:
                stolen = {"goodput_bps": 0.1, "stolen": True}
                record.add(repeat, phase, tool, {"goodput_bps": goodputs[phase][tool]}, [stolen])
    record.drops = 7
    report = summarize(record, counted_drops=True, steal_limit=0.05)
    assert list(report) == [
        "lossless", "lossy", "ratio_to_iperf3_lossless", "loss_retention",
        "iperf3_loss_retention", "per_repeat", "run_order", "paired", "steal_limit",
        "retried_for_steal", "targets",
    ]  # fmt: skip
    assert report["lossless"]["mrc_perf"]["goodput_bps"] == 1.2
    assert report["lossy"]["nftables_drops"] == 7
    assert report["ratio_to_iperf3_lossless"] == pytest.approx(0.6)
    assert report["targets"]["ratio_to_iperf3_lossless"]["met"] is True
    assert report["targets"]["loss_retention"]["met"] is True  # 1.0 / 1.2 >= 0.8
    assert report["run_order"][:2] == [
        {"repeat": 0, "phase": "lossless", "tool": "iperf3_udp"},
        {"repeat": 0, "phase": "lossless", "tool": "mrc_perf"},
    ]
    assert [run["sequence"] for run in report["lossless"]["iperf3_udp"]["runs"]] == [0, 7]
    assert len(report["retried_for_steal"]) == 8
    assert report["retried_for_steal"][0] == {
        "tool": "iperf3_udp", "phase": "lossless", "repeat": 0, "goodput_bps": 0.1, "stolen": True
    }  # fmt: skip


def test_netem_loss_reports_no_rule_drops():
    record = RunRecord(TOOLS)
    record.orders.append(run_order(TOOLS, 0))
    for phase, tools in record.orders[-1]:
        for tool in tools:
            record.add(0, phase, tool, {"goodput_bps": 1.0}, [])
    assert "nftables_drops" not in summarize(record, counted_drops=False, steal_limit=1.0)["lossy"]
