"""What an experiment module provides to the runner, and the runner itself.

An experiment is a set of functions over plain data: the runner brings the network up, calls
``run_mode`` for every seed and mode, then ``summarize``, ``draw`` and ``text``, and writes the
results directory. Every experiment thereby gets the same teardown, the same summary.json
skeleton and the same checks.

Modes that need the same network (``mrc`` and ``single`` differ only in the agents' EVs) share
one bring-up. Modes that differ in how the switches are configured (``incast``: ECN and
trimming on or off) get a bring-up each, in the same run, each on its own topology file: the
controller programs what a file says, and a fresh network guarantees that nothing of one
mode's configuration or queues lingers into the other.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from experiments.results import MODES, new_result_dir, summary_problems, versions, write_json
from experiments.topology_variant import Variant, write_variant
from testbed.session import Testbed
from topologies import load_topology
from topologies.model import Topology

log = logging.getLogger(__name__)

RunMode = Callable[[Testbed, Any, str, int], tuple[dict[str, Any], dict[str, Any]]]
#: Nothing of a bring-up was left after its teardown.
NOTHING_LEFT = "nothing left"


@dataclass(frozen=True)
class Experiment:
    """One experiment: its defaults and the functions the runner calls."""

    name: str
    default_topology: str
    params_type: type
    #: The topology changes a mode needs (params, mode -> Variant).
    variant: Callable[[Any, str], Variant]
    run_mode: RunMode
    summarize: Callable[[dict[str, dict[str, dict[str, Any]]]], dict[str, Any]]
    draw: Callable[[Path, dict[str, Any], dict[str, Any], Any], list[str]]
    text: Callable[[dict[str, Any]], list[str]]
    #: Whether the controller runs LLDP discovery (off where links are slowed: see Testbed).
    discovery: bool = True
    #: The modes every seed runs in, in this order; summary.json has one entry per mode.
    modes: tuple[str, ...] = MODES
    #: What the experiment needs of the topology (hosts it names, links its flows share):
    #: a ValueError saying what is wrong, raised before anything is brought up.
    check_topology: Callable[[Topology, Any], None] | None = None


def parse_params(experiment: Experiment, settings: Mapping[str, str]) -> Any:
    """The experiment's Params with ``settings`` (field name -> text) applied; ValueError for
    an unknown field or a value of the wrong type."""
    fields = {f.name: f for f in dataclasses.fields(experiment.params_type)}
    values: dict[str, Any] = {}
    for key, text in settings.items():
        if key not in fields:
            raise ValueError(
                f"{experiment.name} has no parameter {key!r}; parameters: {', '.join(fields)}"
            )
        default = getattr(experiment.params_type(), key)
        try:
            values[key] = _parse_value(default, text)
        except ValueError:
            raise ValueError(f"{key}={text!r}: expected {type(default).__name__}") from None
    params = experiment.params_type(**values)
    check = getattr(params, "check", None)
    if check is not None:
        check()
    return params


def run_experiment(
    experiment: Experiment,
    *,
    topology_ref: str | None,
    target: str,
    seeds: int,
    params: Any,
    results_root: Path,
) -> Path:
    """Run every seed in every mode (one bring-up per distinct topology variant); write and
    return the results directory."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    topology_ref = topology_ref or experiment.default_topology
    if experiment.check_topology is not None:
        experiment.check_topology(load_topology(topology_ref), params)
    directory = new_result_dir(results_root, experiment.name)
    groups = bring_ups(experiment, params)
    files: dict[str, Path] = {}
    for suffix, (variant, modes) in groups.items():
        path = write_variant(topology_ref, variant, directory, f"topology{suffix}.yaml")
        files.update((mode, path) for mode in modes)
    runs, series, leftovers = _measure(experiment, groups, files, target, seeds, params, directory)
    figures = experiment.summarize(runs)
    transfers = [
        t for seeds_ in runs.values() for r in seeds_.values() for t in r["transfers"].values()
    ]
    first_file = files[experiment.modes[0]]
    summary: dict[str, Any] = {
        "experiment": experiment.name,
        "target": target,
        "topology": {
            "ref": topology_ref,
            "name": load_topology(str(first_file)).name,
            "file": first_file.name,
            "files": {mode: path.name for mode, path in files.items()},
        },
        "seeds": seeds,
        "modes": list(experiment.modes),
        "versions": versions(),
        "parameters": dataclasses.asdict(params),
        "runs": runs,
        "figures": figures,
        "invariants": {
            "bytes_lost": sum(t["bytes_lost"] or 0 for t in transfers),
            "all_completed": all(t["completed"] for t in transfers),
        },
        "controller_discovery": experiment.discovery,
        "teardown": _teardown_sentence(leftovers),
    }
    write_json(directory / "timeseries.json", series)
    summary["pngs"] = experiment.draw(directory, runs, series, params)
    write_json(directory / "summary.json", summary)
    problems = summary_problems(json.loads((directory / "summary.json").read_text()), seeds)
    lines = [
        f"{experiment.name} on {topology_ref} ({target}), {seeds} seed(s); "
        f"commit {summary['versions']['project_commit']}",
        *experiment.text(figures),
        f"invariants: bytes lost {summary['invariants']['bytes_lost']}, every transfer "
        f"completed: {'yes' if summary['invariants']['all_completed'] else 'NO'}",
        *(f"ILL-FORMED: {problem}" for problem in problems),
    ]
    (directory / "summary.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def _measure(
    experiment: Experiment,
    groups: dict[str, tuple[Variant, list[str]]],
    files: dict[str, Path],
    target: str,
    seeds: int,
    params: Any,
    directory: Path,
) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, dict[str, Any]], list[str]]:
    """Bring each group's network up, run its modes for every seed, tear it down; the
    records and time series per mode and seed, and what each teardown left."""
    runs: dict[str, dict[str, dict[str, Any]]] = {mode: {} for mode in experiment.modes}
    series: dict[str, dict[str, Any]] = {mode: {} for mode in experiment.modes}
    leftovers: list[str] = []
    for suffix, (_, modes) in groups.items():
        with Testbed.open(str(files[modes[0]]), target, experiment.discovery) as testbed:
            for seed in range(seeds):
                for mode in modes:
                    log.info("%s: seed %d, mode %s", experiment.name, seed, mode)
                    record, samples = experiment.run_mode(testbed, params, mode, seed)
                    runs[mode][str(seed)] = record
                    series[mode][str(seed)] = samples
            if testbed.controller is not None and testbed.controller.event_log.is_file():
                # The run directory goes with the teardown; the controller's account of link
                # state and failovers stays with the results, for explaining odd figures.
                shutil.copyfile(
                    testbed.controller.event_log, directory / f"controller-events{suffix}.jsonl"
                )
        leftovers.append(str(testbed.leftovers))  # set by the teardown at the end of the block
    return runs, series, leftovers


