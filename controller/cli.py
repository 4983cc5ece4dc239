"""``mrc-controller``: run the fabric controller, or ask a running one for its status.

    mrc-controller run leaf-spine                      # a preset name, or a topology file
    mrc-controller run topo.yaml --config ctl.yaml --election-id 20 --socket /tmp/ctl-b.sock
    mrc-controller run leaf-spine --target linux --netns-prefix mn3fa2   # kernel switches
    mrc-controller run leaf-spine --target linux --primary-lock run/ctl.lock  # with a backup
    mrc-controller run leaf-spine --socket /tmp/b.sock --election-id 5 --peer-socket /tmp/a.sock
    mrc-controller run leaf-spine --routing static     # or reactive (default), converge:3
    mrc-controller run leaf-spine --path-mode structured   # or ecmp (default), srv6
    mrc-controller status [--socket PATH] [--json]
    mrc-controller watch [--socket PATH] [--period S] [--all] [--json]   # events as they happen

``run`` stays in the foreground and writes its structured event log (JSON lines) to stdout, or
to ``--event-log FILE``; Ctrl-C or SIGTERM stop it cleanly. A bad topology, configuration or
pipeline path is reported on stderr with exit status 2 before any switch is touched.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import sys
from pathlib import Path

from controller.app.config import ConfigError, ControllerConfig, load_config
from controller.app.eventlog import EventLog
from controller.app.runtime import check_compatible, run_controller
from controller.app.status import format_status
from controller.app.status_socket import (
    StatusSocketBusy,
    StatusUnavailable,
    request_status,
    subscribe,
)
from controller.app.watch import NOTABLE_EVENTS, FabricWatch, format_event, format_period
from controller.targets import DEFAULT_TARGET, controller_target, target_names
from topologies import TopologyError, load_topology
from topologies.paths import PathMode

EXIT_USAGE = 2
EXIT_UNAVAILABLE = 3


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``mrc-controller`` script."""
    args = _parser().parse_args(argv)
    if args.command == "run":
        return _run(args)
    if args.command == "watch":
        return _watch(args)
    return _status(args)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mrc-controller", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    run = commands.add_parser("run", help="run the controller in the foreground")
    run.add_argument("topology", help="a preset name (e.g. leaf-spine) or a topology file")
    run.add_argument("--config", type=Path, help="controller configuration (YAML)")
    run.add_argument(
        "--target",
        choices=target_names(),
        help="; ".join(f"{name}: {controller_target(name).summary}" for name in target_names())
        + f" (default {DEFAULT_TARGET})",
    )
    run.add_argument(
        "--netns-prefix",
        help="linux: switch S is the namespace PREFIX-S ('' : S itself)",
    )
    run.add_argument("--election-id", type=int, help="P4Runtime election id (default 10)")
    run.add_argument(
        "--primary-lock",
        type=Path,
        help="linux: a lock file shared with a backup controller; only its holder writes",
    )
    run.add_argument(
        "--peer-socket",
        type=Path,
        help="the other controller's status socket: while backup, follow its down links",
    )
    run.add_argument("--grpc-host", help="host of every switch's gRPC/Thrift server")
    run.add_argument("--socket", type=Path, dest="status_socket", help="status socket path")
    run.add_argument("--event-log", type=Path, help="write the event log here (default stdout)")
    run.add_argument("--probe-interval-ms", type=int, help="LLDP probe interval")
    run.add_argument(
        "--no-discovery",
        action="store_false",
        dest="discovery",
        default=None,
        help="no link discovery (LLDP on bmv2, carrier on linux): links are as listed",
    )
    run.add_argument(
        "--no-queues", action="store_false", dest="queues", default=None, help="leave queues"
    )
    run.add_argument(
        "--routing",
        metavar="POLICY",
        help="static (prune own dead next hops only), reactive (recompute the fabric at once; "
        "the default) or converge[:SECONDS] (recompute after SECONDS, default 3)",
    )
    run.add_argument(
        "--path-mode",
        choices=[mode.value for mode in PathMode],
        help="how an EV picks its path: ecmp (hashed, the default), structured (EV fields name "
        "the uplinks; bmv2 and tofino) or srv6 (uSID carriers; on linux where the kernel "
        "takes seg6local NEXT-C-SID routes)",
    )
    run.add_argument("-v", "--verbose", action="store_true", help="finsy's own log on stderr")
    status = commands.add_parser("status", help="ask a running controller")
    status.add_argument("--socket", type=Path, default=ControllerConfig().status_socket)
    status.add_argument("--json", action="store_true", help="print the raw JSON")
    watch = commands.add_parser(
        "watch", help="follow a running controller: events as they happen, links every period"
    )
    watch.add_argument("--socket", type=Path, default=ControllerConfig().status_socket)
    watch.add_argument("--period", type=float, default=1.0, help="seconds between link lines")
    watch.add_argument("--all", action="store_true", help="every event, not only notable ones")
    watch.add_argument("--json", action="store_true", help="print the stream's raw JSON lines")
    return parser


def _run(args: argparse.Namespace) -> int:
    try:
        topology = load_topology(args.topology)
        config = load_config(args.config).with_overrides(
            target=args.target,
            netns_prefix=args.netns_prefix,
            election_id=args.election_id,
            primary_lock=args.primary_lock,
            peer_socket=args.peer_socket,
            grpc_host=args.grpc_host,
            status_socket=args.status_socket,
            event_log=args.event_log,
            probe_interval_ms=args.probe_interval_ms,
            discovery=args.discovery,
            queues=args.queues,
            routing=args.routing,
            path_mode=args.path_mode,
        )
        check_compatible(topology, config)
    except (TopologyError, ConfigError) as error:
        print(f"mrc-controller: {error}", file=sys.stderr)
        return EXIT_USAGE
    logging.basicConfig(
        level=logging.INFO if args.verbose else logging.ERROR,
        stream=sys.stderr,
        format="%(asctime)s %(name)s %(levelname)s %(message)s",
    )
    log = EventLog.open(config.event_log)
    try:
        asyncio.run(run_controller(topology, config, log))
    except StatusSocketBusy as error:
        print(f"mrc-controller: {error}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        pass
    finally:
        log.close()
    return 0


def _status(args: argparse.Namespace) -> int:
    try:
        status = request_status(args.socket)
    except StatusUnavailable as error:
        print(f"mrc-controller: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    print(json.dumps(status, indent=2) if args.json else format_status(status))
    return 0


def _watch(args: argparse.Namespace) -> int:
    """Print the subscription until the controller stops or Ctrl-C; 3 if none answers."""
    model = FabricWatch()
    try:
        for message in subscribe(args.socket, args.period):
            kind = model.apply(message)
            if args.json:
                print(json.dumps(message), flush=True)
            elif kind == "event" and (args.all or message["event"].get("event") in NOTABLE_EVENTS):
                print(format_event(message["event"]), flush=True)
            elif kind == "status":
                print(format_period(model), flush=True)
            elif kind in ("status_error", "error"):
                print(f"mrc-controller: {message.get('error')}", file=sys.stderr, flush=True)
    except StatusUnavailable as error:
        print(f"mrc-controller: {error}", file=sys.stderr)
        return EXIT_UNAVAILABLE
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
