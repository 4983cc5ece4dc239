"""EV state-change events, as OCP's ``examples/mrc_ctl_ev_events.md``: an EV event CQ, a
profile whose event mask asks for GOOD and ASSUMED_BAD, and every event printed with its
drop count. Run as root::

    .venv/bin/python examples/api/ev_events.py --profile 1 --count 4 --timeout 30

Events come when QPs using the profile lose packets on an EV (ASSUMED_BAD) and when probes
bring it back (GOOD). The profile must have its mask set while OFFLINE (this device does not
modify ONLINE profiles); ``explicit_evs.py`` sets GOOD|ASSUMED_BAD by default. One JSON line
per event; exit 0 once ``--count`` events came, 1 if ``--timeout`` seconds pass without one.
"""

from __future__ import annotations

import argparse
import json
import sys

from common import add_common_options

from agent.api import Controller, CtlEvState


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", type=int, default=1, help="the EV profile to watch")
    parser.add_argument("--count", type=int, default=0, help="stop after N events (0: never)")
    parser.add_argument("--timeout", type=float, default=None, help="give up after S s quiet")
    parser.add_argument("--cqe", type=int, default=128, help="the event CQ's size")
    add_common_options(parser)
    args = parser.parse_args(argv)

    with Controller.open(args.socket) as ctl:
        attrs, _ = ctl.query_ev_profile(args.profile)
        wanted = int(CtlEvState.GOOD | CtlEvState.ASSUMED_BAD)
        if attrs["ev_event_mask"] & wanted != wanted:
            print(
                f"profile {args.profile}'s event mask is {attrs['ev_event_mask']}: set "
                f"GOOD|ASSUMED_BAD ({wanted}) while it is OFFLINE",
                file=sys.stderr,
            )
        channel = ctl.context.create_comp_channel()
        cq = ctl.create_ev_event_cq(args.cqe, channel)
        print(json.dumps({"watching": args.profile}), flush=True)
        seen = 0
        while not args.count or seen < args.count:
            cq.req_notify()
            for event in cq.poll_ev_events(16):
                if event.profile_id != args.profile:
                    continue
                print(
                    json.dumps(
                        {
                            "profile_id": event.profile_id,
                            "ev": event.ev.to_json(),
                            "state": event.state.name,
                            "drop_count": event.drop_count,
                        }
                    ),
                    flush=True,
                )
                seen += 1
            if args.count and seen >= args.count:
                break
            if channel.get_cq_event(timeout=args.timeout) is None:
                print(f"no event within {args.timeout:g} s", file=sys.stderr)
                return 1
            channel.ack_cq_events(cq, 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
