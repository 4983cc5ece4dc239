"""``make experiment NAME=controller``, test-sized (one MRC transfer of 6 s, the kill at 1.5 s,
the cut at 3.5 s) on kernel switches: the other controller takes over writing nothing, the
cut is rerouted by it, the transfer completes without losing a byte, the killed controller
rejoins as backup, and the results directory is complete and well-formed. Kernel switches
only: the bring-up is the shortest, and the takeover itself is tested on both targets in
``test_controller_backup``."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.mininet.environment import forwarding_skip_reason
from tests.e2e.testbed.experiment_run import run_experiment

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]


def test_the_controller_experiment_measures_a_takeover_and_a_reroute_losing_nothing(
    leaf_spine_file: Path, tmp_path: Path
) -> None:
    reason = forwarding_skip_reason("linux")
    if reason:
        pytest.skip(reason)
    proc, _, summary = run_experiment(
        "controller",
        leaf_spine_file,
        tmp_path / "results",
        {"transports": "mrc", "duration_s": "6", "kill_at_s": "1.5", "cut_at_s": "3.5"},
        "linux",
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["pngs"] == ["controller-times.png"]
    run = summary["runs"]["mrc"]["0"]
    assert (run["killed"], run["took_over"], run["rejoined_as"]) == ("primary", "backup", "backup")
    assert run["takeover_writes"] == 0 and 0 < run["takeover_s"] < 5
    assert run["cut_writes"] > 0 and 0 < run["cut_to_write_s"] < 5
    assert run["problems"] == []
    (transfer,) = run["transfers"].values()
    assert transfer["completed"] and transfer["bytes_lost"] == 0
    assert "invariants: bytes lost 0, every transfer completed: yes" in proc.stdout
