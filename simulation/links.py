"""A topology link's parameters as a simulated egress queue (``agent.sim.link.LinkConfig``).

The topology states a link as BMv2 shapes it: a queue depth in packets and, optionally, a
queue rate in packets/s (the testbed's bottleneck), else the veth bandwidth. The simulated
queue counts bytes, so packet counts become bytes at :data:`FULL_PACKET_BYTES` (a full MRC data
packet on the wire: 1024 bytes of payload and its headers), and a packet rate becomes that many
full packets' bytes per second. Small packets (ACKs, trimmed headers) therefore pass a
pps-limited link faster than BMv2 lets them: a known difference, small where data dominates.
"""

from __future__ import annotations

from agent.sim.link import LinkConfig
from topologies.model import LinkParams, Settings

#: Bytes one full data packet takes on a link (1024 payload + MRC, UDP, IP, Ethernet headers).
FULL_PACKET_BYTES = 1100
#: One-way propagation of every simulated link: a few metres of fibre and a switch's latency.
#: (None at all, delivering at the end of serialisation without an event, halved the events
#: but not the CPU time: a hop's cost is its work, not its scheduling.)
LINK_DELAY_S = 1e-6


def link_config(params: LinkParams, settings: Settings, *, loss: float = 0.0) -> LinkConfig:
    """The egress queue of one link direction as the topology describes it."""
    rate: float
    if params.queue_rate_pps > 0:
        rate = params.queue_rate_pps * FULL_PACKET_BYTES
    else:
        rate = params.bandwidth_mbps * 1e6 / 8
    ecn = settings.ecn
    lossless = settings.lossless_queue.depth
    return LinkConfig(
        rate=rate,
        delay=LINK_DELAY_S,
        queue_bytes=params.queue_depth * FULL_PACKET_BYTES,
        lossless_bytes=lossless * FULL_PACKET_BYTES,
        lossless_ecn_min_bytes=min(ecn.min_threshold, lossless) * FULL_PACKET_BYTES,
        lossless_ecn_max_bytes=min(ecn.max_threshold, lossless) * FULL_PACKET_BYTES,
        ecn_min_bytes=min(ecn.min_threshold, params.queue_depth) * FULL_PACKET_BYTES,
        ecn_max_bytes=min(ecn.max_threshold, params.queue_depth) * FULL_PACKET_BYTES,
        trim=settings.trimming,
        loss=loss,
    )
