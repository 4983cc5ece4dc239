"""Default values of every optional setting of a topology file, in one place.

The queue defaults keep ECN marking (10..40 packets) below the trimming threshold (48), and that
below the queue depth (64), so that a loaded queue first marks, then trims, and drops only when
trimming cannot keep up. The high-priority queue (trimmed headers, control packets, RoCE
ACK/NAK and CNP) gets its own depth, because BMv2 limits each priority queue separately.

The lossless RoCE class's queue holds 4096 packets: sixteen RoCE QPs' worth of outstanding
packets at the agent's ``max_outstanding`` of 256 (``agent/roce/config.py``), the most QPs an
experiment stripes one transfer over, so congestion alone never fills it. A real lossless class
stays short because pause frames (PFC) stop its senders; here nothing stops them, so the depth
stands in for the pause, and DCQCN's ECN marks (from 10 packets on) are what shorten it.
"""

from __future__ import annotations

from topologies.model import (
    EcnSettings,
    LinkParams,
    LldpSettings,
    LosslessQueueSettings,
    QueueSettings,
    Settings,
)
from wire.dscp import DscpMap

#: BMv2's port numbers are 9 bits wide and 511 is its drop port.
MAX_PORT = 510
#: Device port numbers of hardware switches: 9 bits, as Tofino's ports are.
MAX_DEVICE_PORT = 511
DEFAULT_CPU_PORT = 255
DEFAULT_LINK_PARAMS = LinkParams(bandwidth_mbps=1000.0, queue_depth=64, queue_rate_pps=0)
DEFAULT_SETTINGS = Settings(
    cpu_port=DEFAULT_CPU_PORT,
    ecn=EcnSettings(min_threshold=10, max_threshold=40),
    trim_threshold=48,
    trimming=True,
    dscp=DscpMap(),
    lldp=LldpSettings(interval_ms=10, miss_limit=3),
    link_defaults=DEFAULT_LINK_PARAMS,
    high_priority_queue=QueueSettings(depth=64, rate_pps=0),
    lossless_queue=LosslessQueueSettings(depth=4096),
)
