"""``make experiment NAME=failover``, test-sized: every transfer completes without losing a
byte through the cut and the restore, and the results directory is complete and well-formed.
MRC-versus-single figures are reported in the results, never asserted here."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from experiments.results import MODES, summary_problems

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("needs_testbed", "runs_dir")]

REPO = Path(__file__).resolve().parents[3]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_failover_loses_nothing_completes_and_writes_well_formed_results(
    leaf_spine_file: Path, tmp_path: Path
) -> None:
    out = tmp_path / "results"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "experiments",
            "failover",
            "--topo",
            str(leaf_spine_file),
            "--seeds",
            "1",
            "--set",
            "duration_s=5",
            "--set",
            "cut_at_s=2",
            "--set",
            "restore_at_s=3.5",
            "--out",
            str(out),
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (directory,) = out.iterdir()
    assert directory.name.startswith("failover-")
    for name in ("summary.json", "summary.txt", "timeseries.json", "topology.yaml"):
        assert (directory / name).is_file(), name
    assert (directory / "goodput.png").read_bytes().startswith(PNG_MAGIC)
    summary = json.loads((directory / "summary.json").read_text())
    assert summary_problems(summary, seeds=1) == []
    assert summary["experiment"] == "failover" and summary["target"] == "bmv2"
    assert summary["teardown"] == "nothing left"
    series = json.loads((directory / "timeseries.json").read_text())
    for mode in MODES:
        run = summary["runs"][mode]["0"]
        (transfer,) = run["transfers"].values()
        assert transfer["bytes_lost"] == 0, (mode, transfer)
        assert transfer["completed"], (mode, transfer)
        assert transfer["bytes_delivered"] == transfer["bytes_sent"] > 0
        assert run["cut_link"] is not None and run["cut_link"].startswith("l1:")
        assert run["cut_s"] < run["restore_s"]
        (points,) = series[mode]["0"].values()
        assert len(points) >= 10, f"{mode}: too few 100 ms bins: {points}"
    assert "invariants: bytes lost 0, every transfer completed: yes" in proc.stdout
