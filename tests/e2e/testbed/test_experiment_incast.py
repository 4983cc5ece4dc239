"""``make experiment NAME=incast``, test-sized (64 KiB per sender into a 4 s victim flow), on
every target whose tools are present: in the fabric with ECN and trimming and in the one
without, every transfer completes without losing a byte, the incast ran inside the victim's
lifetime, the "off" fabric neither trimmed nor marked, and the results directory is complete
and well-formed. Which mode serves the victim or the incast better is reported in the
results, never asserted here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from experiments.incast import MODE_OFF, MODES
from tests.e2e.testbed.experiment_run import run_experiment

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]

INCAST_BYTES = 64 * 1024


def test_incast_loses_nothing_completes_and_writes_well_formed_results(
    leaf_spine_4x4_file: Path, tmp_path: Path, testbed_target: str
) -> None:
    proc, directory, summary = run_experiment(
        "incast",
        leaf_spine_4x4_file,
        tmp_path / "results",
        {"incast_bytes": str(INCAST_BYTES), "victim_duration_s": "4", "incast_at_s": "1.5"},
        testbed_target,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["modes"] == list(MODES)
    assert summary["pngs"] == ["incast.png"]
    series = json.loads((directory / "timeseries.json").read_text())
    for mode in MODES:
        run = summary["runs"][mode]["0"]
        assert len(run["transfers"]) == 4  # three senders and the victim
        for name, transfer in run["transfers"].items():
            assert transfer["bytes_lost"] == 0, (mode, name, transfer)
            assert transfer["completed"], (mode, name, transfer)
            assert transfer["bytes_delivered"] == transfer["bytes_sent"] > 0
        incast = [t for name, t in run["transfers"].items() if name.startswith("incast:")]
        assert [t["bytes_delivered"] for t in incast] == [INCAST_BYTES] * 3
        assert 1.5 <= run["incast_start_s"] < run["incast_end_s"]
        assert run["incast_completion_s"] > 0
        assert run["shared_hops"], "the victim must share a spine link with the incast"
        assert len(series[mode]["0"][run["victim"]]) >= 10, "too few 250 ms victim bins"
    off = summary["runs"][MODE_OFF]["0"]["switch_signals"]
    # none counted, or not countable on this target (None), never a trim or a mark
    assert sorted(off) == ["ecn_marks", "trims"] and set(off.values()) <= {0, None}, off
    assert "invariants: bytes lost 0, every transfer completed: yes" in proc.stdout
