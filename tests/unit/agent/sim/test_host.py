"""A simulated host sends what an application posted between inputs when asked to pump soon:
at once, or, while the host is stalled, only when it runs again, and once however often asked."""

from __future__ import annotations

from agent.sim import LinkConfig, build_pair


def test_pump_soon_sends_a_posted_write_at_once_or_after_a_stall_once():
    testbed = build_pair([[LinkConfig(rate=None, delay=1e-6)]])
    sender, scheduler = testbed.sender, testbed.network.scheduler
    region = testbed.region
    sender.endpoint.post_write(testbed.send_qp, b"a" * 100, region.va, region.rkey)
    sender.pump_soon()
    sender.pump_soon()
    scheduler.run(until=0.0)
    assert sender.datagrams_out == 1

    sender.stall(0.005)
    sender.endpoint.post_write(testbed.send_qp, b"b" * 100, region.va + 100, region.rkey)
    sender.pump_soon()
    scheduler.run(until=0.004)
    assert sender.datagrams_out == 1  # stalled: nothing left
    scheduler.run(until=0.006)
    assert sender.datagrams_out == 2
