"""Running ``python -m experiments`` as a user would, for the experiment tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from experiments.counters import MEMBER_COUNTERS, PORT_TX_COUNTERS
from experiments.results import summary_problems

REPO = Path(__file__).resolve().parents[3]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: What every run writes besides its figures and its topology file(s).
FILES = ("summary.json", "summary.txt", "timeseries.json")
#: Where each target's switches count what they forward out of each port: member counters
#: on bmv2, the ports' tx counters on linux (it keeps no per-member counters).
FORWARDED_COUNTERS = {"bmv2": MEMBER_COUNTERS, "linux": PORT_TX_COUNTERS}


def run_experiment(
    name: str,
    topology: Path,
    out: Path,
    settings: dict[str, str],
    target: str = "bmv2",
    timeout: float = 600,
) -> tuple[subprocess.CompletedProcess[str], Path, dict[str, Any]]:
    """Run one seed of ``name`` on ``target``; its process, its results directory and its
    summary, after checking what every experiment must write (files, PNGs, a well-formed
    summary)."""
    command = [sys.executable, "-m", "experiments", name, "--topo", str(topology)]
    command += ["--target", target]
    command += ["--seeds", "1", "--out", str(out)]
    for key, value in settings.items():
        command += ["--set", f"{key}={value}"]
    proc = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False
    )
    (directory,) = out.iterdir()
    assert directory.name.startswith(f"{name}-")
    for file in FILES:
        assert (directory / file).is_file(), f"{file} missing: {proc.stdout}{proc.stderr}"
    summary = json.loads((directory / "summary.json").read_text())
    assert summary_problems(summary, seeds=1) == []
    assert sorted(summary["topology"]["files"]) == sorted(summary["modes"])
    for topology_file in summary["topology"]["files"].values():
        assert (directory / topology_file).is_file(), topology_file
    assert summary["experiment"] == name and summary["target"] == target
    assert summary["teardown"] == "nothing left"
    for png in summary["pngs"]:
        assert (directory / png).read_bytes().startswith(PNG_MAGIC), png
    return proc, directory, summary
