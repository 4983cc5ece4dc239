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

Modes take turns going first, seed by seed (ABBA: seed 0 runs the modes in their listed order,
seed 1 in reverse, seed 2 as seed 0, ...), so that whatever drifts over a run (the machine's
other load, a hypervisor's steal, a switch's caches) favours neither mode. Consecutive runs
on the same network share a bring-up: one in all for modes that share a network, seeds + 1
for two modes that do not (the order ON | OFF OFF | ON ON | ...).

Around every run the runner reads each core's busy time and the switches' counters, and
records the run's CPU load, each fabric link's utilisation and the verdict on what limited
it (:mod:`experiments.bottleneck`); before bring-up it finds out what the target can do
(:mod:`experiments.capabilities`), which ``summarize`` gets so that it makes only the
comparisons the target supports.

The modes may depend on the parameters (``modes_for``: failover's transports x routing
policies x placements). A mode's controller routing policy is part of its network
(``Variant.routing``): modes under different policies get a bring-up each. Some modes'
transfers may fail as a result (``may_fail``: a RoCE QP out of retries): the invariants then
ask of them only that a failure is recorded with its error and that a transfer that did
complete lost nothing; every other mode's transfers must complete and lose nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from controller.app.status_socket import StatusUnavailable
from experiments.bottleneck import link_utilisation, overall_bottleneck, phrase, run_bottleneck
from experiments.capabilities import TargetFacts, probe_target_facts
from experiments.counters import hop_loads
from experiments.cpu import core_jiffies, core_load, core_times, process_load, process_times
from experiments.results import MODES, new_result_dir, summary_problems, versions, write_json
from experiments.topology_variant import Variant, write_variant
from testbed.session import Testbed
from topologies import load_topology
from topologies.model import Topology

log = logging.getLogger(__name__)

RunMode = Callable[[Testbed, Any, str, int], tuple[dict[str, Any], dict[str, Any]]]


