"""``make experiment NAME=failover``, test-sized: every transfer completes without losing a
byte through the cut and the restore, and the results directory is complete and well-formed,
on every target whose tools are present. The link to cut is found from the source leaf's
member counters on bmv2 and from its ports' tx counters on linux (which has no per-member
counters); the record says which. Each mode's recovery time comes with its spread and the
seed's pair with the order it ran in. MRC-versus-single figures are reported in the results,
never asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.results import MODES
from tests.e2e.testbed.experiment_run import FORWARDED_COUNTERS, run_experiment

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]


def test_failover_loses_nothing_completes_and_writes_well_formed_results(
    leaf_spine_file: Path, tmp_path: Path, testbed_target: str
) -> None:
    proc, directory, summary = run_experiment(
        "failover",
        leaf_spine_file,
        tmp_path / "results",
        {"duration_s": "5", "cut_at_s": "2", "restore_at_s": "3.5"},
        testbed_target,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["pngs"] == ["goodput.png"]
    series = json.loads((directory / "timeseries.json").read_text())
    for mode in MODES:
        run = summary["runs"][mode]["0"]
        (transfer,) = run["transfers"].values()
        assert transfer["bytes_lost"] == 0, (mode, transfer)
        assert transfer["completed"], (mode, transfer)
        assert transfer["bytes_delivered"] == transfer["bytes_sent"] > 0
        assert run["cut_link"] is not None and run["cut_link"].startswith("l1:"), run
        assert run["cut_counters"] == FORWARDED_COUNTERS[testbed_target]
        assert run["cut_probe_packets"] > 0, run  # the flow was seen on the link it lost
        assert run["cut_s"] < run["restore_s"]
        (points,) = series[mode]["0"].values()
        assert len(points) >= 10, f"{mode}: too few 100 ms bins: {points}"
    figures = summary["figures"]
    assert figures["pairs"] == [
        {
            "seed": "0",
            "order": list(MODES),
            "recovery_s": {mode: summary["runs"][mode]["0"]["recovery_s"] for mode in MODES},
            "goodput_bps": {
                mode: summary["runs"][mode]["0"]["transfers"]["h1->h3"]["goodput_bps"]
                for mode in MODES
            },
        }
    ]
    for mode in MODES:
        recovery = summary["runs"][mode]["0"]["recovery_s"]
        f = figures[mode]
        assert f["recovery_s"] == [recovery]
        assert f["recovery_s_mean"] == f["recovery_s_min"] == f["recovery_s_max"] == recovery
        assert f["recovery_s_stdev"] is None  # one seed has no spread, and says so
        assert f["recovery_s_seeds"] == (0 if recovery is None else 1)
    assert "invariants: bytes lost 0, every transfer completed: yes" in proc.stdout
