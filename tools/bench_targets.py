"""`make bench-targets`: the ``spray`` workload on every target this machine can run, in one run.

The question is whether MRC's spraying pays off on the kernel (``linux``) target as it does on
BMv2: the same permutation workload on ``leaf-spine-4x4``, single path (``--evs 1``) against
256 EVs, over ``--seeds`` EV / source-port draws, on each available target one after the other,
so that the targets are compared under the same machine load. The experiment itself
(:mod:`experiments.spray`) does the work and writes its usual results directory; this tool
only picks the targets, runs it, and condenses each target's summary into one JSON document:
aggregate goodput per mode (mean over seeds), the MRC / single-path ratio (mean, min, max,
stdev), and the invariants (bytes lost, every transfer completed).

A target whose tools are missing is reported under ``skipped`` with what it lacks; the exit
status is 0 unless a target that ran lost bytes or left a transfer incomplete. Target
on ``linux``, MRC / single-path >= 1.3 -- reported as ``meets_target``, not
asserted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
#: The ratio asked of the linux target (and of BMv2).
TARGET_RATIO = 1.3
WORKLOAD = "spray"


def condense(summary: dict[str, Any], directory: Path) -> dict[str, Any]:
    """The figures of one target's spray summary that the comparison needs."""
    figures = summary["figures"]
    ratio = figures["goodput_ratio_mean"]
    return {
        "results": str(directory),
        "aggregate_goodput_bps": {
            mode: figures[mode]["aggregate_goodput_bps_mean"] for mode in ("mrc", "single")
        },
        "ratio_mrc_over_single": {
            "mean": ratio,
            "min": figures["goodput_ratio_min"],
            "max": figures["goodput_ratio_max"],
            "stdev": figures["goodput_ratio_stdev"],
            "per_seed": figures["goodput_ratio_mrc_over_single"],
        },
        "meets_target": ratio is not None and ratio >= TARGET_RATIO,
        "cpu_busy_fraction_max": {
            mode: figures[mode].get("cpu_busy_fraction_max") for mode in ("mrc", "single")
        },
        "bytes_lost": summary["invariants"]["bytes_lost"],
        "all_completed": summary["invariants"]["all_completed"],
    }


def run(targets: list[str], seeds: int, topology_ref: str | None, out: Path) -> dict[str, Any]:
    """Run the spray workload on each of ``targets`` that can run here; the condensed JSON."""
    from experiments.experiment import parse_params, run_experiment
    from experiments.registry import EXPERIMENTS
    from testbed.targets import TargetUnavailable, check_target
    from topologies import load_topology

    experiment = EXPERIMENTS[WORKLOAD]
    topology = load_topology(topology_ref or experiment.default_topology)
    result: dict[str, Any] = {
        "benchmark": "targets",
        "workload": WORKLOAD,
        "topology": topology_ref or experiment.default_topology,
        "seeds": seeds,
        "target_ratio": TARGET_RATIO,
        "targets": {},
        "skipped": {},
    }
    for name in targets:
        try:
            check_target(name, topology)
        except TargetUnavailable as error:
            result["skipped"][name] = error.problems
            continue
        started = time.monotonic()
        directory = run_experiment(
            experiment,
            topology_ref=topology_ref,
            target=name,
            seeds=seeds,
            params=parse_params(experiment, {}),
            results_root=out,
        )
        summary = json.loads((directory / "summary.json").read_text())
        result["targets"][name] = condense(summary, directory)
        result["targets"][name]["wall_s"] = round(time.monotonic() - started, 1)
    return result


def main(argv: list[str] | None = None) -> int:
    """Entry point; prints the JSON and returns 0 unless a run lost bytes or stalled."""
    from testbed.targets import TARGETS

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--targets",
        default=",".join(TARGETS),
        help=f"comma-separated targets to try (default: all known, {','.join(TARGETS)})",
    )
    parser.add_argument("--seeds", type=int, default=5, help="EV / source-port draws per mode")
    parser.add_argument("--topo", help="topology (default: the spray experiment's)")
    parser.add_argument("--out", type=Path, default=REPO / "results", help="results root")
    args = parser.parse_args(argv)
    targets = [name.strip() for name in args.targets.split(",") if name.strip()]
    unknown = [name for name in targets if name not in TARGETS]
    if unknown or args.seeds < 1:
        problem = f"unknown targets {unknown}" if unknown else "--seeds must be at least 1"
        print(f"bench-targets: {problem}; targets: {', '.join(TARGETS)}", file=sys.stderr)
        return 2
    result = run(targets, args.seeds, args.topo, args.out)
    text = json.dumps(result, indent=2)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"bench-targets-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(text + "\n")
    print(text)
    healthy = all(t["bytes_lost"] == 0 and t["all_completed"] for t in result["targets"].values())
    return 0 if healthy else 1


if __name__ == "__main__":
    raise SystemExit(main())
