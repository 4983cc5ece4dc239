"""``mrc-perf``: goodput of one MRC connection, like ib_write_bw or iperf3.

Client: ``mrc-perf --to HOST[:PORT] [--bytes N] [--duration S] [--evs K] [--cc NAME] [--json]``
writes into the peer's sink as fast as the connection allows and reports goodput (bytes the
receiver confirmed), retransmits by cause, trims, ECN, RTT, window and the per-EV table.
``--transport single`` (``--evs 1``) is MRC on one path; ``--transport roce`` standard
RoCEv2 RC QPs (``agent.roce``), the baseline MRC replaces, as ``--roce-profile`` runs them over
``--qps`` QPs. It runs through the host's agent when one is running (``--evs``/``--cc`` then
apply to this connection only), otherwise on an endpoint of its own. Server: ``mrc-perf
--server --plane ADDR`` (or any ``mrc-agent serve``).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Callable, Sequence
from typing import Any

from agent.cli.common import (
    EXIT_CODES_EPILOG,
    add_config_options,
    add_plane_option,
    add_receive_options,
    add_socket_option,
    add_transport_options,
    add_verbosity_options,
    config_from_args,
    configure_logging,
    inbound_from_args,
    parse_size,
    planes_from_args,
    positive_float,
    run_command,
    side_channel_secret,
    transport_from_args,
)
from agent.cli.report import format_rate, perf_report, progress_line
from agent.core import MrcConfig
from agent.io.addresses import format_address, parse_peer
from agent.io.control_client import connect_to_agent
from agent.io.control_protocol import PerfRequest
from agent.io.control_server import default_socket_path
from agent.io.errors import UsageError
from agent.io.inbound import SideChannelServer
from agent.io.perf_transfer import (
    DEFAULT_INTERVAL,
    DEFAULT_PERF_MESSAGE_SIZE,
    PerfSample,
    PerfTransfer,
)
from agent.io.runtime import AgentRuntime
from agent.io.side_channel import SIDE_CHANNEL_PORT
from agent.io.transport import MRC, RoceSetup, Transport

PROG = "mrc-perf"


def build_parser() -> argparse.ArgumentParser:
    """The ``mrc-perf`` command line."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Goodput of an MRC connection (like ib_write_bw / iperf3).",
        epilog=EXIT_CODES_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    role = parser.add_mutually_exclusive_group(required=True)
    role.add_argument("--to", metavar="HOST[:PORT]", help="measure towards this agent")
    role.add_argument("--server", action="store_true", help="be the receiving side")
    parser.add_argument(
        "--bytes",
        type=parse_size,
        metavar="N",
        help="stop after N bytes (64K, 1G, ...) instead of after --duration",
    )
    parser.add_argument(
        "--duration",
        type=positive_float,
        metavar="S",
        help="seconds to send (default 10 unless --bytes is given)",
    )
    parser.add_argument(
        "--message-size",
        type=parse_size,
        default=DEFAULT_PERF_MESSAGE_SIZE,
        metavar="BYTES",
        help="bytes per RDMA write (default 64K)",
    )
    parser.add_argument(
        "--interval",
        type=positive_float,
        default=DEFAULT_INTERVAL,
        metavar="S",
        help="seconds between progress samples (default 1)",
    )
    add_config_options(parser)
    add_transport_options(parser)
    parser.add_argument("--json", action="store_true", help="print the full result as JSON")
    parser.add_argument(
        "--ev-table", action="store_true", help="list every EV even when there are many"
    )
    add_plane_option(parser, "required with --server; otherwise the route to the peer")
    add_receive_options(parser)
    add_socket_option(parser)
    parser.add_argument(
        "--no-agent",
        action="store_true",
        help="run an endpoint of this command's own even if an agent is running",
    )
    add_verbosity_options(parser)
    return parser


def run_server(args: argparse.Namespace) -> int:
    """Serve sinks until interrupted (a plain ``mrc-agent serve`` without files or socket)."""
    planes = planes_from_args(args.plane, None)
    listen, policy = inbound_from_args(args, planes, None)
    runtime = AgentRuntime(planes, config_from_args(args), side_channel_secret=policy.secret)
    try:
        side = SideChannelServer(runtime, listen, policy)
        try:
            print(
                f"{PROG}: server ready: planes {', '.join(format_address(p) for p in planes)}; "
                f"side channel {', '.join(map(str, side.addresses))}",
                flush=True,
            )
            runtime.run(lambda: False)
        except KeyboardInterrupt:
            print(f"{PROG}: stopping", file=sys.stderr)
    finally:
        runtime.close()
    return 0


def run_client(args: argparse.Namespace) -> int:
    """Measure, print the report, exit 0."""
    peer = parse_peer(args.to, SIDE_CHANNEL_PORT)
    transport, roce = transport_from_args(args)
    live = sys.stdout.isatty() and not args.json

    def show(sample: dict[str, Any]) -> None:
        if live:
            print(progress_line(sample), flush=True)

    result: dict[str, Any] | None = None
    if not args.no_agent:
        client = connect_to_agent(args.socket or default_socket_path())
        if client is not None:
            if args.plane or args.payload or args.secret_file:
                client.close()
                raise UsageError(
                    "--plane/--payload/--secret-file configure an endpoint of this command's "
                    "own, but the "
                    f"agent at {client.path} is running and owns UDP 4791: drop them"
                )
            with client:
                logging.getLogger(__name__).info("measuring through the agent at %s", client.path)
                result = client.request(
                    PerfRequest(
                        to=args.to,
                        total_bytes=args.bytes,
                        duration=args.duration,
                        evs=args.evs,
                        cc=args.cc,
                        message_size=args.message_size,
                        interval=args.interval,
                        transport=args.transport,
                        roce_profile=args.roce_profile,
                        roce_timeout=args.roce_timeout,
                        roce_retry_cnt=args.roce_retry_cnt,
                        roce_qps=args.qps,
                        roce_line_rate=args.roce_line_rate,
                    ),
                    on_progress=show,
                )
    if result is None:
        planes = planes_from_args(args.plane, peer.host)
        result = measure(
            planes, config_from_args(args), args, lambda s: show(s.to_json()), transport, roce
        )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(perf_report(result, args.ev_table))
    return 0


def measure(
    planes: tuple[bytes, ...],
    config: MrcConfig,
    args: argparse.Namespace,
    on_progress: Callable[[PerfSample], None],
    transport: Transport = MRC,
    roce: RoceSetup | None = None,
) -> dict[str, Any]:
    """One measurement on an endpoint of this process's own."""
    runtime = AgentRuntime(planes, config, side_channel_secret=side_channel_secret(args))
    try:
        transfer = PerfTransfer(
            runtime,
            parse_peer(args.to, SIDE_CHANNEL_PORT),
            message_size=args.message_size,
            duration=args.duration,
            total_bytes=args.bytes,
            interval=args.interval,
            on_progress=on_progress,
            transport=transport,
            roce=roce,
        )
        transfer.start()
        runtime.run(lambda: transfer.finished)
    finally:
        runtime.close()
    if transfer.error is not None:
        raise transfer.error
    assert transfer.result is not None
    logging.getLogger(__name__).info("goodput %s", format_rate(transfer.result["goodput_bps"]))
    return transfer.result


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mrc-perf``."""
    args = build_parser().parse_args(argv)
    configure_logging(max(args.verbose, 1) if args.server else args.verbose)
    if args.server:
        return run_command(PROG, lambda: run_server(args))
    return run_command(PROG, lambda: run_client(args))


if __name__ == "__main__":
    sys.exit(main())