def _never(mode: str) -> bool:
    del mode
    return False


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
    #: The figures over every mode and seed, given what the target can do (a comparison the
    #: target cannot make is reported as not applicable, never as a ratio).
    summarize: Callable[[dict[str, dict[str, dict[str, Any]]], TargetFacts], dict[str, Any]]
    draw: Callable[[Path, dict[str, Any], dict[str, Any], Any], list[str]]
    text: Callable[[dict[str, Any]], list[str]]
    #: Whether the controller runs LLDP discovery (off where links are slowed: see Testbed).
    discovery: bool = True
    #: The modes every seed runs in (in this order on even seeds, reversed on odd ones: see
    #: :func:`run_order`); summary.json has one entry per mode.
    modes: tuple[str, ...] = MODES
    #: What the experiment needs of the topology (hosts it names, links its flows share):
    #: a ValueError saying what is wrong, raised before anything is brought up.
    check_topology: Callable[[Topology, Any], None] | None = None
    #: The modes for the given parameters (None: ``modes``).
    modes_for: Callable[[Any], tuple[str, ...]] | None = None
    #: Modes whose transfers may fail as a result rather than an error (see the module's
    #: docstring).
    may_fail: Callable[[str], bool] = _never

    def modes_of(self, params: Any) -> tuple[str, ...]:
        """The modes every seed runs in, for ``params``."""
        return self.modes if self.modes_for is None else self.modes_for(params)


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
    path_mode: str | None = None,
) -> Path:
    """Run every seed in every mode, in counter-balanced order (one bring-up per stretch of
    consecutive runs on the same topology variant); write and return the results
    directory. ``path_mode`` is how the fabric reads EVs in every bring-up (None: the
    controller's default, ``ecmp``)."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    topology_ref = topology_ref or experiment.default_topology
    if experiment.check_topology is not None:
        experiment.check_topology(load_topology(topology_ref), params)
    modes = experiment.modes_of(params)
    directory = new_result_dir(results_root, experiment.name)
    groups = bring_ups(experiment, params)
    files: dict[str, Path] = {}
    for suffix, (variant, members) in groups.items():
        path = write_variant(topology_ref, variant, directory, f"topology{suffix}.yaml")
        files.update((mode, path) for mode in members)
    facts = probe_target_facts(target)
    plan = plan_bring_ups(experiment, params, seeds)
    variants = {suffix: variant for suffix, (variant, _) in groups.items()}
    runs, series, done = _measure(
        experiment, plan, files, variants, target, params, directory, path_mode
    )
    figures = experiment.summarize(runs, facts)
    first_file = files[modes[0]]
    order = seed_orders(modes, seeds)
    bottleneck = {
        mode: overall_bottleneck(run["bottleneck"] for run in runs[mode].values()) for mode in modes
    }
    held = invariants(runs, experiment.may_fail)
    summary: dict[str, Any] = {
        "experiment": experiment.name,
        "target": target,
        "target_facts": facts.to_json(),
        "topology": {
            "ref": topology_ref,
            "name": load_topology(str(first_file)).name,
            "file": first_file.name,
            "files": {mode: path.name for mode, path in files.items()},
        },
        "seeds": seeds,
        "modes": list(modes),
        "order": {"rule": ORDER_RULE, "per_seed": order},
        "versions": versions(),
        "parameters": dataclasses.asdict(params),
        "runs": runs,
        "figures": figures,
        "bottleneck": {
            **bottleneck,
            "all": overall_bottleneck(
                run["bottleneck"] for mode in modes for run in runs[mode].values()
            ),
        },
        "invariants": held,
        "controller_discovery": experiment.discovery,
        "bring_ups": done,
        "teardown": _teardown_sentence([bring_up["teardown"] for bring_up in done]),
    }
    write_json(directory / "timeseries.json", series)
    summary["pngs"] = experiment.draw(directory, runs, series, params)
    write_json(directory / "summary.json", summary)
    problems = summary_problems(json.loads((directory / "summary.json").read_text()), seeds)
    lines = [
        f"{experiment.name} on {topology_ref} ({target}), {seeds} seed(s); "
        f"commit {summary['versions']['project_commit']}, agent "
        f"{summary['versions']['agent_build']}",
        f"order: {_order_text(order)} ({len(done)} bring-up(s))",
        *(f"target lacks: {line}" for line in facts.lacks),
        *experiment.text(figures),
        *(f"bottleneck, {mode}: {phrase(bottleneck[mode])}" for mode in modes),
        *invariant_lines(held),
        *(f"ILL-FORMED: {problem}" for problem in problems),
    ]
    (directory / "summary.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def invariants(
    runs: Mapping[str, Mapping[str, Mapping[str, Any]]], may_fail: Callable[[str], bool] = _never
) -> dict[str, Any]:
    """What every run must hold, over all of them: the transfers of modes that may not fail
    lost no byte (``bytes_lost``) and all completed (``all_completed``, over those modes:
    ``strict_modes``); a transfer of a mode that may fail either completed losing nothing or
    failed with its error recorded (``failures_as_results`` lists those failures,
    ``violations`` what broke the rule); ``held`` says whether all of it held."""
    strict = [mode for mode in runs if not may_fail(mode)]
    transfers = [
        t for mode in strict for run in runs[mode].values() for t in run["transfers"].values()
    ]
    results, violations = [], []
    for mode in runs:
        if mode in strict:
            continue
        for seed, run in runs[mode].items():
            for name, transfer in run["transfers"].items():
                where = f"{seed}/{mode}/{name}"
                if transfer["completed"]:
                    if transfer["bytes_lost"] != 0:
                        violations.append(
                            f"{where} completed yet lost {transfer['bytes_lost']} bytes"
                        )
                elif transfer.get("error"):
                    at = transfer.get("failed_at_s")
                    when = "" if at is None else f" at {at:.2f} s"
                    results.append(f"{where} failed{when}: {transfer['error']}")
                else:
                    violations.append(f"{where} did not complete and recorded no error")
    bytes_lost = sum(t["bytes_lost"] or 0 for t in transfers)
    all_completed = all(t["completed"] for t in transfers)
    return {
        "bytes_lost": bytes_lost,
        "all_completed": all_completed,
        "strict_modes": strict,
        "may_fail_modes": [mode for mode in runs if mode not in strict],
        "failures_as_results": results,
        "violations": violations,
        "held": bytes_lost == 0 and all_completed and not violations,
    }


def invariant_lines(held: Mapping[str, Any]) -> list[str]:
    """summary.txt's account of :func:`invariants`."""
    over = ""
    if held["may_fail_modes"]:
        over = (
            f" (of the modes that must: {', '.join(held['strict_modes']) or 'none'}; "
            f"{', '.join(held['may_fail_modes'])} may fail as a result)"
        )
    return [
        f"invariants: bytes lost {held['bytes_lost']}, every transfer completed: "
        f"{'yes' if held['all_completed'] else 'NO'}{over}",
        *(f"failed, a result: {line}" for line in held["failures_as_results"]),
        *(f"INVARIANT BROKEN: {line}" for line in held["violations"]),
    ]


