"""A run's acknowledgements per data packet, from the agents' own totals.

Specification: the totals of the run's agents are summed; a run's share is the difference of
a reading after it and one before; per data packet is acknowledgements over data packets
received, None when none was; an agent that reports no totals counts as zero.
"""

from __future__ import annotations

from typing import Any

import pytest

from experiments.acknowledgements import AckCount, ack_count_of, read_ack_count


class _Agents:
    """Agents whose totals the test sets."""

    def __init__(self, totals: dict[str, tuple[int, int]]) -> None:
        self.totals = totals
        self.asked: list[str] = []

    def agent_status(self, host: str) -> dict[str, Any]:
        self.asked.append(host)
        acks, data = self.totals[host]
        return {"acknowledgements": {"acks_sent": acks, "data_packets_received": data}}


def test_a_runs_share_is_the_difference_of_readings_around_it_over_its_hosts():
    agents = _Agents({"h1": (10, 100), "h2": (5, 40), "h3": (999, 9999)})
    before = read_ack_count(agents, ["h1", "h2"])
    agents.totals = {"h1": (40, 300), "h2": (25, 140), "h3": (0, 0)}
    run = read_ack_count(agents, ["h1", "h2"]).since(before)
    assert run == AckCount(acks_sent=50, data_packets_received=300)
    assert run.per_data_packet == pytest.approx(50 / 300)
    assert "h3" not in agents.asked


def test_no_data_packet_means_no_ratio():
    assert AckCount(3, 0).per_data_packet is None


def test_an_agent_without_totals_counts_as_zero():
    assert ack_count_of([{}, {"acknowledgements": {"acks_sent": 2}}]) == AckCount(2, 0)
