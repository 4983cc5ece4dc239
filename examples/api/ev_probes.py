"""Connectionless EV probes, as OCP's ``examples/mrc_ctl_ev_probes.md``: probe a destination
on chosen EVs and print each answer's RTT, or that it timed out. Run as root::

    mininet> h1 .venv/bin/python examples/api/ev_probes.py --to 10.0.2.1 0xc0010000 0xc0020000

EVs are wire EVs written ``HEX[@PORT]`` (STEV: the UDP source port, then the flow label's low
16 bits). No QP is needed: the destination's agent answers on the EV the probe came on.
"""

from __future__ import annotations

import argparse
import json
import sys

from common import add_common_options

from agent.api import Controller, EpRequest, FormatMode, ProbesTimedOut
from agent.cli.ctl import parse_ev_arg


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", required=True, metavar="ADDRESS", help="the destination")
    parser.add_argument("evs", nargs="+", type=parse_ev_arg, metavar="HEX[@PORT]")
    parser.add_argument("--timeout-ms", type=float, default=2.0, help="wait for answers")
    add_common_options(parser)
    args = parser.parse_args(argv)

    requests = [
        EpRequest(i + 1, args.to, ev, ev_fmt_mode=FormatMode.STEV) for i, ev in enumerate(args.evs)
    ]
    with Controller.open(args.socket) as ctl:
        try:
            responses = ctl.ep_batch_send_wait(requests, rsp_timeout=round(args.timeout_ms * 1e6))
        except ProbesTimedOut as exc:  # OCP's ETIMEDOUT: the answers that came are kept
            responses = exc.responses
    answered = {r.req_id: r for r in responses}
    out = []
    for request in requests:
        entry: dict[str, object] = {"req_id": request.req_id, "ev": str(request.req_ev)}
        response = answered.get(request.req_id)
        if response is None:
            entry["timeout"] = True
        else:
            entry.update(rtt_ns=response.rtt, port=response.port)
        out.append(entry)
    print(json.dumps(out, indent=2))
    if len(responses) < len(requests):
        print(
            f"only {len(responses)} of {len(requests)} answered within {args.timeout_ms:g} ms",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
