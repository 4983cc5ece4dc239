"""The results directory of an experiment run and what it must hold.

``results/<name>-<timestamp>/`` gets ``summary.json`` (the figures a reader compares),
``timeseries.json`` (the raw samples the figures are drawn from), ``summary.txt`` (the summary
for a terminal), PNG figures and ``topology.yaml`` (the network measured). ``summary.json``
always names the experiment, target, topology, seeds and the versions of everything that
shapes a result, so a number can be traced to the code and tools that produced it;
:func:`summary_problems` is the check the tests (and a reader's scripts) apply.
"""

from __future__ import annotations

import json
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

from agent import native
from experiments.json_form import Json
from experiments.stats import spread_problems
from hostenv.toolchain import P4C, SIMPLE_SWITCH_GRPC, ToolSpec, find_tool, tool_version
from p4src import artifact

REPO = Path(__file__).resolve().parents[1]
#: The modes of an experiment that compares MRC with the single-path baseline; an
#: experiment may name others (summary.json lists them under "modes").
MODES = ("mrc", "single")
#: Per-transfer fields every mode and seed must report.
TRANSFER_FIELDS = (
    "bytes_sent",
    "bytes_delivered",
    "bytes_lost",
    "completed",
    "goodput_bps",
    "retransmits",
)


#: What the runner records of every run besides the experiment's own figures: what limited
#: it (see experiments.bottleneck) and where it stood in the run order.
RUN_RECORDS = ("cpu", "link_utilisation", "window_s", "bottleneck", "sequence")


def new_result_dir(root: Path, name: str) -> Path:
    """A fresh ``<root>/<name>-<YYYYmmdd-HHMMSS>`` (a suffix when two start in one second)."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    for attempt in range(100):
        path = root / (f"{name}-{stamp}" if attempt == 0 else f"{name}-{stamp}-{attempt}")
        try:
            path.mkdir(parents=True)
            return path
        except FileExistsError:
            continue
    raise RuntimeError(f"cannot create a results directory for {name} under {root}")


def versions() -> dict[str, str]:
    """The project commit (``+dirty`` with local changes), p4c, BMv2, the kernel, and which
    build of the agent ran (compiled or pure Python: they differ in CPU per packet, which
    decides whether a run is CPU-bound)."""
    return {
        "project_commit": _git_commit(),
        "p4c": _tool_version(P4C) or _compiled_with(),
        "bmv2": _tool_version(SIMPLE_SWITCH_GRPC) or "not found",
        "kernel": platform.release(),
        "agent_build": native.check().label,
    }


def _git_commit() -> str:
    def git(*args: str) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=REPO, capture_output=True, text=True, timeout=30, check=False
        )
        return proc.stdout.strip() if proc.returncode == 0 else ""

    commit = git("rev-parse", "HEAD") or "unknown"
    return commit + ("+dirty" if git("status", "--porcelain", "--untracked-files=no") else "")


def _tool_version(spec: ToolSpec) -> str:
    path = find_tool(spec)
    return tool_version(spec, path) if path else ""


def _compiled_with() -> str:
    """Without p4c here: the version that compiled the committed artifacts."""
    recorded = artifact("p4c-version.txt")
    if recorded.is_file():
        return f"{recorded.read_text().strip()} (compiled the committed p4src/build)"
    return "not found"


def write_json(path: Path, data: Json) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def summary_problems(summary: dict[str, Any], seeds: int) -> list[str]:
    """What makes ``summary`` (summary.json as read back) ill-formed (empty when it is
    well-formed)."""
    problems = [
        f"missing {key!r}"
        for key in (
            "experiment",
            "target",
            "target_facts",
            "topology",
            "seeds",
            "order",
            "versions",
            "runs",
            "figures",
            "bottleneck",
        )
        if key not in summary
    ]
    if problems:
        return problems
    problems.extend(spread_problems(summary["figures"]))
    for key in ("project_commit", "p4c", "bmv2", "kernel"):
        if not summary["versions"].get(key):
            problems.append(f"versions lacks {key!r}")
    if summary["seeds"] != seeds:
        problems.append(f"seeds is {summary['seeds']}, expected {seeds}")
    modes = summary.get("modes", MODES)  # results written before modes were recorded
    unexpected = sorted(set(summary["runs"]) - set(modes))
    if unexpected:
        problems.append(f"runs of modes not listed in 'modes': {unexpected}")
    problems.extend(_order_problems(summary["order"], modes, seeds))
    for mode in modes:
        runs = summary["runs"].get(mode)
        if not isinstance(runs, dict) or sorted(runs) != [str(s) for s in range(seeds)]:
            problems.append(f"runs[{mode!r}] does not hold seeds 0..{seeds - 1}")
            continue
        for seed, run in runs.items():
            problems.extend(f"{mode}/{seed}: {problem}" for problem in run.get("problems", []))
            missing_records = [key for key in RUN_RECORDS if key not in run]
            if missing_records:
                problems.append(f"{mode}/{seed} lacks {missing_records}")
            if not run.get("transfers"):
                problems.append(f"{mode}/{seed} has no transfers")
                continue
            for transfer_name, transfer in run["transfers"].items():
                missing = [field for field in TRANSFER_FIELDS if field not in transfer]
                if missing:
                    problems.append(f"{mode}/{seed}/{transfer_name} lacks {missing}")
    return problems


def _order_problems(order: object, modes: list[str] | tuple[str, ...], seeds: int) -> list[str]:
    """What is wrong with summary.json's ``order``: every seed must list every mode once."""
    per_seed = order.get("per_seed") if isinstance(order, dict) else None
    if not isinstance(per_seed, dict) or sorted(per_seed) != sorted(str(s) for s in range(seeds)):
        return [f"order does not give the modes' order for seeds 0..{seeds - 1}"]
    return [
        f"order of seed {seed} is {ran}, not each of {list(modes)} once"
        for seed, ran in per_seed.items()
        if sorted(ran) != sorted(modes)
    ]
