"""``make experiment NAME=spray``, test-sized (4 flows of the permutation, 128 KiB each), on
every target whose tools are present: every flow completes without losing a byte in both
modes, the spine links' loads are read (from member counters on bmv2, from port tx counters
on linux; a link whose counters a loaded machine failed to read is recorded as unread), and
the results directory is complete and well-formed. The MRC / single-path goodput ratio is
reported in the results, never asserted here."""

from __future__ import annotations

from pathlib import Path

import pytest

from experiments.results import MODES
from tests.e2e.testbed.experiment_run import FORWARDED_COUNTERS, run_experiment
from topologies import load_topology

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]

FLOWS = 4


def test_spray_loses_nothing_completes_and_writes_well_formed_results(
    leaf_spine_4x4_file: Path, tmp_path: Path, testbed_target: str
) -> None:
    proc, _, summary = run_experiment(
        "spray",
        leaf_spine_4x4_file,
        tmp_path / "results",
        {"flows": str(FLOWS), "flow_bytes": str(128 * 1024)},
        testbed_target,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["pngs"] == ["flows.png", "links.png"]
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
    assert "invariants: bytes lost 0, every transfer completed: yes" in proc.stdout
