"""Command line for debugging bring-up and cleaning after crashes.

    python -m testbed.mininet up leaf-spine     # bring up, print a summary, wait for Ctrl-C
    python -m testbed.mininet up leaf-spine --target linux   # kernel switches instead of BMv2
    python -m testbed.mininet list              # runs on this machine and their owners
    python -m testbed.mininet clean             # remove runs whose owner is gone
    python -m testbed.mininet clean --all       # remove every run, live or not (`make stop`)

``up`` tears everything down on Ctrl-C, SIGTERM or SIGHUP and exits 0; a topology that does
not load exits 2, a machine that cannot run it (no root, no BMv2, a port taken) exits 1 with
what is missing. A network brought up here is unprogrammed: BMv2s hold no program, kernel
switches no routes (the controller writes both). ``clean`` exits 1 if something of a run
could not be removed.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import threading
from collections.abc import Sequence

from controller.targets import DEFAULT_TARGET
from testbed.mininet.switch_target import switch_target_names
from topologies.errors import TopologyError
from topologies.presets import PRESETS, load_topology


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    args = build_parser().parse_args(argv)
    if args.command == "up":
        return _up(args.topology, args.target, args.keep_logs, args.startup_timeout)
    if args.command == "list":
        return _list()
    return _clean(args.prefixes, args.all)


def build_parser() -> argparse.ArgumentParser:
    """The command line: ``up``, ``list``, ``clean``."""
    parser = argparse.ArgumentParser(prog="python -m testbed.mininet", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    up = commands.add_parser("up", help="bring a topology up and wait for Ctrl-C")
    up.add_argument("topology", help=f"a preset ({', '.join(PRESETS)}) or a topology file")
    up.add_argument(
        "--target",
        choices=switch_target_names(),
        default=DEFAULT_TARGET,
        help=f"switch target (default {DEFAULT_TARGET})",
    )
    up.add_argument("--keep-logs", action="store_true", help="keep the BMv2 logs after teardown")
    up.add_argument(
        "--startup-timeout", type=float, default=30.0, help="seconds each switch gets to start"
    )
    commands.add_parser("list", help="list the runs on this machine")
    clean = commands.add_parser("clean", help="remove what runs left behind")
    clean.add_argument("prefixes", nargs="*", help="runs to remove (default: those with no owner)")
    clean.add_argument("--all", action="store_true", help="remove every run, even live ones")
    return parser


def _up(topology_name: str, target: str, keep_logs: bool, startup_timeout: float) -> int:
    from hostenv.netns import terminate_on_signals
    from testbed.mininet.network import BringUpError, TestbedNetwork

    try:
        topology = load_topology(topology_name)
    except TopologyError as error:
        print(error, file=sys.stderr)
        return 2
    network = TestbedNetwork(
        topology, target=target, keep_logs=keep_logs, startup_timeout=startup_timeout
    )
    try:
        with terminate_on_signals(), network:
            print(network.summary())
            print(f"run {network.prefix} ready; Ctrl-C tears it down", flush=True)
            threading.Event().wait()
    except BringUpError as error:
        print(error, file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    left = network.leftovers
    print(f"run {network.prefix} torn down: {left}", flush=True)
    return 0 if left is None or left.empty else 1


def _list() -> int:
    from testbed.mininet.cleanup import prefixes_on_machine
    from testbed.mininet.runs import recorded_runs, runs_root

    records = recorded_runs(runs_root())
    for prefix in sorted(prefixes_on_machine()):
        record = records.get(prefix)
        if record is None:
            print(f"{prefix}  no owner record (stale)")
        else:
            state = "live" if record.owner_alive else "stale"
            print(f"{prefix}  {record.topology}  owner pid {record.owner_pid} ({state})")
    return 0


def _clean(prefixes: Sequence[str], everything: bool) -> int:
    from testbed.mininet.cleanup import prefixes_on_machine, stale_prefixes, sweep
    from testbed.mininet.naming import NamingError, check_run_prefix
    from testbed.mininet.runs import runs_root

    try:
        targets = {check_run_prefix(prefix) for prefix in prefixes}
    except NamingError as error:
        print(error, file=sys.stderr)
        return 2
    if not targets:
        targets = prefixes_on_machine() if everything else stale_prefixes()
    status = 0
    for prefix in sorted(targets):
        left = sweep(prefix)
        shutil.rmtree(runs_root() / prefix, ignore_errors=True)
        print(f"{prefix}: {'removed' if left.empty else f'could not remove {left}'}")
        if not left.empty:
            status = 1
    if not targets:
        print("nothing to clean")
    return status
