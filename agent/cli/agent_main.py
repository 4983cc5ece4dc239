"""``mrc-agent``: the host's MRC endpoint (``serve``), and sending files with it (``send``).

``serve`` is to this host what a RoCE NIC is: it owns UDP 4791, sprays every connection over
its EVs, answers peers on the TCP side channel (default port 18515) and takes work from local
clients on a Unix socket. ``send`` hands a file to that agent, or, when none runs, starts an
endpoint of its own for the duration of the command. ``status`` shows what the agent holds.
Exit codes: see ``agent.io.errors.ExitCode``.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agent.api.service import ApiService
from agent.cli.common import (
    EXIT_CODES_EPILOG,
    add_config_options,
    add_plane_option,
    add_receive_options,
    add_secret_option,
    add_socket_option,
    add_transport_options,
    add_verbosity_options,
    config_from_args,
    configure_logging,
    inbound_from_args,
    parse_size,
    planes_from_args,
    run_command,
    side_channel_secret,
    transport_from_args,
)
from agent.cli.ctl import add_ctl_parser
from agent.cli.report import send_report
from agent.io.addresses import format_address, parse_peer
from agent.io.control_client import connect_to_agent
from agent.io.control_protocol import SendRequest, StatusRequest
from agent.io.control_server import ControlServer, default_socket_path
from agent.io.errors import PeerUnreachableError, UsageError
from agent.io.file_transfer import (
    DEFAULT_FILE_MESSAGE_SIZE,
    FileTransfer,
    check_file_for_sending,
    read_file_for_sending,
)
from agent.io.inbound import SideChannelServer
from agent.io.out_dir import check_file_name, prepare_out_dir
from agent.io.path_modes import PATH_MODES, path_mode_setup
from agent.io.runtime import AgentRuntime
from agent.io.side_channel import SIDE_CHANNEL_PORT
from agent.io.transport import RoceSetup, Transport

PROG = "mrc-agent"


def build_parser() -> argparse.ArgumentParser:
    """The ``mrc-agent`` command line."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="MRC host agent: multipath RDMA writes over UDP 4791 (RoCEv2).",
        epilog=EXIT_CODES_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run this host's MRC endpoint")
    add_plane_option(serve, "at least one is required")
    add_receive_options(serve)
    add_socket_option(serve)
    serve.add_argument(
        "--no-socket", action="store_true", help="do not open a control socket for local clients"
    )
    serve.add_argument(
        "--socket-mode",
        type=lambda text: int(text, 8),
        default=0o600,
        metavar="OCTAL",
        help="the control socket's mode (default 600; 666 lets every user's applications use "
        "the host API, the rest stays root's and the agent user's)",
    )
    serve.add_argument("--out-dir", metavar="DIR", help="store every completed incoming file here")
    serve.add_argument(
        "--path-mode",
        choices=PATH_MODES,
        default="ecmp",
        help="ecmp (default): random EVs, hashed by the fabric; structured: each connection's "
        "EVs name the exact paths to its peer, spread evenly; srv6: those EVs, each packet in "
        "the SRv6 uSID carrier of its EV's path (IPv6 planes). Both need --topology",
    )
    serve.add_argument(
        "--topology",
        metavar="REF",
        help="the fabric's topology (a preset name or file), for --path-mode structured or srv6",
    )
    add_config_options(serve)
    add_verbosity_options(serve)
    serve.set_defaults(handler=serve_command)

    send = commands.add_parser(
        "send", help="send a file; exit 0 only when the receiver confirmed every byte"
    )
    send.add_argument("file", metavar="FILE")
    send.add_argument(
        "--to", required=True, metavar="HOST[:PORT]", help="the receiving agent's side channel"
    )
    send.add_argument("--name", help="name to store the file under (default: its basename)")
    send.add_argument(
        "--message-size",
        type=parse_size,
        default=DEFAULT_FILE_MESSAGE_SIZE,
        metavar="BYTES",
        help="bytes per RDMA write (default 1M)",
    )
    add_socket_option(send)
    send.add_argument(
        "--no-agent",
        action="store_true",
        help="always run an endpoint of this command's own, even if an agent is running",
    )
    add_plane_option(send, "only without a running agent (default: the route to the peer)")
    add_config_options(send)
    add_transport_options(send)
    add_secret_option(send)
    send.add_argument("--json", action="store_true", help="print the result as JSON")
    add_verbosity_options(send)
    send.set_defaults(handler=send_command)

    status = commands.add_parser("status", help="show the running agent's planes and connections")
    add_socket_option(status)
    add_verbosity_options(status)
    status.set_defaults(handler=status_command)
    add_ctl_parser(commands)
    return parser


