"""``python -m experiments NAME`` (``make experiment NAME=...``): run one experiment end to end.

    python -m experiments failover [--topo leaf-spine] [--target auto|bmv2|linux] [--seeds 5]
                                   [--set duration_s=10 --set cut_at_s=3 ...] [--out results]
                                   [--routing static|reactive|converge[:SECONDS][,...]]
                                   [--path-mode ecmp|structured|srv6]
                                   [--cluster tcp://HOST:PORT]

Prints the results directory and its summary.txt on standard output; on standard error, as
it goes, each run's start and end with its key figure and the time left (a live bar on a
terminal, plain lines elsewhere; ``-v`` adds what happens inside each run: see
:mod:`experiments.progress`). Exit status: 0 when the invariants held
(every transfer that must complete did, without losing a byte; a RoCE transfer that failed
is recorded as a result) and the results are well-formed; 1 otherwise (the results are
written all the same); 2 for bad arguments; 3 when the target cannot run here; 130 when
interrupted (Ctrl-C, SIGTERM, SIGHUP: the testbed is torn down first).

With ``--cluster`` (``make experiment CLUSTER=...``) each seed runs as a task on the Dask
cluster at that address (:mod:`experiments.cluster`); the results are written here, as a local
run writes them. Without it Dask is never imported.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import logging
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from experiments.experiment import AnyExperiment
from experiments.registry import EXPERIMENTS
from experiments.results import REPO, summary_problems
from testbed.targets import AUTO, target_help

#: ``run_experiment`` or its cluster counterpart: the results directory of the run.
RunExperiment = Callable[..., Path]

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
#: Ctrl-C, SIGTERM or SIGHUP: the testbed was torn down, no results were written.
EXIT_INTERRUPTED = 130


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m experiments", description=__doc__.splitlines()[0]
    )
    parser.add_argument("name", choices=sorted(EXPERIMENTS))
    parser.add_argument("--topo", help="a preset or topology file (default: the experiment's)")
    parser.add_argument("--target", default=AUTO, help=target_help())
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="an experiment parameter (see each experiment module's Params)",
    )
    parser.add_argument(
        "--routing",
        metavar="POLICY",
        help="the controller's routing policy (static, reactive, converge[:SECONDS]; failover "
        "takes a comma-separated list): the experiment's routings/routing parameter",
    )
    parser.add_argument(
        "--roce",
        metavar="PROFILES",
        help="the RoCE profiles a bare 'roce' transport stands for, comma-separated "
        "(perftest, nccl, adaptive; default all): the experiment's roce_profiles parameter",
    )
    parser.add_argument(
        "--path-mode",
        choices=("ecmp", "structured", "srv6"),
        help="how the fabric reads EVs in every bring-up (default ecmp; the others on bmv2)",
    )
    parser.add_argument(
        "--backup",
        action="store_true",
        help="a backup controller beside the first in every bring-up (the controller "
        "experiment always has one)",
    )
    parser.add_argument(
        "--cluster",
        metavar="tcp://HOST:PORT",
        help="run each seed on a worker of this Dask scheduler (make cluster-scheduler)",
    )
    parser.add_argument("--out", type=Path, default=REPO / "results", help="results root")
    parser.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help="log at INFO, and tell the events inside each run (bring-ups, cuts, iterations)",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.WARNING,
        format="%(asctime)s %(name)s: %(message)s",
    )
    from experiments.cluster.job import ClusterRunFailed
    from experiments.experiment import parse_params
    from experiments.progress import Display
    from experiments.runner import run_experiment
    from testbed.targets import (
        PathModeUnavailable,
        TargetUnavailable,
        check_path_mode,
        choose_target,
    )
    from topologies import TopologyError, load_topology
    from topologies.paths import PathMode

    experiment = EXPERIMENTS[args.name]
    try:
        settings = dict(_split_setting(item) for item in args.set)
        if args.routing is not None:
            settings.update(_routing_setting(experiment, args.routing, settings))
        if args.roce is not None:
            settings.update(_roce_setting(experiment, args.roce, settings))
        params = parse_params(experiment, settings)
        topology = load_topology(args.topo or experiment.default_topology)
        if experiment.check_topology is not None:
            experiment.check_topology(topology, params)
        if args.seeds < 1:
            raise ValueError(f"--seeds must be at least 1, got {args.seeds}")
    except (ValueError, TopologyError) as error:
        print(f"experiments: {error}", file=sys.stderr)
        return EXIT_USAGE
    try:
        # Resolved here, so that summary.json names the target that ran, never "auto".
        choice = choose_target(args.target, topology)
        print(f"experiments: {choice.announcement}", file=sys.stderr)
        if args.path_mode is not None:
            check_path_mode(choice.target, PathMode(args.path_mode))
        run: RunExperiment = run_experiment if args.cluster is None else _on_cluster(args.cluster)
        directory = run(
            experiment,
            topology_ref=args.topo,
            target=choice.target.name,
            seeds=args.seeds,
            params=params,
            results_root=args.out,
            path_mode=args.path_mode,
            progress=Display(verbose=args.verbose),
            backup=args.backup,
        )
    except (TargetUnavailable, PathModeUnavailable) as error:
        print(f"experiments: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except ValueError as error:  # a target name that is no target
        print(f"experiments: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        if args.cluster is not None:  # Dask cannot stop a task's thread once it runs
            print(
                "experiments: interrupted; seeds not started were cancelled, a worker running "
                "one tears its testbed down when the seed ends",
                file=sys.stderr,
            )
            return EXIT_INTERRUPTED
        print("experiments: interrupted; the testbed was torn down", file=sys.stderr)
        return EXIT_INTERRUPTED
    except ClusterRunFailed as error:  # a sweep on a cluster that could not complete
        print(f"experiments: on {args.cluster}: {error}", file=sys.stderr)
        return EXIT_FAILED
    print(f"results: {directory}")
    print((directory / "summary.txt").read_text(), end="")
    summary = json.loads((directory / "summary.json").read_text())
    healthy = not summary_problems(summary, args.seeds) and summary["invariants"]["held"]
    return 0 if healthy else EXIT_FAILED


def _on_cluster(address: str) -> RunExperiment:
    """``run_experiment``'s counterpart that runs each seed on the cluster at ``address``:
    imported only here, so that a local run never loads Dask."""
    from experiments.cluster.fanout import run_on_cluster

    return functools.partial(run_on_cluster, address=address)


def _routing_setting(
    experiment: AnyExperiment, routing: str, settings: dict[str, str]
) -> dict[str, str]:
    """``--routing`` (``make experiment ROUTING=``) as the experiment's routing parameter:
    ``routings`` where it compares several, ``routing`` where it runs under one."""
    names = {field.name for field in dataclasses.fields(experiment.params_type)}
    for name in ("routings", "routing"):
        if name in names:
            if name in settings:
                raise ValueError(f"--routing and --set {name}=... both given: keep one")
            return {name: routing}
    raise ValueError(f"{experiment.name} takes no routing policy: it cuts no link")


def _roce_setting(
    experiment: AnyExperiment, profiles: str, settings: dict[str, str]
) -> dict[str, str]:
    """``--roce`` (``make experiment ROCE=``) as the experiment's ``roce_profiles``."""
    names = {field.name for field in dataclasses.fields(experiment.params_type)}
    if "roce_profiles" not in names:
        raise ValueError(f"{experiment.name} runs no RoCE: it takes no --roce")
    if "roce_profiles" in settings:
        raise ValueError("--roce and --set roce_profiles=... both given: keep one")
    return {"roce_profiles": profiles}


def _split_setting(item: str) -> tuple[str, str]:
    name, sep, value = item.partition("=")
    if not sep or not name:
        raise ValueError(f"--set {item!r}: expected NAME=VALUE")
    return name.strip(), value.strip()


if __name__ == "__main__":
    raise SystemExit(main())
