"""What ``mrc-agent`` and ``mrc-perf`` share: options, sizes, logging, and how they exit.

Every command ends through ``run_command``: an ``AgentError`` becomes one ``prog: error: ...``
line on stderr and its exit code (see ``agent.io.errors.ExitCode``); Ctrl-C or SIGTERM
becomes exit 130 after the ``finally`` blocks closed every socket; anything else is a bug,
shown with its traceback and exit 1.
"""

from __future__ import annotations

import argparse
import gc
import logging
import re
import sys
from collections.abc import Callable
from pathlib import Path

from agent.core import MrcConfig
from agent.core.cc_registry import congestion_control_names, congestion_control_spec
from agent.io.addresses import (
    PeerAddress,
    format_address,
    local_address_towards,
    parse_peer,
    parse_planes,
    resolve,
)
from agent.io.admission import DEFAULT_MAX_REGION, DEFAULT_MAX_SETUPS
from agent.io.caller_check import load_secret, parse_allow
from agent.io.config_overrides import parse_dscp, with_overrides
from agent.io.control_server import SOCKET_ENV, default_socket_path
from agent.io.errors import AgentError, ExitCode, UsageError
from agent.io.inbound import InboundPolicy
from agent.io.log_limit import RateLimitFilter
from agent.io.side_channel import SIDE_CHANNEL_PORT
from agent.io.transport import (
    MAX_QPS,
    MAX_ROCE_LINE_RATE,
    MIN_ROCE_LINE_RATE,
    MRC,
    RoceSetup,
    Transport,
    check_transport_options,
    mrc_config_for,
    parse_transport,
    roce_setup_for,
    transport_named,
    transport_names,
)
from agent.roce.config import MAX_RETRY_CNT, MAX_TIMEOUT_EXPONENT
from agent.roce.profiles import DEFAULT_PROFILE, PROFILES, profile_names
from hostenv.netns import terminate_on_signals
from wire.dscp import DscpMap

_EXIT_CODE_MEANINGS = {
    ExitCode.OK: "done (send: the receiver confirmed every byte)",
    ExitCode.INTERNAL: "internal error",
    ExitCode.USAGE: "bad arguments",
    ExitCode.PORT_IN_USE: "UDP 4791, the side-channel port or the control socket is in use",
    ExitCode.PEER_UNREACHABLE: "peer (or local agent) unreachable",
    ExitCode.TRANSFER_FAILED: "transfer failed or refused by the receiver (a RoCE QP that "
    "used up its retries included)",
    ExitCode.PERMISSION_DENIED: "permission denied (raw sockets need root)",
    ExitCode.PROTOCOL_ERROR: "side-channel or control protocol error",
    ExitCode.OVER_LIMIT: "the receiver refused: over one of its limits (memory, setups, disk)",
    ExitCode.UNAUTHORIZED: "the receiver refused this host (--allow, --secret-file)",
    ExitCode.INTERRUPTED: "interrupted",
}

#: The ``--help`` epilog of both tools: one exit code per line.
EXIT_CODES_EPILOG = "exit codes:\n" + "\n".join(
    f"  {int(code):>3}  {meaning}" for code, meaning in _EXIT_CODE_MEANINGS.items()
)

