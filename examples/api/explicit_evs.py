"""An explicit EV profile, as OCP's ``examples/mrc_ctl_exp_ev.md``: a STEV format profile of
two 16-bit fields, an EV profile listing its EVs, ONLINE, a range of them DENIED, the array
queried. Run as root (or the agent's user) on a host whose agent runs::

    .venv/bin/python examples/api/explicit_evs.py --count 64 --deny 13:42

Applications then name the profile when their QP goes to INIT
(``qp.modify(QpState.INIT, ev_profile_id=1)``, ``qp_management.py --ev-profile 1``) and
spray over exactly these EVs. EV *i* is source port 0xc000 + i with flow label *i* (the flow
label half only travels over IPv6), on port *i* mod the host's ports + 1. ``--cleanup`` takes
both profiles back to INIT at the end, as the OCP example's last step does.
"""

from __future__ import annotations

import argparse
import json
import sys

from common import add_common_options

from agent.api import (
    Controller,
    Ev,
    EvField,
    EvMode,
    EvOp,
    EvOpEntry,
    FormatMode,
    ProfileState,
)
from agent.api import CtlEvState as State

OFFLINE, ONLINE, INIT = ProfileState.OFFLINE, ProfileState.ONLINE, ProfileState.INIT


def ev_value(index: int) -> int:
    """EV ``index``: both 16-bit fields carry it (source port 0xc000 + index, label index)."""
    return ((0xC000 + index) << 16) | index


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fmt-id", type=int, default=13, help="format profile id")
    parser.add_argument("--profile", type=int, default=1, help="EV profile id")
    parser.add_argument("--count", type=int, default=64, help="EVs in the profile")
    parser.add_argument("--deny", metavar="FIRST:LAST", help="deny EVs FIRST..LAST (1-based)")
    parser.add_argument("--event-mask", type=int, default=int(State.GOOD | State.ASSUMED_BAD))
    parser.add_argument("--cleanup", action="store_true", help="back to INIT at the end")
    add_common_options(parser)
    args = parser.parse_args(argv)

    with Controller.open(args.socket) as ctl:
        device = ctl.query_device()
        if not device["ev"]["ev_mode_mask"] & EvMode.EXP:
            print("explicit EVs are not supported by this device", file=sys.stderr)
            return 1
        srv6 = bool(device["ev"]["ev_fmt_mode_mask"] & FormatMode.SRV6)
        ports = bin(device["phy_port_mask"]).count("1")
        count = min(args.count, device["ev"]["ev_max_count_profile"])
        count -= count % device["ev"]["ev_count_align"]

        ctl.modify_ev_fmt_profile(
            args.fmt_id, profile_state=OFFLINE, ev_fmt_mode=FormatMode.STEV, fmt_fields=[16, 16]
        )
        ctl.modify_ev_fmt_profile(args.fmt_id, profile_state=ONLINE)
        ctl.modify_ev_profile(
            args.profile,
            profile_state=OFFLINE,
            ev_mode=EvMode.EXP,
            ev_fmt_profile_id=args.fmt_id,
            ev_count=count,
            ev_min_active=count // 4,
            ev_event_mask=args.event_mask,
            fields=[EvField(16, mask=0xFFFF), EvField(16, mask=0xFFFF)],
        )
        evs = [Ev.stev(ev_value(i), port=i % ports + 1) for i in range(1, count + 1)]
        unpopulated = Ev(b"", 0)
        ctl.modify_ev_profile(
            args.profile, ev_op=EvOp.REPLACE_EV, entries=[EvOpEntry(unpopulated, ev) for ev in evs]
        )
        ctl.modify_ev_profile(args.profile, profile_state=ONLINE)
        if args.deny:
            first, last = (int(n) for n in args.deny.split(":"))
            ctl.set_ev_states(
                args.profile, [(evs[i - 1], State.DENIED) for i in range(first, last + 1)]
            )
        attrs, array = ctl.query_ev_profile(args.profile, EvOp.QUERY_EV_ARRAY)
        result = {
            "profile": attrs,
            "evs": [{**e.ev.to_json(), "state": e.state.name if e.state else None} for e in array],
            "denied": sum(1 for e in array if e.state is State.DENIED),
            "srv6_offered": srv6,
        }
        if args.cleanup:
            for state in (OFFLINE, INIT):
                ctl.modify_ev_profile(args.profile, profile_state=state)
            for state in (OFFLINE, INIT):
                ctl.modify_ev_fmt_profile(args.fmt_id, profile_state=state)
        print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
