"""Controller status snapshots (``mrc-controller status --json``) built for the tests:
switches whose next-hop member ``i`` forwards out of port ``i``, counting packets and their
bytes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

#: The bytes of a packet where a test gives no byte counts: a data packet's.
PACKET_BYTES = 1000


def member_status(
    packets: Mapping[str, Mapping[int, int]],
    byte_counts: Mapping[str, Mapping[int, int]] | None = None,
) -> dict[str, Any]:
    """A status whose switches forwarded ``packets`` (switch -> port -> packets) out of their
    ports through their members, of ``byte_counts`` bytes (``PACKET_BYTES`` a packet where
    none is given)."""
    sizes = byte_counts or {}
    return {
        "groups": {
            switch: [{"members": [{"member_index": p, "port": p} for p in ports]}]
            for switch, ports in packets.items()
        },
        "counters": {
            switch: {
                "members": {
                    str(p): {"packets": n, "bytes": sizes.get(switch, {}).get(p, n * PACKET_BYTES)}
                    for p, n in ports.items()
                }
            }
            for switch, ports in packets.items()
        },
    }
