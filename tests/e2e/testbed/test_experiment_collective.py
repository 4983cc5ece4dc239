"""``make experiment NAME=collective``, test-sized (4 ranks, one per leaf of
``leaf-spine-4x4``, a 64 KiB all-reduce, 3 iterations, the clean fabric and the static cut,
MRC only), on every target whose tools are present: the MRC jobs complete with every rank's
result exact, the cut happened mid-job, the results are well-formed (per-iteration records,
bandwidths, completion time, the links' allowance), and the figures exist. How fast the job
ran and how MRC compares with single path are reported, never asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.e2e.testbed.experiment_run import run_experiment

pytestmark = [pytest.mark.mininet, pytest.mark.usefixtures("runs_dir")]

HOSTS = "h1,h5,h9,h13"
ITERATIONS = 3


def test_collective_mrc_job_completes_verified_and_writes_well_formed_results(
    leaf_spine_4x4_file: Path, tmp_path: Path, testbed_target: str
) -> None:
    proc, directory, summary = run_experiment(
        "collective",
        leaf_spine_4x4_file,
        tmp_path / "results",
        {
            "hosts": HOSTS,
            "size": str(64 * 1024),
            "iterations": str(ITERATIONS),
            "event_after": "1",
            "transports": "mrc",
            "scenarios": "clean,cut-static",
        },
        testbed_target,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert summary["pngs"] == ["iterations.png", "completion.png"]
    assert summary["modes"] == ["mrc-clean", "mrc-cut-static"]
    assert summary["invariants"]["held"], summary["invariants"]
    for mode, seeds in summary["runs"].items():
        run = seeds["0"]
        job = run["job"]
        assert job["ok"] and not job["failed"], (mode, job)
        assert job["ranks"] == 4 and job["hosts"] == HOSTS.split(",")
        assert len(job["verified"]) == 4 and job["wrong_ranks"] == []
        assert [r["iteration"] for r in job["per_iteration"]] == list(range(ITERATIONS))
        for record in job["per_iteration"]:
            assert record["time_s"] > 0 and record["end_s"] > record["start_s"]
            assert record["busbw_Bps"] == pytest.approx(1.5 * record["algbw_Bps"])
        assert job["job_completion_s"] == pytest.approx(job["per_iteration"][-1]["end_s"])
        assert 0 <= job["network_wait_share"] <= 1
        assert run["allowed_busbw_Bps"] > 0
        assert run["transfers"]["job"]["completed"] and run["transfers"]["job"]["bytes_lost"] == 0
    cut = summary["runs"]["mrc-cut-static"]["0"]
    assert cut["event"]["what"] and cut["event"]["what"].endswith("cut")
    assert 0 < cut["event"]["at_s"] < cut["job"]["job_completion_s"], "the cut came mid-job"
    assert summary["runs"]["mrc-clean"]["0"]["event"]["at_s"] is None
    lines = (directory / "summary.txt").read_text().splitlines()
    assert any(line.startswith("mrc-clean: iteration") for line in lines)
    assert any("verified yes" in line for line in lines)