def serve_command(args: argparse.Namespace) -> int:
    """Run the agent until SIGINT/SIGTERM; exit 0 on such a stop."""
    planes = planes_from_args(args.plane, None)
    config = config_from_args(args)
    out_dir = prepare_out_dir(args.out_dir) if args.out_dir else None
    listen, policy = inbound_from_args(args, planes, out_dir)
    paths = path_mode_setup(args.path_mode, args.topology, planes)
    runtime = AgentRuntime(
        planes,
        config,
        side_channel_secret=policy.secret,
        datagram_io=paths.datagram_io,
        watch_ports=True,
    )
    runtime.choose_evs = paths.choose_evs
    try:
        side = SideChannelServer(runtime, listen, policy)
        socket_path = None
        if not args.no_socket:
            socket_path = args.socket or default_socket_path()
            ApiService(runtime).install(ControlServer(runtime, socket_path, args.socket_mode))
        try:
            print(
                f"{PROG}: ready: planes {', '.join(format_address(p) for p in planes)}; "
                f"UDP 4791; side channel {', '.join(map(str, side.addresses))}; "
                f"control socket {socket_path or 'none'}; "
                f"out dir {out_dir or 'none'}",
                flush=True,
            )
            runtime.run(lambda: False)
        except KeyboardInterrupt:
            print(f"{PROG}: stopping", file=sys.stderr)
    finally:
        runtime.close()
    return 0


def send_command(args: argparse.Namespace) -> int:
    """Send one file, through the running agent if there is one."""
    path = Path(args.file)
    name = check_file_name(args.name or path.name)
    peer = parse_peer(args.to, SIDE_CHANNEL_PORT)
    check_file_for_sending(args.file)
    transport, roce = transport_from_args(args)
    result: dict[str, Any] | None = None
    if not args.no_agent:
        client = connect_to_agent(args.socket or default_socket_path())
        if client is not None:
            own_settings = [
                option
                for option, value in (
                    ("--plane", args.plane),
                    ("--evs", args.evs),
                    ("--cc", args.cc),
                    ("--payload", args.payload),
                    ("--secret-file", args.secret_file),
                )
                if value
            ]
            if own_settings:
                client.close()
                raise UsageError(
                    f"{', '.join(own_settings)} configure an endpoint of this command's own, "
                    f"but the agent at {client.path} is running and owns UDP 4791: drop them"
                )
            with client:
                logging.getLogger(__name__).info("sending through the agent at %s", client.path)
                result = client.request(
                    SendRequest(
                        str(path.resolve()), args.to, name, args.message_size,
                        transport=args.transport, roce_profile=args.roce_profile,
                        roce_timeout=args.roce_timeout, roce_retry_cnt=args.roce_retry_cnt,
                        roce_qps=args.qps, roce_line_rate=args.roce_line_rate,
                    )
                )  # fmt: skip
    if result is None:
        data = read_file_for_sending(args.file)
        result = _send_with_own_endpoint(
            args, peer_host=peer.host, data=data, name=name, transport=transport, roce=roce
        )
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(send_report(args.file, result))
    return 0


def _send_with_own_endpoint(
    args: argparse.Namespace,
    peer_host: str,
    data: bytes,
    name: str,
    transport: Transport,
    roce: RoceSetup | None,
) -> dict[str, Any]:
    planes = planes_from_args(args.plane, peer_host)
    runtime = AgentRuntime(
        planes, config_from_args(args), side_channel_secret=side_channel_secret(args)
    )
    try:
        transfer = FileTransfer(
            runtime,
            parse_peer(args.to, SIDE_CHANNEL_PORT),
            data,
            name,
            message_size=args.message_size,
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
    return transfer.result


def status_command(args: argparse.Namespace) -> int:
    """Print the running agent's status as JSON."""
    path = args.socket or default_socket_path()
    client = connect_to_agent(path)
    if client is None:
        raise PeerUnreachableError(f"no agent is running at {path}")
    with client:
        print(json.dumps(client.request(StatusRequest()), indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``mrc-agent``."""
    args = build_parser().parse_args(argv)
    configure_logging(args.verbose)
    return run_command(PROG, lambda: int(args.handler(args)))


if __name__ == "__main__":
    sys.exit(main())
