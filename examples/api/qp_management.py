"""QP management with the host API, as OCP's ``examples/mrc_qp.md``: query the device, make a
context, a CQ, a QP, walk it RESET -> INIT -> RTR -> RTS, query it, use it once, destroy it.

Run one side as the server and the other with ``--to SERVER`` (on two hosts of
``make run-topology``, whose CLI points each host's shell at its agent)::

    mininet> h3 .venv/bin/python examples/api/qp_management.py &
    mininet> h1 .venv/bin/python examples/api/qp_management.py --to 10.0.2.1

The client writes 4 KiB with an immediate into the server's region; the server waits for the
completion on its completion channel, checks the immediate and every byte, and both print a
JSON summary. Exit 0 when it all checked out.
"""

from __future__ import annotations

import argparse
import json
import sys

from common import Exchange, Wire, add_common_options, random_psn, wait_completions

from agent.api import (
    Access,
    Context,
    QpState,
    RecvWR,
    SendWR,
    Sge,
    WcStatus,
    WrOpcode,
)

SIZE = 4096
IMMEDIATE = 0x4D524321


def pattern(size: int) -> bytes:
    """The bytes the client writes (the OCP benchmark's ``i & 0xff``)."""
    return bytes(i & 0xFF for i in range(size))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--to", metavar="SERVER", help="the server's address (client side)")
    parser.add_argument("--ev-profile", type=int, default=0, help="EV profile (default: auto)")
    parser.add_argument("--cc-profile", type=int, default=0, help="CC profile (default: NSCC)")
    add_common_options(parser)
    args = parser.parse_args(argv)

    with Context.open(args.socket) as ctx:
        device = ctx.query_device()
        channel = ctx.create_comp_channel()
        cq = ctx.create_cq(128, channel=channel)
        pd = ctx.alloc_pd()
        mr = pd.reg_mr(2 * SIZE, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        qp = ctx.create_qp(pd, cq, cq, max_send_wr=128, max_recv_wr=128, sq_sig_all=True)
        qp.modify(QpState.INIT, ev_profile_id=args.ev_profile, cc_profile_id=args.cc_profile)
        qp.post_recv(RecvWR(1))
        psn = random_psn()
        exchange = Exchange(args.to, args.port)
        peer = exchange.swap(Wire(qp.qp_num, psn, mr.rkey, mr.addr, list(device.ports)))
        qp.modify(
            QpState.RTR, dest_qp_num=peer.qpn, rq_psn=peer.psn, dgids=peer.gids, max_wimm_dest=128
        )
        qp.modify(QpState.RTS, sq_psn=psn, max_wimm=128, timeout=8, retry=(7, 25))
        attrs = qp.query()
        exchange.barrier()
        ok = True
        if args.to is not None:
            mr.buf[:SIZE] = pattern(SIZE)
            qp.post_send(
                SendWR(
                    7,
                    [Sge(mr.addr, SIZE, mr.lkey)],
                    peer.addr + SIZE,
                    peer.rkey,
                    WrOpcode.RDMA_WRITE_WITH_IMM,
                    imm_data=IMMEDIATE,
                )
            )
            cq.req_notify()
            wcs = cq.poll(1) or wait_completions(channel, cq)
            ok = wcs[0].status is WcStatus.SUCCESS
            result = {"role": "client", "wc": wcs[0].status.name}
        else:
            cq.req_notify()
            wcs = cq.poll(1) or wait_completions(channel, cq)
            wc = wcs[0]
            data_ok = bytes(mr.buf[SIZE : 2 * SIZE]) == pattern(SIZE)
            ok = wc.status is WcStatus.SUCCESS and wc.imm_data == IMMEDIATE and data_ok
            result = {
                "role": "server",
                "wc": wc.status.name,
                "imm_data": wc.imm_data,
                "byte_len": wc.byte_len,
                "data_ok": data_ok,
            }
        exchange.barrier()
        exchange.close()
        result["device"] = {"max_wimm": device.max_wimm, "ports": list(device.ports)}
        result["qp"] = attrs
        qp.destroy()
        cq.destroy()
        channel.destroy()
        print(json.dumps(result, indent=2))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
