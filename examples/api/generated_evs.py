"""A generated EV profile, as OCP's ``examples/mrc_ctl_gen_ev.md``: three tiers of a 16-bit
structured EV (T0 8 bits, T1 and T2 4 bits each: the source port), the device drawing the
EVs from the fields' ranges, the generated array queried, and the EVs whose T0 lies in
180-255 DENIED. Run as root on a host whose agent runs::

    .venv/bin/python examples/api/generated_evs.py --count 256

T0 starts at 1 here, not 0 as in OCP's example: an EV whose three tiers are all 0 would be
UDP source port 0, which no packet may carry.
"""

from __future__ import annotations

import argparse
import json
import sys

from common import add_common_options

from agent.api import (
    Controller,
    CtlEvState,
    EvField,
    EvMode,
    EvOp,
    FormatMode,
    ProfileState,
)

OFFLINE, ONLINE = ProfileState.OFFLINE, ProfileState.ONLINE


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--fmt-id", type=int, default=23, help="format profile id")
    parser.add_argument("--profile", type=int, default=2, help="EV profile id")
    parser.add_argument("--count", type=int, default=256, help="EVs to generate")
    parser.add_argument("--deny-t0-from", type=int, default=180, help="deny T0 from this on")
    add_common_options(parser)
    args = parser.parse_args(argv)

    with Controller.open(args.socket) as ctl:
        device = ctl.query_device()
        if not device["ev"]["ev_mode_mask"] & EvMode.GEN:
            print("generated EVs are not supported by this device", file=sys.stderr)
            return 1
        ctl.modify_ev_fmt_profile(
            args.fmt_id, profile_state=OFFLINE, ev_fmt_mode=FormatMode.STEV, fmt_fields=[8, 4, 4]
        )
        ctl.modify_ev_fmt_profile(args.fmt_id, profile_state=ONLINE)
        tiers = [
            EvField(8, mask=0xFF, min_val=1, max_val=255),
            EvField(4, mask=0xF, max_val=15),
            EvField(4, mask=0xF, max_val=15),
        ]
        possible = 255 * 16 * 16
        count = min(args.count, possible, device["ev"]["ev_max_count_profile"])
        count -= count % device["ev"]["ev_count_align"]
        ctl.modify_ev_profile(
            args.profile,
            profile_state=OFFLINE,
            ev_mode=EvMode.GEN,
            ev_fmt_profile_id=args.fmt_id,
            ev_count=count,
            ev_min_active=count // 4,
            ev_event_mask=int(CtlEvState.GOOD | CtlEvState.ASSUMED_BAD),
            fields=tiers,
        )
        ctl.modify_ev_profile(args.profile, profile_state=ONLINE)
        attrs, array = ctl.query_ev_profile(args.profile, EvOp.QUERY_EV_ARRAY)
        deny = [e.ev for e in array if e.ev.as_int(16) >> 8 >= args.deny_t0_from]
        if deny:
            ctl.set_ev_states(args.profile, [(ev, CtlEvState.DENIED) for ev in deny])
        _attrs, array = ctl.query_ev_profile(args.profile, EvOp.QUERY_EV_ARRAY)
        tiers_of = [
            {
                "t0": e.ev.as_int(16) >> 8,
                "t1": e.ev.as_int(16) >> 4 & 0xF,
                "t2": e.ev.as_int(16) & 0xF,
                "port": e.ev.port,
                "state": e.state.name if e.state else None,
            }
            for e in array
        ]
        print(
            json.dumps(
                {"profile": attrs, "fields": attrs["fields"], "evs": tiers_of, "denied": len(deny)},
                indent=2,
            )
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