#: How the modes' order is chosen, as summary.json records it beside each seed's order.
ORDER_RULE = "ABBA: modes in their listed order on even seeds, reversed on odd seeds"


def run_order(modes: Sequence[str], seeds: int) -> list[tuple[int, str]]:
    """Every (seed, mode) in the order they run: ABBA across seeds (see ORDER_RULE), so
    that over every two seeds each mode goes first once."""
    return [
        (seed, mode)
        for seed in range(seeds)
        for mode in (modes if seed % 2 == 0 else tuple(reversed(modes)))
    ]


def seed_orders(modes: Sequence[str], seeds: int) -> dict[str, list[str]]:
    """Each seed's modes in the order they ran (summary.json's ``order.per_seed``)."""
    orders: dict[str, list[str]] = {}
    for seed, mode in run_order(modes, seeds):
        orders.setdefault(str(seed), []).append(mode)
    return orders


@dataclass(frozen=True)
class BringUp:
    """One bring-up: the topology variant it runs (its file suffix, see :func:`bring_ups`)
    and the (seed, mode) runs it serves, in order."""

    suffix: str
    runs: tuple[tuple[int, str], ...]


def plan_bring_ups(experiment: Experiment, params: Any, seeds: int) -> list[BringUp]:
    """The runs of :func:`run_order`, cut into bring-ups wherever the next run needs
    another topology variant than the one before it."""
    suffix_of = {
        mode: suffix
        for suffix, (_, modes) in bring_ups(experiment, params).items()
        for mode in modes
    }
    plan: list[BringUp] = []
    for seed, mode in run_order(experiment.modes_of(params), seeds):
        suffix = suffix_of[mode]
        if plan and plan[-1].suffix == suffix:
            plan[-1] = BringUp(suffix, (*plan[-1].runs, (seed, mode)))
        else:
            plan.append(BringUp(suffix, ((seed, mode),)))
    return plan


def _measure(
    experiment: Experiment,
    plan: list[BringUp],
    files: dict[str, Path],
    variants: dict[str, Variant],
    target: str,
    params: Any,
    directory: Path,
    path_mode: str | None = None,
) -> tuple[dict[str, dict[str, dict[str, Any]]], dict[str, dict[str, Any]], list[dict[str, Any]]]:
    """Bring each planned network up, run its runs, tear it down; the records and time series
    per mode and seed, and each bring-up's account (its runs, its controller's event log,
    what its teardown left)."""
    modes = experiment.modes_of(params)
    runs: dict[str, dict[str, dict[str, Any]]] = {mode: {} for mode in modes}
    series: dict[str, dict[str, Any]] = {mode: {} for mode in modes}
    done: list[dict[str, Any]] = []
    per_suffix = {b.suffix: sum(1 for o in plan if o.suffix == b.suffix) for b in plan}
    seen: dict[str, int] = {}
    sequence = 0
    for bring_up in plan:
        seen[bring_up.suffix] = seen.get(bring_up.suffix, 0) + 1
        numbered = f"-{seen[bring_up.suffix]}" if per_suffix[bring_up.suffix] > 1 else ""
        events_name = f"controller-events{bring_up.suffix}{numbered}.jsonl"
        topology_file = files[bring_up.runs[0][1]]
        routing = variants[bring_up.suffix].routing
        account: dict[str, Any] = {
            "topology": topology_file.name,
            "runs": [f"{seed}/{mode}" for seed, mode in bring_up.runs],
            "controller_events": None,
            "routing": routing or "the controller's default",
            "path_mode": path_mode or "ecmp",
        }
        with (
            Testbed.open(
                str(topology_file),
                target,
                experiment.discovery,
                routing,
                path_mode,
            ) as testbed,
            _live_view(testbed),
        ):
            if testbed.controller is not None:
                # the policy the controller ran, its default included ("reactive")
                account["routing"] = str(testbed.controller.routing)
            for seed, mode in bring_up.runs:
                log.info("%s: seed %d, mode %s", experiment.name, seed, mode)
                record, samples = measured_run(experiment, testbed, params, mode, seed)
                record["sequence"] = sequence
                sequence += 1
                runs[mode][str(seed)] = record
                series[mode][str(seed)] = samples
            if testbed.controller is not None and testbed.controller.event_log.is_file():
                # The run directory goes with the teardown; the controller's account of link
                # state and failovers stays with the results, for explaining odd figures.
                shutil.copyfile(testbed.controller.event_log, directory / events_name)
                account["controller_events"] = events_name
        account["teardown"] = str(testbed.leftovers)  # set by the teardown ending the block
        done.append(account)
    for mode in modes:  # summary.json lists seeds in order, whatever ran first
        runs[mode] = dict(sorted(runs[mode].items(), key=lambda item: int(item[0])))
        series[mode] = dict(sorted(series[mode].items(), key=lambda item: int(item[0])))
    return runs, series, done


