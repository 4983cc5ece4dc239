"""``mrc-agent ctl``: OCP's controller API as a command, one subcommand per operation.

``ctl ev expand FILE`` needs no agent: it checks and expands EV profiles written as JSON
(``agent.api.ev_document``). Every other subcommand asks the host's running agent over its
control socket (``--socket``) and prints the result as JSON, as ``status`` does; they are the
controller's, so only root or the socket's owner may use them (exit 6 otherwise).

EVs are written ``HEX[@PORT]`` (``0xc0010000@1``; port 1 when omitted): the compact EV's
bits from its first hex digit on, and the port (plane + 1) it goes out of. Profile fields are
a JSON list of objects with OCP's field names (``[{"width": 16, "mask": "0xffff"}, ...]``).
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from agent.api.controller import Controller
from agent.api.errors import AgentGone, ApiError, PermissionDenied, ProbesTimedOut
from agent.api.ev_document import DocumentError, load_document
from agent.api.types import (
    EV_OP_F_ALL_COPIES,
    CtlEvState,
    EpRequest,
    Ev,
    EvMode,
    EvOp,
    EvOpEntry,
    FormatMode,
    PortAdminState,
    ProfileState,
)
from agent.cli.common import add_socket_option, add_verbosity_options
from agent.core.ev_expansion import EvField, ProfileError, parse_ev
from agent.io.errors import (
    PeerUnreachableError,
    PermissionDeniedError,
    TransferFailedError,
    UsageError,
)

_FIELD_KEYS = ("width", "init_val", "min_val", "max_val", "mask")


def parse_ev_arg(text: str) -> Ev:
    """``HEX[@PORT]``."""
    value, _, port = text.partition("@")
    try:
        raw = parse_ev(value, "EV").rstrip(b"\0")
        return Ev(raw or b"\0", int(port) if port else 1)
    except (ProfileError, ValueError) as exc:
        raise argparse.ArgumentTypeError(f"{text!r}: {exc} (expected HEX[@PORT])") from None


def parse_fields(text: str) -> list[EvField]:
    """A JSON list of EV fields with OCP's names; numbers may be hex strings."""
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"--fields is not JSON: {exc}") from None
    if not isinstance(raw, list):
        raise argparse.ArgumentTypeError("--fields must be a JSON list of field objects")
    fields = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict) or set(item) - set(_FIELD_KEYS) or "width" not in item:
            raise argparse.ArgumentTypeError(
                f"--fields[{index}]: an object with width and any of init_val, min_val, "
                "max_val, mask"
            )
        try:
            values = {key: int(str(value), 0) for key, value in item.items()}
        except ValueError:
            raise argparse.ArgumentTypeError(f"--fields[{index}]: not numbers") from None
        fields.append(EvField(**values))
    return fields


def _choice(kind: Any) -> Callable[[str], Any]:
    def parse(text: str) -> Any:
        try:
            return kind[text.upper()]
        except KeyError:
            names = ", ".join(member.name.lower() for member in kind)
            raise argparse.ArgumentTypeError(f"{text!r}: choose {names}") from None

    parse.__name__ = kind.__name__
    return parse


def _mask(text: str) -> int:
    mask = 0
    for name in filter(None, text.replace("|", ",").split(",")):
        mask |= _choice(CtlEvState)(name.strip())
    return mask


