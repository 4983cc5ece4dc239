"""Base class of the PTF suite: a P4Runtime connection per test, and cleanup of all it wrote.

Modelled on fabric-tna's `ptf/tests/common/base_test.py`: every entity a test writes through the
helpers is recorded and deleted again in tearDown (in reverse order, so table entries go before
the groups and members they point to), queue settings are reset, and the dataplane is flushed, so
each test starts from an empty switch whatever the previous one did or how it failed.
Counters are never reset: tests read them before and after and compare deltas.
"""

from __future__ import annotations

import ipaddress
import time
from pathlib import Path
from typing import Any

import finsy as fy
import ptf
import ptf.testutils as tu
from ptf.base_tests import BaseTest

from controller.southbound.p4_program import P4_CLASS_OF
from controller.southbound.queues import QueuePriority
from testbed.bmv2 import thrift_cli
from tools.p4rt_sync import SyncSwitch

SWITCH_MAC = "00:00:00:00:aa:01"
BMV2_LINK_POLL_S = 0.2  # BMv2 polls link state every 200 ms (docs/bmv2.md)
#: What simple_switch_grpc starts every priority queue with; tearDown puts it back.
BMV2_DEFAULT_QUEUE_DEPTH = 64


def host_mac(port: int) -> str:
    """MAC of the (pretend) neighbour behind a port."""
    return f"00:00:00:00:00:{port:02x}"


class MrcPtfTest(BaseTest):
    """A test against one simple_switch_grpc running mrc.p4."""

    def setUp(self) -> None:
        super().setUp()
        self.dataplane = ptf.dataplane_instance
        self.dataplane.flush()
        params = tu.test_params_get()
        self.thrift_port = int(params["thrift_port"])
        self.sw = SyncSwitch(
            params["grpc_addr"],
            Path(params["p4info"]),
            Path(params["p4blob"]),
            device_id=int(params["device_id"]),
        )
        self._written: list[Any] = []
        self._queue_ports: set[int] = set()
        self.set_default_dscp_classes()

    def tearDown(self) -> None:
        try:
            for entity in reversed(self._written):
                self.sw.delete([entity])
            if self._queue_ports:
                cmds = []
                for port in sorted(self._queue_ports):
                    for prio in QueuePriority:
                        cmds += [
                            f"set_queue_rate 0 {port} {int(prio)}",
                            f"set_queue_depth {BMV2_DEFAULT_QUEUE_DEPTH} {port} {int(prio)}",
                        ]
                thrift_cli(cmds, self.thrift_port)
        finally:
            self.sw.close()
            super().tearDown()

    # -- writing state, recorded for cleanup -------------------------------------------------
    def insert(self, *entities: Any) -> None:
        self.sw.insert(entities)
        self._written.extend(entities)

    def set_default_dscp_classes(self) -> None:
        self.insert(
            *[
                fy.P4TableEntry(
                    "MrcIngress.classify.dscp_classes",
                    match=fy.P4TableMatch(dscp=int(dscp)),
                    action=fy.P4TableAction("MrcIngress.classify.set_class", mrc_class=cls),
                )
                for dscp, cls in P4_CLASS_OF.items()
            ]
        )

    def add_group(
        self,
        next_id: int,
        ports: list[int],
        *,
        watch: bool = True,
        dmacs: dict[int, str] | None = None,
    ) -> list[int]:
        """A multipath group for next_id with one member per port; returns the member ids.

        Each member rewrites the destination MAC to `dmacs[port]`, or to `host_mac(port)`."""
        base = next_id * 100
        member_ids = []
        for i, port in enumerate(ports):
            dmac = (dmacs or {}).get(port, host_mac(port))
            member_id = base + i
            self.insert(
                fy.P4ActionProfileMember(
                    "MrcIngress.next.hashed_selector",
                    member_id=member_id,
                    action=fy.P4TableAction(
                        "MrcIngress.next.routing_hashed",
                        port=port,
                        smac=SWITCH_MAC,
                        dmac=dmac,
                        member_index=member_id,
                    ),
                )
            )
            member_ids.append(member_id)
        members = [
            fy.P4Member(m, weight=(1, p) if watch else 1)
            for m, p in zip(member_ids, ports, strict=True)
        ]
        self.insert(
            fy.P4ActionProfileGroup(
                "MrcIngress.next.hashed_selector", group_id=next_id, members=members
            )
        )
        self.insert(
            fy.P4TableEntry(
                "MrcIngress.next.hashed",
                match=fy.P4TableMatch(next_id=next_id),
                action=fy.P4IndirectAction(group_id=next_id),
            )
        )
        return member_ids

    def add_route(self, prefix: str, next_id: int) -> None:
        net = ipaddress.ip_network(prefix)
        table, field = (
            ("MrcIngress.routing.routes_v4", "ipv4_dst")
            if net.version == 4
            else ("MrcIngress.routing.routes_v6", "ipv6_dst")
        )
        self.insert(
            fy.P4TableEntry(
                table,
                match=fy.P4TableMatch({field: prefix}),
                action=fy.P4TableAction("MrcIngress.routing.set_next_id", next_id=next_id),
            )
        )

    def route_to_port(
        self, prefixes: list[str], port: int, next_id: int, dmac: str | None = None
    ) -> None:
        """Route prefixes to a single-member group on one port."""
        self.add_group(next_id, [port], dmacs={port: dmac} if dmac else None)
        for prefix in prefixes:
            self.add_route(prefix, next_id)

    def set_trim(self, port: int, threshold: int, host_facing: bool) -> None:
        self.insert(
            fy.P4TableEntry(
                "MrcIngress.trim.trim_config",
                match=fy.P4TableMatch(egress_port=port),
                action=fy.P4TableAction(
                    "MrcIngress.trim.set_trim_config",
                    threshold=threshold,
                    host_facing=int(host_facing),
                ),
            )
        )

    def set_ecn(self, port: int, min_depth: int, max_depth: int) -> None:
        self.insert(
            fy.P4TableEntry(
                "MrcEgress.ecn.port_ecn",
                match=fy.P4TableMatch(egress_port=port),
                action=fy.P4TableAction(
                    "MrcEgress.ecn.set_ecn_thresholds", min_qdepth=min_depth, max_qdepth=max_depth
                ),
            )
        )

    def set_queue(
        self,
        port: int,
        rate_pps: int,
        depth_pkts: int,
        prio: QueuePriority = QueuePriority.NORMAL,
    ) -> None:
        """Slow one egress priority queue down over Thrift (no P4Runtime call exists for it)."""
        thrift_cli(
            [
                f"set_queue_rate {rate_pps} {port} {int(prio)}",
                f"set_queue_depth {depth_pkts} {port} {int(prio)}",
            ],
            self.thrift_port,
        )
        self._queue_ports.add(port)

    # -- reading -------------------------------------------------------------------------------
    def counter(self, name: str, index: int) -> int:
        return self.sw.counter(name, index)[0]

    def drop_reason_count(self, reason: int) -> int:
        return self.counter("MrcIngress.drop_reasons", reason)

    def collect(self, ports: list[int], timeout: float = 1.0) -> dict[int, list[bytes]]:
        """Every packet that arrives on the given ports until `timeout` of silence."""
        got: dict[int, list[bytes]] = {p: [] for p in ports}
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = self.dataplane.poll(device_number=0, timeout=0.05)
            if isinstance(result, self.dataplane.PollSuccess) and result.port in got:
                got[result.port].append(bytes(result.packet))
                deadline = time.monotonic() + timeout
        return got