def _live_view(testbed: Testbed) -> contextlib.AbstractContextManager[object]:
    """With ``LIVE=1`` in the environment, the live page of each bring-up (``LIVE_PORT``,
    default 8765): its cost lands in the runs' CPU accounts, so figures are made without it."""
    if os.environ.get("LIVE") != "1":
        return contextlib.nullcontext()
    from testbed.live import live_view

    return live_view(testbed, port=int(os.environ.get("LIVE_PORT") or 8765), say=log.warning)


def measured_run(
    experiment: Experiment, testbed: Testbed, params: Any, mode: str, seed: int
) -> tuple[dict[str, Any], dict[str, Any]]:
    """One run of ``mode`` and ``seed``, with what limited it: each core's load (and how much
    of it this run's processes took, how much the machine's other processes) and each fabric
    link direction's utilisation over the run's window, and the verdict (``cpu``,
    ``link_utilisation``, ``window_s``, ``bottleneck`` in its record)."""
    before = _status_or_unread(testbed)
    processes_before, cpu_before = process_times(), core_times()
    started = time.monotonic()
    record, samples = experiment.run_mode(testbed, params, mode, seed)
    window_s = time.monotonic() - started
    cpu_after, processes_after = core_times(), process_times()
    cpu = core_load(cpu_before, cpu_after)
    cpu["processes"] = process_load(
        processes_before, processes_after, core_jiffies(cpu_before, cpu_after), os.getpid()
    )
    after = _status_or_unread(testbed)
    links = link_utilisation(testbed.topology, hop_loads(testbed.topology, before, after), window_s)
    record.update(
        window_s=window_s,
        cpu=cpu,
        link_utilisation=links,
        bottleneck=run_bottleneck(cpu, links),
    )
    return record, samples


def _status_or_unread(testbed: Testbed) -> dict[str, Any]:
    """The controller's status, or one in which no switch's counters were read (a status
    that did not come is no reason to lose the run; its links are recorded as unread)."""
    try:
        return testbed.status()
    except StatusUnavailable as error:
        log.warning("status for the bottleneck record unavailable: %s", error)
        return {"counters": {}, "groups": {}}


def _order_text(order: Mapping[str, list[str]]) -> str:
    return "; ".join(f"seed {seed}: {' then '.join(modes)}" for seed, modes in order.items())


def bring_ups(experiment: Experiment, params: Any) -> dict[str, tuple[Variant, list[str]]]:
    """The experiment's modes grouped by the network they need, in mode order, keyed by the
    suffix of their files: "" when every mode shares one network (``topology.yaml``), else
    ``-<mode>`` of the group's first mode (``topology-<mode>.yaml``)."""
    groups: dict[Variant, list[str]] = {}
    for mode in experiment.modes_of(params):
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
