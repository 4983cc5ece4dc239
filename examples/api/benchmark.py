"""RDMA WRITE benchmark over the host API, as OCP's ``examples/benchmark``: message sizes swept
from ``--min-size`` to ``--size``; at each size the client keeps ``--tx-depth`` WRITEs in
flight, signals one completion in ``--cq-mod``, then sends an 8-byte WRITE with immediate
(the size) that the server waits for; the server checks the last message's bytes.

    mininet> h3 .venv/bin/python examples/api/benchmark.py --size 65536 &
    mininet> h1 .venv/bin/python examples/api/benchmark.py 10.0.2.1 --size 65536 -n 2000

Columns as OCP's: MsgSize, TotalOps, BW_avg(Gbps), MsgRate(Mpps); ``--json`` prints one
object per size instead (with ``goodput_bps`` and ``messages_per_s``). ``--duration S`` runs
each size for S seconds instead of ``--iters`` messages.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from common import Exchange, Wire, add_common_options, random_psn, wait_completions

from agent.api import (
    CQ,
    MR,
    QP,
    Access,
    Context,
    QpState,
    RecvWR,
    SendFlags,
    SendWR,
    Sge,
    WcStatus,
    WrOpcode,
)

SIGNAL_BYTES = 8


def pattern(size: int) -> bytes:
    """What the client writes: byte i is i & 0xff (as OCP's benchmark checks)."""
    return bytes(range(256)) * (size // 256) + bytes(range(size % 256))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("server", nargs="?", help="connect to this server (client side)")
    parser.add_argument("-n", "--iters", type=int, default=1000, help="messages per size")
    parser.add_argument("--duration", type=float, help="seconds per size instead of --iters")
    parser.add_argument("-s", "--size", type=int, default=1 << 20, help="largest message")
    parser.add_argument("--min-size", type=int, default=1, help="smallest message")
    parser.add_argument("--step-factor", type=int, default=2)
    parser.add_argument("--tx-depth", type=int, default=128, help="WRITEs kept in flight")
    parser.add_argument("--cq-mod", type=int, default=64, help="one signaled WR in this many")
    parser.add_argument("--ev-profile", type=int, default=0)
    parser.add_argument("--cc-profile", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    add_common_options(parser)
    args = parser.parse_args(argv)
    if not 0 < args.cq_mod < args.tx_depth or args.min_size > args.size or args.step_factor < 2:
        parser.error("need 0 < --cq-mod < --tx-depth, --min-size <= --size, --step-factor >= 2")
    client = args.server is not None
    sizes = []
    size = args.min_size
    while size <= args.size:
        sizes.append(size)
        size *= args.step_factor

    with Context.open(args.socket) as ctx:
        channel = ctx.create_comp_channel()
        cq = ctx.create_cq(4 * args.tx_depth, channel=channel)
        pd = ctx.alloc_pd()
        # Send buffer, receive buffer, and the 8 bytes of the end-of-size signal.
        mr = pd.reg_mr(2 * args.size + SIGNAL_BYTES, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        qp = ctx.create_qp(pd, cq, cq, max_send_wr=args.tx_depth, max_recv_wr=len(sizes) + 1)
        qp.modify(QpState.INIT, ev_profile_id=args.ev_profile, cc_profile_id=args.cc_profile)
        qp.post_recv([RecvWR(i) for i in range(len(sizes))])  # before the peer writes: no RNR
        psn = random_psn()
        exchange = Exchange(args.server, args.port)
        peer = exchange.swap(Wire(qp.qp_num, psn, mr.rkey, mr.addr, list(ctx.device.ports)))
        qp.modify(QpState.RTR, dest_qp_num=peer.qpn, rq_psn=peer.psn, dgids=peer.gids)
        qp.modify(QpState.RTS, sq_psn=psn)
        results = []
        if client:
            mr.buf[: args.size] = pattern(args.size)
            print_header = not args.json
            for size in sizes:
                exchange.barrier()
                result = run_sender(args, qp, cq, mr, peer, size)
                exchange.receive()  # the server saw the signal and checked the bytes
                results.append(result)
                if args.json:
                    print(json.dumps(result), flush=True)
                else:
                    if print_header:
                        print(
                            f"\n {'MsgSize':<10} {'TotalOps':<14} {'BW_avg(Gbps)':<18} "
                            f"MsgRate(Mpps)"
                        )
                        print_header = False
                    print(
                        f" {size:<10} {result['messages']:<14} "
                        f"{result['goodput_bps'] / 1e9:<18.3f} "
                        f"{result['messages_per_s'] / 1e6:.4f}",
                        flush=True,
                    )
        else:
            for size in sizes:
                exchange.barrier()
                cq.req_notify()
                wcs = cq.poll(1) or wait_completions(channel, cq, timeout=120.0)
                wc = wcs[0]
                ok = (
                    wc.status is WcStatus.SUCCESS
                    and wc.imm_data == size
                    and bytes(mr.buf[args.size : args.size + size]) == pattern(size)
                )
                exchange.send({"size": size, "ok": ok, "imm_data": wc.imm_data})
                results.append({"size": size, "ok": ok})
                if not ok:
                    print(f"size {size}: completion {wc} or data did not check", file=sys.stderr)
            if args.json:
                print(json.dumps({"server": results}))
        exchange.close()
    return 0 if all(r.get("ok", True) for r in results) else 1


def run_sender(
    args: argparse.Namespace, qp: QP, cq: CQ, mr: MR, peer: Wire, size: int
) -> dict[str, object]:
    """One size: WRITEs until ``--iters`` (or ``--duration``), then the signal."""
    sge = [Sge(mr.addr, size, mr.lkey)]
    remote = peer.addr + args.size
    posted = completed = 0
    last_signaled = True
    deadline = None if args.duration is None else time.monotonic() + args.duration
    start = time.monotonic()
    stop = False
    while True:
        batch = []
        while not stop and posted - completed < args.tx_depth:
            if deadline is None and posted >= args.iters:
                stop = True
                break
            last_signaled = posted % args.cq_mod == args.cq_mod - 1
            flags = SendFlags.SIGNALED if last_signaled else SendFlags(0)
            batch.append(SendWR(posted, sge, remote, peer.rkey, send_flags=flags))
            posted += 1
        if deadline is not None and not stop and time.monotonic() >= deadline:
            stop = True
        if stop and not last_signaled and posted - completed < args.tx_depth:
            # The tail is unsignaled: one more signaled WR retires it (RC completes in order).
            batch.append(SendWR(posted, sge, remote, peer.rkey))
            posted += 1
            last_signaled = True
        if batch:
            qp.post_send(batch)
        polled = cq.poll(16)
        for wc in polled:
            if wc.status is not WcStatus.SUCCESS:
                raise RuntimeError(f"WRITE failed: {wc.status.name} {wc.vendor_err}")
            completed = wc.wr_id + 1
        if stop and last_signaled and completed >= posted:
            break
        if not polled and not batch:
            cq.context.link.read(block=True)  # sleep until the agent says something
    elapsed = time.monotonic() - start
    mr.buf[2 * args.size : 2 * args.size + SIGNAL_BYTES] = size.to_bytes(SIGNAL_BYTES, "big")
    qp.post_send(
        SendWR(
            1 << 62,
            [Sge(mr.addr + 2 * args.size, SIGNAL_BYTES, mr.lkey)],
            peer.addr + 2 * args.size,
            peer.rkey,
            WrOpcode.RDMA_WRITE_WITH_IMM,
            imm_data=size,
        )
    )
    while True:
        wcs = cq.poll(1)
        if wcs:
            if wcs[0].status is not WcStatus.SUCCESS:
                raise RuntimeError(f"signal failed: {wcs[0].status.name}")
            break
        cq.context.link.read(block=True)
    return {
        "size": size,
        "messages": posted,
        "seconds": elapsed,
        "goodput_bps": posted * size * 8 / elapsed,
        "messages_per_s": posted / elapsed,
    }


if __name__ == "__main__":
    sys.exit(main())