_SIZE = re.compile(r"^\s*(\d+)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}


def parse_size(text: str) -> int:
    """A byte count: ``1048576``, ``64K``, ``1M``, ``2GiB`` (binary units, as iperf3)."""
    match = _SIZE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(f"{text!r} is not a size (e.g. 4096, 64K, 1M, 2G)")
    value = int(match.group(1)) * _UNITS[match.group(2).lower()]
    if value < 1:
        raise argparse.ArgumentTypeError(f"size must be positive, got {text!r}")
    return value


def positive_float(text: str) -> float:
    """A number of seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, got {text!r}")
    return value


def positive_int(text: str) -> int:
    """An integer > 0."""
    try:
        value = int(text, 10)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def add_plane_option(parser: argparse.ArgumentParser, required_hint: str) -> None:
    """``--plane ADDR``, repeatable, in plane order."""
    parser.add_argument(
        "--plane",
        action="append",
        default=[],
        metavar="ADDR",
        help=f"this host's address on the next plane (repeat per NIC port); {required_hint}",
    )


def add_config_options(parser: argparse.ArgumentParser) -> None:
    """``--evs``, ``--cc``, ``--payload``: the core settings a user may change."""
    parser.add_argument(
        "--evs", type=positive_int, metavar="K", help="EVs per connection (default 256)"
    )
    parser.add_argument(
        "--cc",
        choices=congestion_control_names(),
        help="congestion control: "
        + "; ".join(
            f"{n}: {congestion_control_spec(n).summary}" for n in congestion_control_names()
        )
        + f" (default {MrcConfig().congestion_control})",
    )
    parser.add_argument(
        "--payload",
        type=positive_int,
        metavar="BYTES",
        help="RDMA payload per packet (default 1024; up to 9000 with jumbo frames)",
    )
    parser.add_argument(
        "--fabric-rate",
        type=_bounded_float(1.0, 1e9),
        metavar="PPS",
        help="packets/s of the fabric's slowest links, where they are slowed far below line "
        "rate: NSCC's target queueing delay becomes ten packets at that rate",
    )
    parser.add_argument(
        "--dscp",
        type=_dscp_option,
        metavar="CLASS=N,...",
        help=f"DSCP value of MRC traffic classes, as the fabric's switches classify them "
        f"(default {DscpMap().option()})",
    )


def add_transport_options(parser: argparse.ArgumentParser) -> None:
    """``--transport``, the RoCE profile and the RoCE QPs' settings (``agent.io.transport``)."""
    parser.add_argument(
        "--transport",
        choices=transport_names(),
        help="; ".join(f"{n}: {transport_named(n).summary}" for n in transport_names())
        + f" (default {MRC.name})",
    )
    parser.add_argument(
        "--roce-profile",
        choices=profile_names(),
        help="RoCE settings as deployed: "
        + "; ".join(f"{name}: {profile.summary}" for name, profile in PROFILES.items())
        + f" (default {DEFAULT_PROFILE})",
    )
    parser.add_argument(
        "--roce-timeout",
        type=_bounded_int(0, MAX_TIMEOUT_EXPONENT),
        metavar="N",
        help="RoCE local ACK timeout as verbs encodes it: 4.096 us x 2^N (default: the "
        "profile's, perftest 14, 67 ms; 0: none)",
    )
    parser.add_argument(
        "--roce-retry-cnt",
        type=_bounded_int(0, MAX_RETRY_CNT),
        metavar="N",
        help="RoCE retries before a QP fails and the transfer with it, exit 5 (default: the "
        "profile's, 7)",
    )
    parser.add_argument(
        "--qps",
        type=_bounded_int(1, MAX_QPS),
        metavar="N",
        help="RoCE QPs the transfer is striped over, message by message, each on its own "
        "source port, round-robin over the planes (default: the profile's, perftest 1)",
    )
    parser.add_argument(
        "--roce-line-rate",
        type=_bounded_float(MIN_ROCE_LINE_RATE, MAX_ROCE_LINE_RATE),
        metavar="BPS",
        help="the RoCE NIC's line rate in bits/s: its QPs start at it and never exceed it, and "
        "DCQCN's floor and steps scale with it (floor a thousandth); set it near a slowed "
        "link's rate so that DCQCN can slow a QP to the link (default 10 Gbit/s, its floor "
        "10 Mbit/s)",
    )


def _bounded_int(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text, 10)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {low}-{high}, got {value}")
        return value

    return parse


def _bounded_float(low: float, high: float) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {low:g}-{high:g}, got {text}")
        return value

    return parse


def transport_from_args(args: argparse.Namespace) -> tuple[Transport, RoceSetup | None]:
    """The transport the options ask for and, for RoCE, the QPs' settings and count
    (``UsageError`` for options that do not go together)."""
    transport = parse_transport(args.transport)
    check_transport_options(
        transport,
        evs=args.evs,
        cc=args.cc,
        roce_timeout=args.roce_timeout,
        roce_retry_cnt=args.roce_retry_cnt,
        roce_profile=args.roce_profile,
        qps=args.qps,
        roce_line_rate=args.roce_line_rate,
    )
    if not transport.is_roce:
        return transport, None
    roce = roce_setup_for(
        args.dscp or DscpMap(),
        profile=args.roce_profile,
        timeout=args.roce_timeout,
        retry_cnt=args.roce_retry_cnt,
        pmtu=args.payload,
        qps=args.qps,
        line_rate=args.roce_line_rate,
    )
    return transport, roce


def _dscp_option(text: str) -> DscpMap:
    try:
        return parse_dscp(text)
    except UsageError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_socket_option(parser: argparse.ArgumentParser) -> None:
    """``--socket PATH``: the agent's control socket."""
    parser.add_argument(
        "--socket",
        default=None,
        metavar="PATH",
        help=f"the agent's control socket (default ${SOCKET_ENV} or {default_socket_path()})",
    )


def add_verbosity_options(parser: argparse.ArgumentParser) -> None:
    """``-v``: log what the agent does (connections, stored files, failures)."""
    parser.add_argument(
        "-v", "--verbose", action="count", default=0, help="more log output (repeatable)"
    )


def add_secret_option(parser: argparse.ArgumentParser) -> None:
    """``--secret-file``: the side channel's shared secret (see ``agent.io.caller_check``)."""
    parser.add_argument(
        "--secret-file",
        metavar="FILE",
        help="shared secret (at least 16 bytes) that signs side-channel hellos; a receiver "
        "given one refuses unsigned hellos",
    )


def add_receive_options(parser: argparse.ArgumentParser) -> None:
    """What a receiving side listens on and accepts: address, callers and limits."""
    parser.add_argument(
        "--listen",
        metavar="HOST[:PORT]",
        help=f"side-channel address for peers (default: each --plane address, port "
        f"{SIDE_CHANNEL_PORT})",
    )
    parser.add_argument(
        "--allow",
        action="append",
        default=[],
        metavar="PREFIX",
        help="accept side-channel callers from this address or prefix only (repeatable; "
        "default: any caller that can reach the listener)",
    )
    add_secret_option(parser)
    parser.add_argument(
        "--max-region",
        type=parse_size,
        default=DEFAULT_MAX_REGION,
        metavar="BYTES",
        help="largest transfer one hello may ask for (default 1G)",
    )
    parser.add_argument(
        "--max-receive-memory",
        type=parse_size,
        metavar="BYTES",
        help="memory all incoming regions may hold together (default a quarter of the memory "
        "available at start); files go to disk and count against free disk instead",
    )
    parser.add_argument(
        "--max-peer-memory",
        type=parse_size,
        metavar="BYTES",
        help="memory one peer address's regions may hold (default half of --max-receive-memory)",
    )
    parser.add_argument(
        "--max-setups",
        type=positive_int,
        default=DEFAULT_MAX_SETUPS,
        metavar="N",
        help=f"side-channel connections that may await their hello's answer at once, a "
        f"quarter of them from one address (default {DEFAULT_MAX_SETUPS})",
    )


def side_channel_secret(args: argparse.Namespace) -> bytes | None:
    """The secret ``--secret-file`` names, or None."""
    path = getattr(args, "secret_file", None)
    return load_secret(path) if path else None


def inbound_from_args(
    args: argparse.Namespace, planes: tuple[bytes, ...], out_dir: Path | None
) -> tuple[list[PeerAddress], InboundPolicy]:
    """Where to listen (``--listen``, else every plane address) and what to accept."""
    if args.listen:
        listen = [parse_peer(args.listen, SIDE_CHANNEL_PORT)]
    else:
        listen = [PeerAddress(format_address(plane), SIDE_CHANNEL_PORT) for plane in planes]
    peer_cap, total_cap = args.max_peer_memory, args.max_receive_memory
    if peer_cap is not None and total_cap is not None and peer_cap > total_cap:
        raise UsageError("--max-peer-memory is larger than --max-receive-memory")
    policy = InboundPolicy(
        out_dir,
        max_region=args.max_region,
        max_memory=args.max_receive_memory,
        max_peer_memory=args.max_peer_memory,
        max_setups=args.max_setups,
        allow=parse_allow(args.allow),
        secret=side_channel_secret(args),
    )
    return listen, policy


def config_from_args(args: argparse.Namespace) -> MrcConfig:
    """The core configuration the options ask for (on one EV for ``--transport single``)."""
    config = with_overrides(
        MrcConfig(),
        evs=args.evs,
        cc=args.cc,
        payload=args.payload,
        dscp=args.dscp,
        fabric_rate=getattr(args, "fabric_rate", None),
    )
    transport = getattr(args, "transport", None)
    return mrc_config_for(parse_transport(transport), config) if transport else config


def planes_from_args(planes: list[str], peer_host: str | None) -> tuple[bytes, ...]:
    """``--plane`` addresses, or (with a peer and none given) the one that routes to it."""
    if planes:
        return parse_planes(planes)
    if peer_host is None:
        raise UsageError("give this host's plane address(es) with --plane ADDR")
    _family, address = resolve(peer_host, 1)
    return (local_address_towards(address[0]),)


def configure_logging(verbosity: int) -> None:
    """Warnings by default, info with -v, debug with -vv; to stderr, rate-limited per logger
    (``agent.io.log_limit``) so that peers cannot flood it."""
    level = logging.WARNING if verbosity <= 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(name)s: %(message)s", stream=sys.stderr)
    for handler in logging.getLogger().handlers:
        handler.addFilter(RateLimitFilter())


#: Allocations of container objects between two collections of the youngest generation.
#: The data path allocates a few per packet, none of them in reference cycles, so Python's
#: default (700) collected hundreds of times a second for nothing (docs/performance.md).
GC_YOUNG_THRESHOLD = 50_000


def tune_garbage_collector() -> None:
    """Fewer cyclic-GC passes for a packet-processing process: objects that exist at start
    (modules, configuration) are frozen out of every collection, and young collections run
    every ``GC_YOUNG_THRESHOLD`` allocations. Reference counting still frees everything the
    data path drops at once; cycles are still collected, less often."""
    gc.freeze()
    gc.set_threshold(GC_YOUNG_THRESHOLD, 20, 100)


def run_command(prog: str, command: Callable[[], int]) -> int:
    """Run ``command`` and turn its failure into a message and an exit code."""
    tune_garbage_collector()
    try:
        with terminate_on_signals():
            return command()
    except AgentError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print(f"{prog}: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