def bring_ups(experiment: Experiment, params: Any) -> dict[str, tuple[Variant, list[str]]]:
    """The experiment's modes grouped by the network they need, in mode order, keyed by the
    suffix of their files: "" when every mode shares one network (``topology.yaml``), else
    ``-<mode>`` of the group's first mode (``topology-<mode>.yaml``)."""
    groups: dict[Variant, list[str]] = {}
    for mode in experiment.modes:
        groups.setdefault(experiment.variant(params, mode), []).append(mode)
    if len(groups) == 1:
        ((variant, modes),) = groups.items()
        return {"": (variant, modes)}
    return {f"-{modes[0]}": (variant, modes) for variant, modes in groups.items()}


def _teardown_sentence(leftovers: list[str]) -> str:
    """One sentence for every bring-up's teardown: "nothing left" only when none left anything."""
    left = [sentence for sentence in leftovers if sentence != NOTHING_LEFT]
    return NOTHING_LEFT if not left else "; ".join(left)


def _parse_value(default: Any, text: str) -> Any:
    """``text`` as the type of ``default`` (bool accepts true/false, yes/no, on/off, 1/0)."""
    if isinstance(default, bool):
        lowered = text.strip().lower()
        if lowered in ("1", "true", "yes", "on"):
            return True
        if lowered in ("0", "false", "no", "off"):
            return False
        raise ValueError(text)
    return type(default)(text)
