"""`make bench-targets`: the ``spray`` workload on every target this machine can run, in one run.

The question is whether MRC's spraying pays off on the kernel (``linux``) target as it does on
BMv2: the same permutation workload on ``leaf-spine-4x4``, single path (``--evs 1``) against
256 EVs, over ``--seeds`` EV / source-port draws, on each available target.

The targets are interleaved, not run one after the other: every seed runs on each target in
turn before the next seed starts, the first target alternating from seed to seed (seed 0: bmv2
then linux; seed 1: linux then bmv2; ...: :mod:`tools.counterbalance`), so a drift of the
machine's load over the run's many minutes weighs on every target alike. Adjacent runs on one
target (the two of seed 0 and seed 1 on linux, say) share a network bring-up. Within a seed
the modes alternate too (mrc then single on even seeds, the reverse on odd ones), as
``make experiment`` does. Each run is the spray experiment's own (:mod:`experiments.spray`'s
``run_mode``, measured as the runner measures it: CPU, link utilisation, bottleneck), and each
target's runs are summarized by the experiment's own ``summarize``; this tool writes
``results/bench-targets-<time>/`` (the topology, each target's summary.json and time series,
``bench.json``) and condenses each target's summary into one JSON document: aggregate goodput
per mode, the MRC / single-path ratio (mean, min, max, stdev, per seed), what limited the runs,
and the invariants (bytes lost, every transfer completed), with every seed's ratio on every
target side by side in the order they ran.

Each bring-up and run is told as it goes on stderr, with the run's goodput
(:mod:`experiments.progress`).

A target whose tools are missing is reported under ``skipped`` with what it lacks; the exit
status is 0 unless a target that ran lost bytes or left a transfer incomplete. Target
on ``linux``, MRC / single-path >= 1.3 -- reported as ``meets_target``, not
asserted.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tools.counterbalance import blocks, interleaved, ordered

if TYPE_CHECKING:
    from experiments.records import RunRecord

REPO = Path(__file__).resolve().parent.parent
#: The ratio asked of the linux target (and of BMv2).
TARGET_RATIO = 1.3
WORKLOAD = "spray"
#: The workload's contenders here: MRC against one path (the experiment's RoCE modes aside).
TRANSPORTS = "mrc,single"
ORDER_RULE = (
    "targets interleaved: each seed runs on every target before the next seed, the targets "
    "in the listed order on even seeds and reversed on odd ones; within a run the modes "
    "likewise; adjacent runs on one target share a bring-up"
)


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
        "bottleneck": figures.get("goodput_ratio_bottleneck"),
        "cpu_busy_fraction_max": {
            mode: figures[mode].get("cpu_busy_fraction_max") for mode in ("mrc", "single")
        },
        "bytes_lost": summary["invariants"]["bytes_lost"],
        "all_completed": summary["invariants"]["all_completed"],
    }


def seed_table(
    schedule: list[tuple[int, str]], per_seed: dict[str, list[float | None]]
) -> list[dict[str, Any]]:
    """Every seed's MRC / single ratio on every target, with the targets in the order that
    seed ran them (``per_seed``: target -> ratio by seed number)."""
    rows: dict[int, dict[str, Any]] = {}
    for seed, target in schedule:
        row = rows.setdefault(seed, {"seed": seed, "order": []})
        row["order"].append(target)
        ratios = per_seed.get(target, [])
        row[target] = ratios[seed] if seed < len(ratios) else None
    return [rows[seed] for seed in sorted(rows)]


def invariants(runs: Mapping[str, Mapping[int, RunRecord]]) -> dict[str, int | bool]:
    """Bytes lost and whether every transfer completed, over every run of one target."""
    from experiments.invariants import invariants as held_over

    held = held_over(runs)
    return {"bytes_lost": held.bytes_lost, "all_completed": held.all_completed}


def run(targets: list[str], seeds: int, topology_ref: str | None, out: Path) -> dict[str, Any]:
    """Run the spray workload on each of ``targets`` that can run here, interleaved seed by
    seed; the condensed JSON."""
    from experiments.capabilities import probe_target_facts
    from experiments.experiment import parse_params
    from experiments.json_form import to_json
    from experiments.plan import bring_ups
    from experiments.progress import Display, Step, track
    from experiments.records import Run
    from experiments.registry import EXPERIMENTS
    from experiments.results import new_result_dir, versions, write_json
    from experiments.runner import measured_run
    from experiments.spray import SprayRun, SpraySeries
    from experiments.topology_variant import write_variant
    from testbed.session import Testbed
    from testbed.targets import TargetUnavailable, check_target
    from topologies import load_topology

    experiment = EXPERIMENTS[WORKLOAD]
    params = parse_params(experiment, {"transports": TRANSPORTS})
    modes = experiment.modes_of(params)
    topology_ref = topology_ref or experiment.default_topology
    topology = load_topology(topology_ref)
    if experiment.check_topology is not None:
        experiment.check_topology(topology, params)
    result: dict[str, Any] = {
        "benchmark": "targets",
        "workload": WORKLOAD,
        "topology": topology_ref,
        "seeds": seeds,
        "target_ratio": TARGET_RATIO,
        "order": {"rule": ORDER_RULE, "per_seed": []},
        "targets": {},
        "skipped": {},
    }
    available = []
    for name in targets:
        try:
            check_target(name, topology)
        except TargetUnavailable as error:
            result["skipped"][name] = error.problems
            continue
        available.append(name)
    if not available:
        return result
    groups = bring_ups(experiment, params)
    if len(groups) != 1:
        raise ValueError(f"{WORKLOAD}: modes on different networks; bench-targets needs one")
    ((variant, _),) = groups.values()
    directory = new_result_dir(out, "bench-targets")
    topology_file = write_variant(topology_ref, variant, directory, "topology.yaml")
    facts = {name: probe_target_facts(name) for name in available}
    runs: dict[str, dict[str, dict[int, Run[SprayRun]]]] = {
        name: {mode: {} for mode in modes} for name in available
    }
    series: dict[str, dict[str, dict[int, SpraySeries]]] = {
        name: {mode: {} for mode in modes} for name in available
    }
    wall = dict.fromkeys(available, 0.0)
    bring_up_count = dict.fromkeys(available, 0)
    schedule = interleaved(available, seeds)
    steps = [
        Step(f"{target} {mode} seed {seed}", experiment.planned_s(params, mode))
        for seed, target in schedule
        for mode in ordered(modes, seed)
    ]
    sequence = 0
    # verbose: this bench logs at INFO, and the events inside each run come with the run
    with track(Display(verbose=True), "bench-targets", steps, setups=len(blocks(schedule))) as told:
        for target, block_seeds in blocks(schedule):
            started = time.monotonic()
            bring_up_count[target] += 1
            told.setup_began(f"bring-up on {target}")
            with Testbed.open(str(topology_file), target, experiment.discovery) as testbed:
                told.setup_ready(f"fabric up on {target}")
                for seed in block_seeds:
                    seed_modes = ordered(modes, seed)
                    result["order"]["per_seed"].append(
                        {"seed": seed, "target": target, "modes": [str(m) for m in seed_modes]}
                    )
                    for mode in seed_modes:
                        told.step_began(sequence)
                        run, samples = measured_run(
                            experiment, testbed, params, mode, seed, sequence
                        )
                        told.step_ended(sequence, experiment.headline(run.record))
                        sequence += 1
                        runs[target][mode][seed] = run
                        series[target][mode][seed] = samples
                told.now_doing(f"tearing down on {target}")
            told.setup_ended(f"torn down on {target}: {testbed.leftovers}")
            wall[target] += time.monotonic() - started
    for name in available:
        for mode in modes:
            runs[name][mode] = dict(sorted(runs[name][mode].items()))
        summary = {
            "experiment": WORKLOAD,
            "target": name,
            "target_facts": to_json(facts[name]),
            "topology": {"ref": topology_ref, "file": topology_file.name},
            "seeds": seeds,
            "modes": [str(mode) for mode in modes],
            "versions": versions(),
            "runs": to_json(runs[name]),
            "figures": to_json(experiment.summarize(runs[name], facts[name])),
            "invariants": invariants(runs[name]),
        }
        target_dir = directory / name
        target_dir.mkdir()
        write_json(target_dir / "summary.json", summary)
        write_json(target_dir / "timeseries.json", to_json(series[name]))
        condensed = condense(summary, target_dir)
        condensed["bring_ups"] = bring_up_count[name]
        condensed["wall_s"] = round(wall[name], 1)
        result["targets"][name] = condensed
    result["per_seed"] = seed_table(
        schedule,
        {
            name: condensed["ratio_mrc_over_single"]["per_seed"]
            for name, condensed in result["targets"].items()
        },
    )
    result["results"] = str(directory)
    write_json(directory / "bench.json", result)
    return result


def main(argv: list[str] | None = None) -> int:
    """Entry point; prints the JSON and returns 0 unless a run lost bytes or stalled."""
    from testbed.mininet.switch_target import hardware_reason, switch_target_names

    known = switch_target_names()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--targets",
        default=",".join(known),
        help=f"comma-separated targets to try (default: all known, {','.join(known)})",
    )
    parser.add_argument("--seeds", type=int, default=5, help="EV / source-port draws per mode")
    parser.add_argument("--topo", help="topology (default: the spray experiment's)")
    parser.add_argument("--out", type=Path, default=REPO / "results", help="results root")
    args = parser.parse_args(argv)
    targets = [name.strip() for name in args.targets.split(",") if name.strip()]
    hardware = [problem for name in targets if (problem := hardware_reason(name))]
    if hardware:
        print(f"bench-targets: {hardware[0]}", file=sys.stderr)
        return 2
    unknown = [name for name in targets if name not in known]
    if unknown or args.seeds < 1:
        problem = f"unknown targets {unknown}" if unknown else "--seeds must be at least 1"
        print(f"bench-targets: {problem}; targets: {', '.join(known)}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    started = time.monotonic()
    result = run(targets, args.seeds, args.topo, args.out)
    result["wall_s"] = round(time.monotonic() - started, 1)
    text = json.dumps(result, indent=2)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / f"bench-targets-{time.strftime('%Y%m%d-%H%M%S')}.json").write_text(text + "\n")
    print(text)
    healthy = all(t["bytes_lost"] == 0 and t["all_completed"] for t in result["targets"].values())
    return 0 if healthy else 1


if __name__ == "__main__":
    raise SystemExit(main())