def add_ctl_parser(commands: Any) -> None:
    """Add ``ctl`` and its subcommands to ``mrc-agent``'s subcommand list."""
    ctl = commands.add_parser(
        "ctl", help="the controller API: EV and CC profiles, EV states, probes, ports"
    )
    groups = ctl.add_subparsers(dest="ctl_group", required=True, metavar="GROUP")

    def command(group: Any, name: str, help_text: str, handler: Callable[..., Any]) -> Any:
        parser = group.add_parser(name, help=help_text)
        add_socket_option(parser)
        add_verbosity_options(parser)
        parser.set_defaults(handler=lambda args: _run(args, handler))
        return parser

    command(groups, "device", "device limits, modes, CC algorithms, ports", _device)
    port = groups.add_parser("port", help="a port's admin state").add_subparsers(
        dest="ctl_port", required=True, metavar="COMMAND"
    )
    show = command(port, "show", "a port's admin state", _port_show)
    show.add_argument("port", type=int, metavar="PORT")
    set_port = command(port, "set", "enable or disable a port", _port_set)
    set_port.add_argument("port", type=int, metavar="PORT")
    set_port.add_argument(
        "--admin", type=_choice(PortAdminState), required=True, metavar="enabled|disabled"
    )

    ev = groups.add_parser("ev", help="EV format profiles, EV profiles, EV states, probes")
    ev_commands = ev.add_subparsers(dest="ctl_ev", required=True, metavar="COMMAND")
    expand = ev_commands.add_parser(
        "expand", help="check and expand the EV profiles of a JSON file (no agent needed)"
    )
    expand.add_argument("file", metavar="FILE")
    expand.add_argument("--json", action="store_true", help="print JSON instead of text")
    add_verbosity_options(expand)
    expand.set_defaults(handler=expand_command)

    fmt = ev_commands.add_parser("fmt", help="EV format profiles").add_subparsers(
        dest="ctl_fmt", required=True, metavar="COMMAND"
    )
    fmt_set = command(fmt, "set", "change a format profile", _fmt_set)
    fmt_set.add_argument("id", type=int)
    fmt_set.add_argument("--state", type=_choice(ProfileState), metavar="STATE")
    fmt_set.add_argument("--mode", type=_choice(FormatMode), metavar="stev|srv6|udp")
    fmt_set.add_argument("--fields", metavar="W,W,...", help="the fields' widths in bits")
    command(fmt, "show", "a format profile", _fmt_show).add_argument("id", type=int)

    profile = ev_commands.add_parser("profile", help="EV profiles").add_subparsers(
        dest="ctl_profile", required=True, metavar="COMMAND"
    )
    prof_set = command(profile, "set", "change an EV profile", _profile_set)
    prof_set.add_argument("id", type=int)
    prof_set.add_argument("--state", type=_choice(ProfileState), metavar="STATE")
    prof_set.add_argument("--mode", type=_choice(EvMode), metavar="auto|exp|gen")
    prof_set.add_argument("--fmt", type=int, metavar="ID", help="its format profile")
    prof_set.add_argument("--count", type=int, metavar="N")
    prof_set.add_argument("--min-active", type=int, metavar="N")
    prof_set.add_argument("--event-mask", type=_mask, metavar="good,assumed_bad")
    prof_set.add_argument("--fields", type=parse_fields, metavar="JSON")
    prof_show = command(profile, "show", "an EV profile (and its EV array)", _profile_show)
    prof_show.add_argument("id", type=int)
    prof_show.add_argument("--array", action="store_true", help="with every EV and its state")

    populate = command(
        ev_commands, "populate", "fill an explicit profile's unpopulated EVs", _populate
    )
    populate.add_argument("id", type=int)
    populate.add_argument("evs", type=parse_ev_arg, nargs="+", metavar="HEX[@PORT]")
    replace = command(ev_commands, "replace", "replace an EV of an explicit profile", _replace)
    replace.add_argument("id", type=int)
    replace.add_argument("old", type=parse_ev_arg, metavar="OLD[@PORT]")
    replace.add_argument("new", type=parse_ev_arg, metavar="NEW[@PORT]")
    replace.add_argument("--all-copies", action="store_true")
    state = command(ev_commands, "state", "query EV states, or set them (--set)", _state)
    state.add_argument("id", type=int)
    state.add_argument("evs", type=parse_ev_arg, nargs="+", metavar="HEX[@PORT]")
    state.add_argument("--set", type=_choice(CtlEvState), metavar="good|assumed_bad|denied")
    events = command(ev_commands, "events", "print EV events as they come (JSON lines)", _events)
    events.add_argument("--count", type=int, default=0, help="stop after N (default: never)")
    events.add_argument("--timeout", type=float, help="stop after S seconds without one")
    events.add_argument("--cqe", type=int, default=1024, help="the event CQ's size")
    probe = command(ev_commands, "probe", "connectionless EV probes: RTT or timeout", _probe)
    probe.add_argument("--to", required=True, metavar="ADDRESS")
    probe.add_argument(
        "evs",
        type=parse_ev_arg,
        nargs="+",
        metavar="HEX[@PORT]",
        help="wire EVs (STEV: source port, then flow label)",
    )
    probe.add_argument("--timeout-ms", type=float, default=100.0)
    probe.add_argument("--mode", type=_choice(FormatMode), default=FormatMode.STEV)

    cc = groups.add_parser("cc", help="CC profiles").add_subparsers(
        dest="ctl_cc", required=True, metavar="COMMAND"
    )
    cc_set = command(cc, "set", "change a CC profile", _cc_set)
    cc_set.add_argument("id", type=int)
    cc_set.add_argument("--state", type=_choice(ProfileState), metavar="STATE")
    cc_set.add_argument("--algorithm", metavar="NAME", help="uet-1.0-nscc, testbed-dcqcn, ...")
    cc_set.add_argument(
        "--config",
        type=json.loads,
        metavar="JSON",
        help="the algorithm's parameters (NSCC: OCP's field names)",
    )
    command(cc, "show", "a CC profile", _cc_show).add_argument("id", type=int)


def _run(args: argparse.Namespace, handler: Callable[[Controller, argparse.Namespace], Any]) -> int:
    try:
        with Controller.open(args.socket) as ctl:
            result = handler(ctl, args)
    except PermissionDenied as exc:
        raise PermissionDeniedError(str(exc)) from None
    except AgentGone as exc:
        raise PeerUnreachableError(str(exc)) from None
    except ApiError as exc:
        raise UsageError(f"{exc} ({exc.errno_name})") from None
    if result is not None:
        print(json.dumps(result, indent=2))
    return 0


