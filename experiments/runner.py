"""The runner: an experiment end to end, from the topology files to the results directory.

It writes each bring-up's topology file, finds out what the target can do
(:mod:`experiments.capabilities`), which ``summarize`` gets so that it makes only the
comparisons the target supports, brings each planned network up in turn
(:mod:`experiments.plan`), runs its runs, tears it down, and writes summary.json,
timeseries.json, the figures and summary.txt. Around every run it reads each core's busy time
and the switches' counters, and records the run's CPU load, each fabric link's utilisation
and the verdict on what limited it (:mod:`experiments.bottleneck`).

With a ``progress`` display it tells, on standard error, each bring-up and run as it goes
(:mod:`experiments.progress`); nothing it writes into the results depends on that.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Generic

from controller.app.status_socket import StatusUnavailable
from experiments.bottleneck import link_utilisation, overall_bottleneck, phrase, run_bottleneck
from experiments.capabilities import TargetFacts, probe_target_facts
from experiments.counters import hop_loads
from experiments.cpu import core_times, process_times
from experiments.cpu_load import cpu_load
from experiments.documents import Status
from experiments.experiment import Experiment, F, M, P, R, S
from experiments.invariants import invariant_lines, invariants
from experiments.json_form import to_json
from experiments.plan import ORDER_RULE, BringUp, bring_ups, plan_bring_ups, seed_orders
from experiments.progress import Display, Progress, Step, track
from experiments.records import Run
from experiments.results import new_result_dir, summary_problems, versions, write_json
from experiments.summary import (
    Bottlenecks,
    BringUpAccount,
    ClusterAccount,
    Order,
    Summary,
    TopologyFiles,
)
from experiments.topology_variant import Variant, write_variant
from testbed.session import Testbed
from topologies import load_topology

log = logging.getLogger(__name__)

#: Nothing of a bring-up was left after its teardown.
NOTHING_LEFT = "nothing left"


def run_experiment(
    experiment: Experiment[P, M, R, S, F],
    *,
    topology_ref: str | None,
    target: str,
    seeds: int,
    params: P,
    results_root: Path,
    path_mode: str | None = None,
    progress: Display | None = None,
    backup: bool = False,
) -> Path:
    """Run every seed in every mode (modes alternating which goes first, see
    :mod:`experiments.plan`; one bring-up for consecutive runs on the same topology variant);
    write and return the results directory. ``path_mode`` is how the fabric reads EVs in
    every bring-up (None: the controller's default, ``ecmp``); ``progress`` where the runs
    are told as they go (None: nowhere); ``backup`` runs a backup controller beside the first
    in every bring-up (as the experiment may ask itself)."""
    prepared = prepare(experiment, topology_ref, seeds, params, results_root)
    with track(progress, experiment.name, prepared.steps, setups=len(prepared.plan)) as told:
        facts = probe_target_facts(target)
        measured = measure(
            experiment,
            prepared.plan,
            prepared.files,
            prepared.variants,
            target,
            params,
            prepared.directory,
            path_mode,
            told,
            backup=backup or experiment.backup,
        )
    return write_results(experiment, prepared, target, params, facts, measured)


@dataclass(frozen=True)
class Prepared(Generic[M]):
    """What every run of an experiment needs before the first bring-up, locally or on a
    cluster: the results directory, the topology asked for and each mode's file written
    into the directory, each bring-up's topology variant by file suffix, the plan of
    bring-ups over every seed, and the runs as progress steps in the order they run."""

    directory: Path
    topology_ref: str
    seeds: int
    files: Mapping[M, Path]
    variants: Mapping[str, Variant]
    plan: list[BringUp[M]]
    steps: list[Step]


@dataclass(frozen=True)
class Measured(Generic[M, R, S]):
    """The runs and time series per mode and seed, and each bring-up's account."""

    runs: dict[M, dict[int, Run[R]]]
    series: dict[M, dict[int, S]]
    bring_ups: tuple[BringUpAccount, ...]


def prepare(
    experiment: Experiment[P, M, R, S, F],
    topology_ref: str | None,
    seeds: int,
    params: P,
    results_root: Path,
) -> Prepared[M]:
    """Check the topology, make the results directory and write each mode's topology file
    into it; plan the bring-ups and the runs' steps."""
    if seeds < 1:
        raise ValueError(f"seeds must be at least 1, got {seeds}")
    topology_ref = topology_ref or experiment.default_topology
    if experiment.check_topology is not None:
        experiment.check_topology(load_topology(topology_ref), params)
    directory = new_result_dir(results_root, experiment.name)
    groups = bring_ups(experiment, params)
    files: dict[M, Path] = {}
    for suffix, (variant, members) in groups.items():
        path = write_variant(topology_ref, variant, directory, f"topology{suffix}.yaml")
        files.update((mode, path) for mode in members)
    plan = plan_bring_ups(experiment, params, seeds)
    steps = [
        Step(f"{mode} seed {seed}", experiment.planned_s(params, mode))
        for bring_up in plan
        for seed, mode in bring_up.runs
    ]
    variants = {suffix: variant for suffix, (variant, _) in groups.items()}
    return Prepared(directory, topology_ref, seeds, files, variants, plan, steps)


def write_results(
    experiment: Experiment[P, M, R, S, F],
    prepared: Prepared[M],
    target: str,
    params: P,
    facts: TargetFacts,
    measured: Measured[M, R, S],
    cluster: ClusterAccount | None = None,
) -> Path:
    """Summarize the runs, draw the figures, and write summary.json, timeseries.json and
    summary.txt into the prepared directory, which is returned. ``cluster`` is where the
    runs were made when a cluster made them (None: here)."""
    directory, topology_ref, seeds = prepared.directory, prepared.topology_ref, prepared.seeds
    runs, series, done = measured.runs, measured.series, measured.bring_ups
    files = prepared.files
    modes = experiment.modes_of(params)
    figures = experiment.summarize(runs, facts)
    first_file = files[modes[0]]
    order = seed_orders(modes, seeds)
    bottleneck = {
        mode: overall_bottleneck(run.bottleneck for run in runs[mode].values()) for mode in modes
    }
    held = invariants(runs, experiment.may_fail)
    write_json(directory / "timeseries.json", to_json(series))
    summary = Summary(
        experiment=experiment.name,
        target=target,
        target_facts=facts,
        topology=TopologyFiles(
            ref=topology_ref,
            name=load_topology(str(first_file)).name,
            file=first_file.name,
            files={mode: path.name for mode, path in files.items()},
        ),
        seeds=seeds,
        modes=modes,
        order=Order(ORDER_RULE, order),
        versions=versions(),
        parameters=params,
        runs=runs,
        figures=figures,
        bottleneck=Bottlenecks(
            per_mode=bottleneck,
            all=overall_bottleneck(run.bottleneck for mode in modes for run in runs[mode].values()),
        ),
        invariants=held,
        controller_discovery=experiment.discovery,
        bring_ups=done,
        teardown=_teardown_sentence([bring_up.teardown for bring_up in done]),
        pngs=tuple(experiment.draw(directory, runs, series, params)),
        cluster=cluster,
    )
    write_json(directory / "summary.json", to_json(summary))
    problems = summary_problems(json.loads((directory / "summary.json").read_text()), seeds)
    lines = [
        f"{experiment.name} on {topology_ref} ({target}), {seeds} seed(s); "
        f"commit {summary.versions['project_commit']}, agent "
        f"{summary.versions['agent_build']}",
        f"order: {_order_text(order)} ({len(done)} bring-up(s))",
        *(cluster.lines() if cluster is not None else []),
        *(f"target lacks: {line}" for line in facts.lacks),
        # The modes that may fail are the RoCE ones: each RoCE figure needs its fabric beside it.
        *(
            [f"RoCE's fabric here: {facts.roce_class}"]
            if any(experiment.may_fail(mode) for mode in modes)
            else []
        ),
        *experiment.text(figures),
        *(f"bottleneck, {mode}: {phrase(bottleneck[mode])}" for mode in modes),
        *invariant_lines(held),
        *(f"ILL-FORMED: {problem}" for problem in problems),
    ]
    (directory / "summary.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return directory


def measure(
    experiment: Experiment[P, M, R, S, F],
    plan: list[BringUp[M]],
    files: Mapping[M, Path],
    variants: Mapping[str, Variant],
    target: str,
    params: P,
    directory: Path,
    path_mode: str | None,
    told: Progress,
    first_sequence: int = 0,
    backup: bool = False,
) -> Measured[M, R, S]:
    """Bring each planned network up, run its runs, tear it down; the runs and time series
    per mode and seed, and each bring-up's account (its runs, its controller's event log,
    what its teardown left). Each bring-up, run and teardown is ``told``; the runs are
    numbered from ``first_sequence`` (a cluster's task makes one seed's runs of many);
    ``backup``: a backup controller in every bring-up."""
    modes = experiment.modes_of(params)
    runs: dict[M, dict[int, Run[R]]] = {mode: {} for mode in modes}
    series: dict[M, dict[int, S]] = {mode: {} for mode in modes}
    done: list[BringUpAccount] = []
    per_suffix = {b.suffix: sum(1 for o in plan if o.suffix == b.suffix) for b in plan}
    seen: dict[str, int] = {}
    sequence = first_sequence
    for bring_up in plan:
        seen[bring_up.suffix] = seen.get(bring_up.suffix, 0) + 1
        numbered = f"-{seen[bring_up.suffix]}" if per_suffix[bring_up.suffix] > 1 else ""
        events_name = f"controller-events{bring_up.suffix}{numbered}.jsonl"
        topology_file = files[bring_up.runs[0][1]]
        routing = variants[bring_up.suffix].routing
        ran_routing = routing or "the controller's default"
        events: str | None = None
        told.setup_began(
            f"bring-up {len(done) + 1} of {len(plan)}: {topology_file.name} on {target}"
        )
        with (
            Testbed.open(
                str(topology_file),
                target,
                experiment.discovery,
                routing,
                path_mode,
                backup,
            ) as testbed,
            _live_view(testbed),
        ):
            if testbed.controller is not None:
                # the policy the controller ran, its default included ("reactive")
                ran_routing = str(testbed.controller.routing)
            told.setup_ready(f"fabric up, routing {ran_routing}")
            for seed, mode in bring_up.runs:
                told.step_began(sequence)
                run, samples = measured_run(experiment, testbed, params, mode, seed, sequence)
                told.step_ended(sequence, experiment.headline(run.record))
                sequence += 1
                runs[mode][seed] = run
                series[mode][seed] = samples
            told.now_doing(f"tearing down bring-up {len(done) + 1} of {len(plan)}")
            if testbed.controller is not None and testbed.controller.event_log.is_file():
                # The run directory goes with the teardown; the controller's account of link
                # state and failovers stays with the results, for explaining odd figures.
                shutil.copyfile(testbed.controller.event_log, directory / events_name)
                events = events_name
                _copy_other_controllers(testbed, directory, events_name)
        done.append(
            BringUpAccount(
                topology=topology_file.name,
                runs=tuple(f"{seed}/{mode}" for seed, mode in bring_up.runs),
                controller_events=events,
                routing=ran_routing,
                path_mode=path_mode or "ecmp",
                teardown=str(testbed.leftovers),  # set by the teardown ending the block
            )
        )
        told.setup_ended(f"torn down: {testbed.leftovers}")
    for mode in modes:  # summary.json lists seeds in order, whatever ran first
        runs[mode] = dict(sorted(runs[mode].items()))
        series[mode] = dict(sorted(series[mode].items()))
    return Measured(runs, series, tuple(done))


def _copy_other_controllers(testbed: Testbed, directory: Path, events_name: str) -> None:
    """With a backup in the run, the log of each controller that was not acting at the end
    goes beside the acting one's (``controller-events...`` -> ``controller-<name>-events...``):
    a takeover is explained by both."""
    controllers, acting = testbed.controllers, testbed.controller
    if controllers is None or acting is None:
        return
    for name, run in controllers.runs.items():
        if run.event_log != acting.event_log and run.event_log.is_file():
            other = events_name.replace("controller-events", f"controller-{name}-events", 1)
            shutil.copyfile(run.event_log, directory / other)


def _live_view(testbed: Testbed) -> contextlib.AbstractContextManager[object]:
    """With ``LIVE=1`` in the environment, the live page of each bring-up (``LIVE_PORT``,
    default 8765): its cost lands in the runs' CPU accounts, so figures are made without it."""
    if os.environ.get("LIVE") != "1":
        return contextlib.nullcontext()
    from testbed.live import live_view

    return live_view(testbed, port=int(os.environ.get("LIVE_PORT") or 8765), say=log.warning)


def measured_run(
    experiment: Experiment[P, M, R, S, F],
    testbed: Testbed,
    params: P,
    mode: M,
    seed: int,
    sequence: int,
) -> tuple[Run[R], S]:
    """One run of ``mode`` and ``seed``, the ``sequence``-th made, with what limited it:
    each core's load (and how much of it this run's processes took, how much the machine's
    other processes) and each fabric link direction's utilisation over the run's window,
    and the verdict."""
    before = _status_or_unread(testbed)
    processes_before, cores_before = process_times(), core_times()
    started = time.monotonic()
    record, samples = experiment.run_mode(testbed, params, mode, seed)
    window_s = time.monotonic() - started
    cores_after, processes_after = core_times(), process_times()
    cpu = cpu_load(cores_before, cores_after, processes_before, processes_after, os.getpid())
    after = _status_or_unread(testbed)
    links = link_utilisation(testbed.topology, hop_loads(testbed.topology, before, after), window_s)
    run = Run(
        record=record,
        window_s=window_s,
        cpu=cpu,
        link_utilisation=links,
        bottleneck=run_bottleneck(cpu, links),
        sequence=sequence,
    )
    return run, samples


def _status_or_unread(testbed: Testbed) -> Status:
    """The controller's status, or one in which no switch's counters were read (a status
    that did not come is no reason to lose the run; its links are recorded as unread)."""
    try:
        return testbed.status()
    except StatusUnavailable as error:
        log.warning("status for the bottleneck record unavailable: %s", error)
        return {"counters": {}, "groups": {}}


def _order_text(order: Mapping[str, list[str]]) -> str:
    return "; ".join(f"seed {seed}: {' then '.join(modes)}" for seed, modes in order.items())


def _teardown_sentence(leftovers: list[str]) -> str:
    """One sentence for every bring-up's teardown: "nothing left" only when none left anything."""
    left = [sentence for sentence in leftovers if sentence != NOTHING_LEFT]
    return NOTHING_LEFT if not left else "; ".join(left)
