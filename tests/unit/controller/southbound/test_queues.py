"""Queue depth and rate over Thrift: the three priority queues of every port (the lossless RoCE
class at the link's rate), numbered as mrc.p4 numbers them, only what changed, everything again
after a switch restart, and a failing CLI reported without being cached."""

from __future__ import annotations

import asyncio
import dataclasses
import re

from controller.intent import compute_intent
from controller.southbound.queues import (
    PRIORITY_QUEUES,
    QueueConfig,
    QueuePriority,
    ThriftEndpoint,
    ThriftQueueBackend,
    queue_commands,
)
from p4src import SOURCE_DIR
from topologies import load_topology
from topologies.defaults import DEFAULT_SETTINGS

PORTS = compute_intent(load_topology("leaf-spine")).switch("l1").ports
ENDPOINT = ThriftEndpoint("127.0.0.1", 9090)
#: Two commands (depth, rate) per priority queue.
COMMANDS_PER_PORT = 2 * PRIORITY_QUEUES


class FakeCli:
    def __init__(self, fail: bool = False) -> None:
        self.runs: list[tuple[ThriftEndpoint, list[str]]] = []
        self.fail = fail

    def __call__(self, endpoint: ThriftEndpoint, commands: list[str]) -> str:
        self.runs.append((endpoint, commands))
        if self.fail:
            raise RuntimeError("simple_switch_CLI at 127.0.0.1:9090: Could not connect")
        return ""


def test_a_port_gets_depth_and_rate_of_every_priority_queue_the_lossless_one_at_the_link_rate():
    config = QueueConfig(
        depth=64,
        rate_pps=500,
        high_priority_depth=32,
        high_priority_rate_pps=0,
        lossless_depth=4096,
    )
    assert queue_commands(3, config) == [
        "set_queue_depth 64 3 0",
        "set_queue_rate 500 3 0",
        "set_queue_depth 4096 3 1",
        "set_queue_rate 500 3 1",
        "set_queue_depth 32 3 2",
        "set_queue_rate 0 3 2",
    ]


def test_the_priorities_are_mrc_p4s():
    text = (SOURCE_DIR / "include" / "defines.p4").read_text()
    defined = {
        name: int(value)
        for name, value in re.findall(r"^const bit<3> PRIO_(\w+) = (\d+);", text, flags=re.M)
    }
    assert defined == {priority.name: int(priority) for priority in QueuePriority}
    assert PRIORITY_QUEUES == 3


def test_every_port_gets_the_fabrics_lossless_queue_depth():
    depth = DEFAULT_SETTINGS.lossless_queue.depth
    assert {QueueConfig.of(port).lossless_depth for port in PORTS} == {depth}


def test_the_first_apply_sets_every_port_in_one_cli_run_and_the_second_sends_nothing():
    cli = FakeCli()
    backend = ThriftQueueBackend({"l1": ENDPOINT}, cli)
    first = asyncio.run(backend.apply("l1", PORTS))
    second = asyncio.run(backend.apply("l1", PORTS))
    assert first.commands == COMMANDS_PER_PORT * len(PORTS) and first.error is None
    assert second.commands == 0
    assert len(cli.runs) == 1 and cli.runs[0][0] == ENDPOINT


def test_only_a_changed_port_is_sent_again():
    cli = FakeCli()
    backend = ThriftQueueBackend({"l1": ENDPOINT}, cli)
    asyncio.run(backend.apply("l1", PORTS))
    slower = [dataclasses.replace(PORTS[2], queue_rate_pps=100), *PORTS[:2], *PORTS[3:]]
    outcome = asyncio.run(backend.apply("l1", slower))
    assert outcome.commands == COMMANDS_PER_PORT
    assert cli.runs[-1][1][1] == f"set_queue_rate 100 {PORTS[2].port} 0"
    assert cli.runs[-1][1][3] == f"set_queue_rate 100 {PORTS[2].port} 1"


def test_after_forget_every_port_is_set_again():
    cli = FakeCli()
    backend = ThriftQueueBackend({"l1": ENDPOINT}, cli)
    asyncio.run(backend.apply("l1", PORTS))
    backend.forget("l1")
    assert asyncio.run(backend.apply("l1", PORTS)).commands == COMMANDS_PER_PORT * len(PORTS)


def test_a_failing_cli_is_reported_and_retried_next_time():
    cli = FakeCli(fail=True)
    backend = ThriftQueueBackend({"l1": ENDPOINT}, cli)
    outcome = asyncio.run(backend.apply("l1", PORTS))
    assert outcome.commands == 0 and "Could not connect" in (outcome.error or "")
    cli.fail = False
    assert asyncio.run(backend.apply("l1", PORTS)).commands == COMMANDS_PER_PORT * len(PORTS)


def test_a_switch_without_a_thrift_endpoint_is_an_error_not_an_exception():
    backend = ThriftQueueBackend({}, FakeCli())
    outcome = asyncio.run(backend.apply("l9", PORTS))
    assert "no Thrift endpoint" in (outcome.error or "")