def expand_command(args: argparse.Namespace) -> int:
    """Print every case of FILE: both profiles, each EV's fields and its expanded value."""
    try:
        cases = load_document(args.file)
    except DocumentError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps([case.to_json() for case in cases], indent=2))
    else:
        print("\n\n".join(case.to_text() for case in cases))
    return 0


def _device(ctl: Controller, _args: argparse.Namespace) -> Any:
    return ctl.query_device()


def _port_show(ctl: Controller, args: argparse.Namespace) -> Any:
    return ctl.query_port(args.port)


def _port_set(ctl: Controller, args: argparse.Namespace) -> Any:
    return ctl.modify_port(args.port, args.admin)


def _fmt_set(ctl: Controller, args: argparse.Namespace) -> Any:
    widths = None
    if args.fields is not None:
        try:
            widths = [int(w) for w in args.fields.split(",")]
        except ValueError:
            raise UsageError(f"--fields {args.fields!r}: widths, comma separated") from None
    return ctl.modify_ev_fmt_profile(
        args.id, profile_state=args.state, ev_fmt_mode=args.mode, fmt_fields=widths
    )


def _fmt_show(ctl: Controller, args: argparse.Namespace) -> Any:
    return ctl.query_ev_fmt_profile(args.id)


def _profile_set(ctl: Controller, args: argparse.Namespace) -> Any:
    return ctl.modify_ev_profile(
        args.id,
        profile_state=args.state,
        ev_mode=args.mode,
        ev_fmt_profile_id=args.fmt,
        ev_count=args.count,
        ev_min_active=args.min_active,
        ev_event_mask=args.event_mask,
        fields=args.fields,
    )


def _entries_json(entries: list[EvOpEntry]) -> list[dict[str, Any]]:
    return [
        {**entry.ev.to_json(), "state": entry.state.name if entry.state else "UNPOPULATED"}
        for entry in entries
    ]


def _profile_show(ctl: Controller, args: argparse.Namespace) -> Any:
    attrs, entries = ctl.query_ev_profile(args.id, EvOp.QUERY_EV_ARRAY if args.array else None)
    if args.array:
        attrs["evs"] = _entries_json(entries)
    return attrs


def _populate(ctl: Controller, args: argparse.Namespace) -> Any:
    unpopulated = Ev(b"", 0)
    return ctl.modify_ev_profile(
        args.id, ev_op=EvOp.REPLACE_EV, entries=[EvOpEntry(unpopulated, ev) for ev in args.evs]
    )


def _replace(ctl: Controller, args: argparse.Namespace) -> Any:
    flags = EV_OP_F_ALL_COPIES if args.all_copies else 0
    return ctl.modify_ev_profile(
        args.id, ev_op=EvOp.REPLACE_EV, entries=[EvOpEntry(args.old, args.new, flags=flags)]
    )


def _state(ctl: Controller, args: argparse.Namespace) -> Any:
    if args.set is not None:
        ctl.set_ev_states(args.id, [(ev, args.set) for ev in args.evs])
    _attrs, entries = ctl.query_ev_profile(
        args.id, EvOp.QUERY_EV_STATE, [EvOpEntry(ev) for ev in args.evs]
    )
    return {"id": args.id, "evs": _entries_json(entries)}


def _events(ctl: Controller, args: argparse.Namespace) -> Any:
    channel = ctl.context.create_comp_channel()
    cq = ctl.create_ev_event_cq(args.cqe, channel)
    printed = 0
    while not args.count or printed < args.count:
        cq.req_notify()
        for event in cq.poll_ev_events(64):
            print(
                json.dumps(
                    {
                        "profile_id": event.profile_id,
                        **event.ev.to_json(),
                        "state": event.state.name,
                        "drop_count": event.drop_count,
                    }
                ),
                flush=True,
            )
            printed += 1
        if args.count and printed >= args.count:
            break
        if channel.get_cq_event(args.timeout) is None:
            raise TransferFailedError(f"no EV event within {args.timeout:g} s")
        channel.ack_cq_events(cq, 1)
    return None


def _probe(ctl: Controller, args: argparse.Namespace) -> Any:
    requests = [
        EpRequest(i + 1, args.to, ev, ev_fmt_mode=args.mode) for i, ev in enumerate(args.evs)
    ]
    try:
        answered = ctl.ep_batch_send_wait(requests, round(args.timeout_ms * 1e6))
    except ProbesTimedOut as exc:
        answered = exc.responses  # each unanswered probe is listed with its timeout below
    responses = {r.req_id: r for r in answered}
    return [
        {
            **request.req_ev.to_json(),
            **(
                {"rtt_ns": responses[request.req_id].rtt}
                if request.req_id in responses
                else {"timeout_ms": args.timeout_ms}
            ),
        }
        for request in requests
    ]


def _cc_set(ctl: Controller, args: argparse.Namespace) -> Any:
    return ctl.modify_cc_profile(
        args.id, profile_state=args.state, algorithm=args.algorithm, cc_config=args.config
    )


def _cc_show(ctl: Controller, args: argparse.Namespace) -> Any:
    return ctl.query_cc_profile(args.id)


__all__ = ["add_ctl_parser", "expand_command"]
