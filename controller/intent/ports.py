"""Per-port configuration: queues from the link, ECN and trimming from the fabric settings."""

from __future__ import annotations

from controller.intent.model import PortIntent
from topologies.model import Switch, Topology


def switch_ports(topology: Topology, switch: Switch) -> tuple[PortIntent, ...]:
    """The configuration of every used port of ``switch``, by port number.

    ECN marking is switched off on host-facing ports (MRC's last hop), on everywhere else; no
    port trims when the fabric's ``trimming`` is off.
    """
    settings = topology.settings
    intents = []
    for port in topology.switch_ports(switch.name):
        link = topology.link_at(switch.name, port)
        if link is None:  # switch_ports only lists ports with a link
            raise AssertionError(f"{switch.name} port {port} has no link")
        host_facing = topology.is_host(link.far_end(switch.name).node)
        intents.append(
            PortIntent(
                port=port,
                host_facing=host_facing,
                ecn_enabled=not host_facing,
                ecn_min_threshold=settings.ecn.min_threshold,
                ecn_max_threshold=settings.ecn.max_threshold,
                trim_threshold=settings.trim_threshold if settings.trimming else None,
                queue_depth=link.params.queue_depth,
                queue_rate_pps=link.params.queue_rate_pps,
                high_priority_queue_depth=settings.high_priority_queue.depth,
                high_priority_queue_rate_pps=settings.high_priority_queue.rate_pps,
                lossless_queue_depth=settings.lossless_queue.depth,
            )
        )
    return tuple(intents)
