"""Running ``python -m experiments`` as a user would, for the experiment tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from experiments.bottleneck import CPU_BOUND, LINK_BOUND, NEITHER
from experiments.counters import MEMBER_COUNTERS, PORT_TX_COUNTERS
from experiments.results import summary_problems
from topologies import load_topology

REPO = Path(__file__).resolve().parents[3]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
#: What every run writes besides its figures and its topology file(s).
FILES = ("summary.json", "summary.txt", "timeseries.json")
#: Where each target's switches count what they forward out of each port: member counters
#: on bmv2, the ports' tx counters on linux (it keeps no per-member counters).
FORWARDED_COUNTERS = {"bmv2": MEMBER_COUNTERS, "linux": PORT_TX_COUNTERS}
VERDICTS = {CPU_BOUND, LINK_BOUND, NEITHER}


def run_experiment(
    name: str,
    topology: Path,
    out: Path,
    settings: dict[str, str],
    target: str = "bmv2",
    timeout: float = 600,
    seeds: int = 1,
) -> tuple[subprocess.CompletedProcess[str], Path, dict[str, Any]]:
    """Run ``seeds`` seeds of ``name`` on ``target``; its process, its results directory and
    its summary, after checking what every experiment must write (files, PNGs, a
    well-formed summary, the modes' order, what limited every run)."""
    command = experiment_command(name, topology, out, settings, target, seeds)
    proc = subprocess.run(
        command, cwd=REPO, capture_output=True, text=True, timeout=timeout, check=False
    )
    directory, summary = checked_results(name, topology, out, target, seeds, proc.stderr)
    return proc, directory, summary


def experiment_command(
    name: str, topology: Path, out: Path, settings: dict[str, str], target: str, seeds: int
) -> list[str]:
    """``python -m experiments`` with these arguments, as a user would type it."""
    command = [sys.executable, "-m", "experiments", name, "--topo", str(topology)]
    command += ["--target", target]
    command += ["--seeds", str(seeds), "--out", str(out)]
    for key, value in settings.items():
        command += ["--set", f"{key}={value}"]
    return command


def checked_results(
    name: str, topology: Path, out: Path, target: str, seeds: int, stderr: str = ""
) -> tuple[Path, dict[str, Any]]:
    """The results directory of the one run under ``out`` and its summary, after checking
    what every experiment must write (see :func:`run_experiment`)."""
    made = list(out.iterdir()) if out.is_dir() else []
    assert len(made) == 1, f"no results directory: {stderr[-3000:]}"
    (directory,) = made
    assert directory.name.startswith(f"{name}-")
    for file in FILES:
        assert (directory / file).is_file(), f"{file} missing: {stderr[-3000:]}"
    summary = json.loads((directory / "summary.json").read_text())
    assert summary_problems(summary, seeds=seeds) == []
    assert sorted(summary["topology"]["files"]) == sorted(summary["modes"])
    for topology_file in summary["topology"]["files"].values():
        assert (directory / topology_file).is_file(), topology_file
    assert summary["experiment"] == name and summary["target"] == target
    assert summary["target_facts"]["target"] == target
    assert summary["teardown"] == "nothing left"
    for bring_up in summary["bring_ups"]:
        assert bring_up["teardown"] == "nothing left", bring_up
        assert (directory / bring_up["controller_events"]).is_file(), bring_up
    for png in summary["pngs"]:
        assert (directory / png).read_bytes().startswith(PNG_MAGIC), png
    _check_order(summary, seeds)
    _check_bottlenecks(summary, topology)
    return directory, summary


def _check_order(summary: dict[str, Any], seeds: int) -> None:
    """Each seed ran every mode once, in the order summary.json says: listed order on even
    seeds, reversed on odd ones, as the runs' sequence numbers show."""
    modes = summary["modes"]
    sequence = sorted(
        (run["sequence"], seed, mode)
        for mode, runs in summary["runs"].items()
        for seed, run in runs.items()
    )
    assert [number for number, _, _ in sequence] == list(range(seeds * len(modes)))
    ran = [(seed, mode) for _, seed, mode in sequence]
    expected = [
        (str(seed), mode)
        for seed in range(seeds)
        for mode in (modes if seed % 2 == 0 else modes[::-1])
    ]
    assert ran == expected
    assert summary["order"]["per_seed"] == {
        str(seed): [mode for s, mode in expected if s == str(seed)] for seed in range(seeds)
    }


def _check_bottlenecks(summary: dict[str, Any], topology: Path) -> None:
    """Every run read each core's load and each fabric link direction's utilisation (or
    recorded it unread), and has a verdict; so has each mode."""
    fabric = load_topology(str(topology))
    directions = sorted(
        f"{end.node}:{end.port}->{far.node}"
        for link in fabric.links
        for end, far in ((link.a, link.b), (link.b, link.a))
    )
    for mode, runs in summary["runs"].items():
        for seed, run in runs.items():
            cores = run["cpu"]["cores"]
            assert len(cores) == run["cpu"]["cpus"] >= 1, (mode, seed, run["cpu"])
            assert all(0.0 <= core["busy"] <= 1.0 for core in cores.values()), cores
            assert run["cpu"]["busiest_core"] == max(core["busy"] for core in cores.values())
            assert run["window_s"] > 0
            assert sorted(run["link_utilisation"]) == directions
            read = [entry for entry in run["link_utilisation"].values() if entry is not None]
            assert read, f"{mode}/{seed}: no link's counters were read"
            assert all(entry["utilisation"] >= 0 for entry in read), read
            assert run["bottleneck"]["verdict"] in VERDICTS, run["bottleneck"]
        assert summary["bottleneck"][mode]["verdict"] in VERDICTS
        assert summary["bottleneck"][mode]["runs"] == len(runs)
