"""``python -m testbed``: the testbed runner (``make run-topology``, ``make stop``).

    python -m testbed run [TOPO] [--target auto|bmv2|linux]   # bring up, open the CLI, tear down
        [--routing static|reactive|converge[:SECONDS]]      # the controller's routing policy
        [--path-mode ecmp|structured|srv6]                  # how EVs pick paths (docs/routing.md)
        [--backup]                                          # a backup controller beside the first
        [--live-port 8765] [--live-host 127.0.0.1] [--no-live]  # the live view (web page)
    python -m testbed stop [PREFIX...]             # stop every run (or those) and clean up

``--target auto`` (the default) takes ``bmv2`` where its tools are present and ``linux`` (kernel
switches) otherwise, and says which in one line; the banner lists what the target does not do.
``run`` reads CLI commands from stdin, so a script can drive it (``python -m testbed run <
commands.txt``). Exit status: 0 when the run came up, every command succeeded and nothing was
left behind; 1 when a command failed (stdin not a terminal) or the teardown left something;
2 for a topology or target that does not exist; 3 when the target cannot run on this machine
(the message lists what is missing and how to get it).

The live view (``testbed.live``) is served while the CLI runs, on 127.0.0.1 unless
``--live-host`` says otherwise (then with a token, in the URL the banner prints).
"""

from __future__ import annotations

import argparse
import contextlib
import faulthandler
import os
import shutil
import signal
import sys
import time
from collections.abc import Sequence

from testbed.targets import AUTO, target_help
from topologies import TopologyError
from topologies.presets import PRESETS

EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3
#: Seconds ``stop`` gives a live runner to tear its own run down before sweeping it.
RUNNER_STOP_TIMEOUT_S = 30.0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m testbed", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="bring a topology up and open the CLI")
    run.add_argument(
        "topology",
        nargs="?",
        default="leaf-spine",
        help=f"a preset ({', '.join(PRESETS)}) or a topology file (default leaf-spine)",
    )
    run.add_argument(
        "--target",
        default=AUTO,
        help=target_help(),
    )
    run.add_argument(
        "--routing",
        type=_routing,
        help="the controller's routing policy: static, reactive (its default) or "
        "converge[:SECONDS] (docs/routing.md)",
    )
    run.add_argument(
        "--path-mode",
        choices=("ecmp", "structured", "srv6"),
        help="how the fabric reads a packet's EV: ecmp (hashed, the default), structured (EV "
        "fields name the uplinks; bmv2) or srv6 (bmv2, and linux where the kernel routes uSID "
        "carriers; docs/routing.md)",
    )
    run.add_argument(
        "--backup",
        action="store_true",
        help="run a backup controller that takes over when the primary dies "
        "(docs/controller-failover.md)",
    )
    run.add_argument("--live-port", type=int, default=8765, help="the live view's port")
    run.add_argument(
        "--live-host",
        default="127.0.0.1",
        help="the live view's address (not loopback: a token is required, printed in its URL)",
    )
    run.add_argument("--no-live", action="store_true", help="serve no live view")
    stop = commands.add_parser("stop", help="stop testbed runs and remove what they left")
    stop.add_argument("prefixes", nargs="*", help="runs to stop (default: every run)")
    args = parser.parse_args(argv)
    # `kill -USR1 <runner>` prints where every thread of a stuck runner is (tests use it).
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if args.command == "run":
        live = None if args.no_live else (args.live_host, args.live_port)
        return _run(args.topology, args.target, live, args.routing, args.path_mode, args.backup)
    return _stop(args.prefixes)


def _routing(text: str) -> str:
    """A routing policy as ``--routing`` takes it, normalised (``converge`` -> ``converge:3``)."""
    from controller.intent.policy import RoutingPolicy

    try:
        return str(RoutingPolicy.parse(text))
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _run(
    topology_ref: str,
    target: str,
    live: tuple[str, int] | None = None,
    routing: str | None = None,
    path_mode: str | None = None,
    backup: bool = False,
) -> int:
    from mininet.log import setLogLevel

    from testbed.cli import TestbedCLI
    from testbed.live import live_view
    from testbed.session import Testbed
    from testbed.targets import PathModeUnavailable, TargetUnavailable

    setLogLevel("output")
    try:
        testbed = Testbed(topology_ref, target, routing=routing, path_mode=path_mode, backup=backup)
    except (TargetUnavailable, PathModeUnavailable) as error:
        print(f"testbed: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except (TopologyError, ValueError) as error:
        print(f"testbed: {error}", file=sys.stderr)
        return EXIT_USAGE
    print(testbed.target_announcement, flush=True)
    failures = 0
    try:
        with testbed.running():
            print(testbed.network.summary())
            for difference in testbed.target_differences():
                print(f"  {testbed.target}: {difference}")
            assert testbed.controller is not None
            print(
                f"controller: routing {testbed.controller.routing}, paths "
                f"{testbed.controller.path_mode}, status socket "
                f"{testbed.controller.socket}; agents on "
                f"{len(testbed.topology.hosts)} hosts; logs in {testbed.run_dir}"
            )
            if backup:
                print("backup controller: connected to every switch, ready to take over")
            with contextlib.ExitStack() as page:
                if live is not None:
                    page.enter_context(live_view(testbed, host=live[0], port=live[1]))
                print(
                    "testbed ready: fail, restore, restart, mrc, collective, controller, status; "
                    "exit or Ctrl-C ends it",
                    flush=True,
                )
                cli = TestbedCLI(testbed)
                failures = cli.failures
    except KeyboardInterrupt:
        print("\ninterrupted", file=sys.stderr)
    left = testbed.leftovers
    print(f"run {testbed.prefix} torn down: {left}", flush=True)
    if left != "nothing left":
        return EXIT_FAILED
    return EXIT_FAILED if failures and not sys.stdin.isatty() else 0


def _stop(prefixes: Sequence[str]) -> int:
    """Ask each live runner to tear its run down (SIGTERM, as Ctrl-C), then sweep what is
    left of every run, or of the named ones: a runner killed with SIGKILL leaves its switches,
    agents and controller, which the sweep finds by the run prefix in their names."""
    from testbed.mininet.cleanup import prefixes_on_machine, sweep
    from testbed.mininet.naming import NamingError, check_run_prefix
    from testbed.mininet.runs import recorded_runs, runs_root

    try:
        chosen = {check_run_prefix(prefix) for prefix in prefixes}
    except NamingError as error:
        print(f"testbed: {error}", file=sys.stderr)
        return EXIT_USAGE
    for record in recorded_runs(runs_root()).values():
        if chosen and record.prefix not in chosen:
            continue
        if record.owner_alive and record.owner_pid != os.getpid():
            print(f"{record.prefix}: asking its runner (pid {record.owner_pid}) to stop")
            with contextlib.suppress(ProcessLookupError):
                os.kill(record.owner_pid, signal.SIGTERM)
            deadline = time.monotonic() + RUNNER_STOP_TIMEOUT_S
            while record.owner_alive and time.monotonic() < deadline:
                time.sleep(0.2)
    status = 0
    for prefix in sorted(chosen or prefixes_on_machine()):
        left = sweep(prefix)
        shutil.rmtree(runs_root() / prefix, ignore_errors=True)
        print(f"{prefix}: {'removed' if left.empty else f'could not remove {left}'}")
        if not left.empty:
            status = EXIT_FAILED
    print("testbed: nothing running" if status == 0 else "testbed: something could not be removed")
    return status


if __name__ == "__main__":
    raise SystemExit(main())
