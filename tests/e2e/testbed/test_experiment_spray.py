"""``make experiment NAME=spray``, test-sized (4 flows of the permutation, 128 KiB each, two
seeds), on every target whose tools are present: every flow completes without losing a byte
under MRC and single path, and under RoCE (adaptive profile over 1, 4 and 16 QPs) completes
losing nothing or fails with its error recorded; the modes take turns going first (seed 1
runs them in reverse), the spine
links' loads are read (from member counters on bmv2, from port tx counters on linux; a link
whose counters a loaded machine failed to read is recorded as unread), every run records
what limited it, and the results directory is complete and well-formed. The MRC /
single-path goodput ratio is reported with its spread, each seed's pair and its verdict
(CPU-bound or not), and MRC is set against the strongest RoCE contender; no ratio is
asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.bottleneck import CPU_BOUND
from experiments.results import MODES
from experiments.transports import is_roce
from tests.e2e.testbed.experiment_run import FORWARDED_COUNTERS, VERDICTS, run_experiment
from topologies import load_topology

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]

FLOWS = 4
SEEDS = 2
ROCE = ("roce:adaptive:1qp", "roce:adaptive:4qp", "roce:adaptive:16qp")
ORDER = ["mrc", "single", *ROCE]


def test_spray_loses_nothing_completes_and_writes_well_formed_results(
    leaf_spine_4x4_file: Path, tmp_path: Path, testbed_target: str
) -> None:
    proc, directory, summary = run_experiment(
        "spray",
        leaf_spine_4x4_file,
        tmp_path / "results",
        {"flows": str(FLOWS), "flow_bytes": str(128 * 1024)},
        testbed_target,
        seeds=SEEDS,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["pngs"] == ["flows.png", "links.png"]
    assert summary["order"]["per_seed"] == {"0": ORDER, "1": ORDER[::-1]}
    assert len(summary["bring_ups"]) == 1  # both modes share the network
    figures = summary["figures"]
    ratios = figures["goodput_ratio_mrc_over_single"]
    assert len(ratios) == SEEDS and all(r is not None and r > 0 for r in ratios), ratios
    assert figures["goodput_ratio_min"] == min(ratios)
    assert figures["goodput_ratio_max"] == max(ratios)
    assert figures["goodput_ratio_mean"] == pytest.approx(sum(ratios) / SEEDS)
    assert figures["goodput_ratio_stdev"] is not None
    assert [pair["order"] for pair in figures["pairs"]] == [ORDER, ORDER[::-1]]
    verdict = figures["goodput_ratio_bottleneck"]
    assert verdict in VERDICTS
    (ratio_line,) = [
        line
        for line in (directory / "summary.txt").read_text().splitlines()
        if line.startswith("aggregate goodput MRC / single")
    ]
    assert f"over {SEEDS} seeds" in ratio_line
    assert f"[{verdict}: " in ratio_line
    assert ("not a link measure" in ratio_line) == (verdict == CPU_BOUND), ratio_line
    topology = load_topology(str(leaf_spine_4x4_file))
    for mode in MODES:
        run = summary["runs"][mode]["0"]
        assert len(run["transfers"]) == FLOWS
        for name, transfer in run["transfers"].items():
            assert transfer["bytes_lost"] == 0, (mode, name, transfer)
            assert transfer["completed"], (mode, name, transfer)
            assert transfer["bytes_delivered"] == transfer["bytes_sent"] == 128 * 1024
        assert run["aggregate_goodput_bps"] > 0
        # every spine link has a load, or is recorded as unread (counters under load)
        assert sorted(run["link_packets"]) == sorted(str(link.id) for link in topology.links)
        assert run["link_counters"] == [FORWARDED_COUNTERS[testbed_target]], run
        assert sum(load or 0 for load in run["link_packets"].values()) > 0, run
    for mode in ROCE:
        run = summary["runs"][mode]["0"]
        assert len(run["transfers"]) == FLOWS
        for name, transfer in run["transfers"].items():
            if transfer["completed"]:
                assert transfer["bytes_lost"] == 0, (mode, name, transfer)
            else:
                assert transfer["error"], (mode, name, transfer)
    for measure in ("goodput_against_strongest_roce", "link_balance_against_strongest_roce"):
        against = figures[measure]
        assert against["mrc"] == "mrc" and all(is_roce(m) for m, _ in against["roce_values"])
        assert sorted(m for m, _ in against["roce_values"]) == sorted(ROCE), against
    assert "invariants: bytes lost 0, every transfer completed: yes" in proc.stdout
