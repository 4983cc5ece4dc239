"""What acknowledging cost a run, from the agents' own counters: acknowledgements sent (MRC's
SACKs and message ACKs, RoCE's ACKs) per data packet received.

The switches' counters (``experiments.link_overhead``) see every small frame alike (SACKs,
probes, their answers, LLDP); the agents count exactly what they sent to acknowledge. Each
agent reports totals over its life, closed connections included (a collective's QPs close
with the job), so a run's share is the difference of two readings taken around it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol


class StatusSource(Protocol):
    """Where an agent's status comes from (``testbed.session.Testbed``)."""

    def agent_status(self, host: str) -> dict[str, Any]: ...


@dataclass(frozen=True)
class AckCount:
    """Acknowledgements sent and data packets received, summed over some agents."""

    acks_sent: int
    data_packets_received: int

    def since(self, earlier: AckCount) -> AckCount:
        """What was counted between ``earlier`` and this reading."""
        return AckCount(
            self.acks_sent - earlier.acks_sent,
            self.data_packets_received - earlier.data_packets_received,
        )

    @property
    def per_data_packet(self) -> float | None:
        """Acknowledgements per data packet received; None when none was."""
        if self.data_packets_received <= 0:
            return None
        return self.acks_sent / self.data_packets_received


def ack_count_of(statuses: Iterable[Mapping[str, Any]]) -> AckCount:
    """The sum of the agents' ``acknowledgements`` totals; a status without them (an agent
    of an older tree) counts as zero."""
    acks = data = 0
    for status in statuses:
        totals = status.get("acknowledgements") or {}
        acks += int(totals.get("acks_sent", 0))
        data += int(totals.get("data_packets_received", 0))
    return AckCount(acks, data)


def read_ack_count(agents: StatusSource, hosts: Iterable[str]) -> AckCount:
    """The agents on ``hosts`` now."""
    return ack_count_of(agents.agent_status(host) for host in hosts)
