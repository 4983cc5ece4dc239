"""`make bench-agent`: how fast the host agent moves data, against iperf3 on the same veth pair.

Two figures, JSON on stdout (and ``--out FILE``):

1. **core**: datagrams two sans-IO protocol cores exchange per second on the in-process
   simulated network (``agent.sim.bench``; each datagram counted once, though one core
   produced it and the other consumed it), a context figure with no sockets involved;
2. **veth**: goodput of ``mrc-perf`` between two network namespaces joined by a veth pair (offloads
   off both ends), next to ``iperf3 -u -b 0 -l 1024`` over the same pair in the same run. Each
   process is pinned to one core with ``taskset`` (sender on one core, receiver on another) at nice
   -20 (``--sched``; see ``SCHEDULING`` for why not SCHED_FIFO) so that background work on the
   machine (a compiler, say) takes little from either tool; both tools always get the same
   treatment. Each repeat runs both tools lossless and both with ``--loss`` percent random loss on
   the data path, counter-balanced (``run_order``): which phase comes first alternates from repeat
   to repeat, and which tool comes first from one phase block to the next (ABBA), so that a drift
   of the machine's speed weighs on both sides of each ratio alike. The JSON gives the order every
   run was made in, each repeat's pairs (``paired``: mrc-perf / iperf3 lossless, lossy / lossless
   for each tool) with their spread (min / median / max), and, as before, the medians over the
   repeats and the ratios of those medians: netem on the sender's veth where the kernel
   has sch_netem, otherwise an nftables ``numgen random`` drop rule in the receiving namespace (UDP
   only, so the TCP side channel and iperf3's control connection are spared). Each side reaches the
   other through a /32 route with the peer as its on-link gateway, as the testbed's Mininet hosts
   reach theirs (``--direct-route``: the plain subnet route, on which Linux builds a route per
   packet for the agent's raw socket).

Goodput is what the receiver got: for mrc-perf the RDMA payload bytes the receiver confirmed
(1024 per packet, inside 1092-byte IP packets), for iperf3 the UDP payload bytes the server
received (1024 per packet, inside 1052-byte IP packets). Targets: mrc-perf lossless
>= 0.5x iperf3 UDP; with 1 % loss >= 0.8x its own lossless goodput. The JSON says whether each
was met; the measurement is reported as measured either way. ``iperf3_loss_retention`` (no
target) is iperf3's own lossy goodput over its lossless one under the same rule: iperf3 resends
nothing, so it shows what the loss and the rule itself cost (on a veth pair the receiving
namespace's input, the rule included, runs on the sending core), which a fabric's loss would not.

The parts: ``runs`` measures each tool once, ``schedule`` orders the runs, ``veth`` makes them
on the lab (``tools.veth_lab``, ``tools.veth_loss``, ``tools.netns_processes``,
``tools.cpu_accounting``), ``figures`` turns them into the report's figures, ``cli`` is
``python -m tools.bench_agent``.
"""
