"""How a port's queue rate and depth (packets/s, packets) become a Linux ``tbf`` qdisc.

BMv2 limits an egress queue in packets; the kernel's token bucket filter limits bytes. The
controller's intent (``PortIntent.queue_rate_pps`` / ``queue_depth``) is in packets, so both the
linux southbound and the testbed's kernel switches (``KernelSwitch.set_queue``) translate it
here, with one frame size, so that a run on either target slows a link by the same amount of
MRC data. It sits in ``hostenv``, below both: the testbed does not reach into a southbound.

Pure functions only: the caller applies the result (``tc qdisc replace dev swpN root tbf
...`` in the switch's namespace, or netlink).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from wire.constants import (
    BTH_LEN,
    DEFAULT_PAYLOAD,
    ICRC_LEN,
    METH_LEN,
    RETH_LEN,
    TSETH_LEN,
)

ETHERNET_HEADER_BYTES = 14
IPV6_HEADER_BYTES = 40
UDP_HEADER_BYTES = 8

#: The size of one "packet" when a packet rate becomes a byte rate: a full MRC data frame as
#: the agent sends it by default (Ethernet, IPv6, UDP, BTH, METH, TSETH, RETH, 1024 bytes of
#: payload, ICRC), the largest data frame it sends at its default payload. A rate of N pps then
#: lets N full data packets per second through, as BMv2's ``set_queue_rate N`` does; smaller
#: frames (SACKs, IPv4 data) get through at a higher packet rate, which BMv2 would not allow:
#: the kernel's shaper counts bytes, and this is the closest byte rate.
FRAME_BYTES = (
    ETHERNET_HEADER_BYTES
    + IPV6_HEADER_BYTES
    + UDP_HEADER_BYTES
    + BTH_LEN
    + METH_LEN
    + TSETH_LEN
    + RETH_LEN
    + DEFAULT_PAYLOAD
    + ICRC_LEN
)

#: The largest frame a switch port carries (1500-byte MTU plus the Ethernet header, as the
#: kernel counts it in a qdisc). The bucket and the queue must each hold at least one such
#: frame, or ``tbf`` drops every frame larger than them outright.
MAX_FRAME_BYTES = 1500 + ETHERNET_HEADER_BYTES

#: The bucket holds at least this long a stretch of tokens: ``tbf`` refills from a timer, and a
#: bucket of a single frame at a high rate would be throttled by the timer's slack rather than
#: by the rate.
MIN_BURST_SECONDS = 0.001


@dataclass(frozen=True)
class TbfParameters:
    """The three numbers a ``tbf`` qdisc needs."""

    #: Shaping rate in bits per second.
    rate_bits_per_s: int
    #: Bucket size in bytes: how many bytes may leave back to back at line rate.
    burst_bytes: int
    #: Queue size in bytes: frames waiting for tokens beyond this are dropped.
    limit_bytes: int

    def tc_arguments(self) -> tuple[str, ...]:
        """The arguments after ``tc qdisc replace dev IF root``, e.g. ``("tbf", "rate",
        "9008000bit", "burst", "1514b", "limit", "72064b")``."""
        return (
            "tbf",
            "rate",
            f"{self.rate_bits_per_s}bit",
            "burst",
            f"{self.burst_bytes}b",
            "limit",
            f"{self.limit_bytes}b",
        )


def tbf_parameters(rate_pps: int, depth_packets: int) -> TbfParameters:
    """The ``tbf`` that lets ``rate_pps`` full frames per second through a queue of
    ``depth_packets`` full frames.

    A rate of 0 means "unlimited" in the intent and has no ``tbf`` rendering (the port gets no
    shaper at all): it is refused here rather than turned into a zero-rate bucket that would
    drop everything.
    """
    if rate_pps <= 0:
        raise ValueError(f"a tbf needs a positive packet rate, not {rate_pps} (0 means no tbf)")
    if depth_packets <= 0:
        raise ValueError(f"a tbf needs a queue of at least one packet, not {depth_packets}")
    rate_bytes_per_s = rate_pps * FRAME_BYTES
    burst = max(MAX_FRAME_BYTES, math.ceil(rate_bytes_per_s * MIN_BURST_SECONDS))
    limit = max(MAX_FRAME_BYTES, depth_packets * FRAME_BYTES)
    return TbfParameters(rate_bits_per_s=rate_bytes_per_s * 8, burst_bytes=burst, limit_bytes=limit)
