"""Structured EV mode on BMv2 (docs/routing.md "Path modes"): with ``path_mode structured`` a
packet's EV takes exactly the spine it names, both ways, and an MRC transfer survives a spine
cut by retiring the EVs that name it: the structured tables are never recomputed, so l1 keeps
steering those EVs into the dead link while the hashed groups are rerouted (``reactive``, so
that the agents' TCP side channel, which is hashed, is rerouted too; under ``static`` a remote
cut black-holes plain IP traffic hashed onto the spine, in every path mode).

Needs root, Mininet and BMv2 with the compiled program; skips with the reason otherwise.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.io.control_client import connect_to_agent
from agent.io.control_protocol import StatusRequest
from testbed.agents import TransferSpec
from testbed.live.paths import Bmv2NextHops, Flow, walk
from tests.e2e.testbed.topology_files import preset_on_own_ports
from topologies.paths import PathTable, path_table

pytestmark = pytest.mark.mininet

#: Datagrams sent per EV: far above the background a port sees while they are counted.
DATAGRAMS = 1000
#: How long a switch may take to work through the datagrams queued in it (BMv2 lags behind).
COUNTED_WITHIN_S = 60.0
#: The transfer's length: the cut, and every EV through it retired, happen well within it.
TRANSFER_S = 30.0
#: Generous: six BMv2s, a controller and four pure-Python agents on a loaded two-core machine.
RETIRE_WITHIN_S = 60.0

SENDER = """
import socket, sys, time
sport, address, count = int(sys.argv[1]), sys.argv[2], int(sys.argv[3])
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.bind(("0.0.0.0", sport))
for i in range(count):
    s.sendto(b"x" * 64, (address, 4792))
    if i % 5 == 4:
        time.sleep(0.005)  # ~1000/s, within a loaded BMv2's rate: the counts are those sent
"""


@pytest.fixture
def topology_file(tmp_path: Path) -> Path:
    return preset_on_own_ports("leaf-spine", tmp_path, grpc_base=50950, thrift_base=9990)


def _rx_from(status: dict[str, Any], spine: str, port: int) -> int:
    return int(status["counters"][spine]["ports"][str(port)]["rx_packets"])


def _spine_ports(table: PathTable, source: str, destination: str) -> dict[str, int]:
    """Per spine, its port toward ``source`` (where packets from ``source`` arrive)."""
    return {
        path.switches[1]: port
        for path in table.between(destination, source)
        for port in path.ports[1:2]
    }


def test_an_ev_takes_the_spine_it_names_and_answers_come_back_over_it(
    needs_testbed: None, runs_dir: Path, topology_file: Path
) -> None:
    from testbed.session import Testbed

    with Testbed.open(str(topology_file), "bmv2", path_mode="structured") as testbed:
        table = path_table(testbed.topology)
        agents = testbed.agents
        assert agents is not None
        hops = Bmv2NextHops({s.name: s.thrift_port for s in testbed.topology.switches})
        for source, destination, a, b in (("h1", "h3", "l1", "l2"), ("h3", "h1", "l2", "l1")):
            # Where the spines receive from a: their ports toward a.
            arrive = _spine_ports(table, a, b)
            for path in table.between(a, b):
                spine = path.switches[1]
                ev = path.structured_ev(table.layout, 0xC1230000)
                before = testbed.status()
                subprocess.run(
                    [
                        "ip",
                        "netns",
                        "exec",
                        agents.netns_of(source),
                        sys.executable,
                        "-c",
                        SENDER,
                        str(ev >> 16),
                        agents.address_of(destination),
                        str(DATAGRAMS),
                    ],
                    check=True,
                    timeout=120,
                )
                deadline = time.monotonic() + COUNTED_WITHIN_S
                while True:
                    after = testbed.status()
                    counts = {
                        s: _rx_from(after, s, p) - _rx_from(before, s, p) for s, p in arrive.items()
                    }
                    floor = min(c for name, c in counts.items() if name != spine)
                    if counts[spine] - floor >= DATAGRAMS or time.monotonic() > deadline:
                        break
                    time.sleep(0.5)
                # What every spine sees alike while a loaded BMv2 lags (LLDP, the agents' own
                # traffic) is the least any other spine counted; the datagrams, one 5-tuple,
                # would all land on a single wrong spine if the EV did not steer them.
                others = [count for name, count in counts.items() if name != spine]
                background = min(others)
                # Some may be dropped by a busy BMv2 on the way; none go elsewhere.
                assert counts[spine] - background >= DATAGRAMS * 9 // 10, (source, spine, counts)
                assert max(others) - background < DATAGRAMS // 2, (source, spine, counts)
                # The live view reads the same from the switches' tables.
                flow = Flow.of_ev(agents.address_of(source), agents.address_of(destination), ev)
                shown = walk(testbed.topology, flow, hops)
                assert shown.error is None and shown.nodes == (source, *path.switches, destination)


def _evs(socket_path: Path) -> list[dict[str, Any]]:
    """The EV table of the agent's one open outgoing connection (empty before it opens)."""
    client = connect_to_agent(str(socket_path))
    assert client is not None
    with client:
        status = client.request(StatusRequest(evs=True))
    return [ev for connection in status["connections"] for ev in connection.get("evs", [])]


def test_mrc_survives_a_spine_cut_by_retiring_the_evs_that_name_it(
    needs_testbed: None, runs_dir: Path, topology_file: Path
) -> None:
    from testbed.session import Testbed

    with Testbed.open(
        str(topology_file), "bmv2", routing="reactive", path_mode="structured"
    ) as testbed:
        table = path_table(testbed.topology)
        agents = testbed.agents
        assert agents is not None
        field = table.layout.field(0)
        assert field is not None
        spine_of = {path.choices[0][1]: path.switches[1] for path in table.between("l1", "l2")}
        result: dict[str, Any] = {}
        samples: list[dict[str, Any]] = []
        started = threading.Event()

        def progress(sample: dict[str, Any]) -> None:
            samples.append(sample)
            started.set()

        def run() -> None:
            try:
                result["transfer"] = testbed.transfer(
                    TransferSpec("h1", "h3", duration_s=TRANSFER_S, interval_s=0.5), progress
                )
            except Exception as error:  # reported by the assertions below
                result["error"] = error
            started.set()

        worker = threading.Thread(target=run)
        worker.start()
        via_s2: list[dict[str, Any]] = []
        others: list[dict[str, Any]] = []
        try:
            assert started.wait(RETIRE_WITHIN_S), "the transfer never reported progress"
            # l1's structured entries keep steering the EVs that name s2 into the cut link.
            testbed.fail("l1", "s2")
            deadline = time.monotonic() + RETIRE_WITHIN_S
            while time.monotonic() < deadline and worker.is_alive():
                evs = _evs(agents.socket_of("h1"))
                via_s2 = [ev for ev in evs if spine_of[field.value_of(ev["ev"])] == "s2"]
                others = [ev for ev in evs if spine_of[field.value_of(ev["ev"])] != "s2"]
                if via_s2 and all(ev["state"] == "ASSUMED_BAD" for ev in via_s2):
                    break
                time.sleep(0.2)
            at_retirement = samples[-1]["total_bytes"]
        finally:
            worker.join(timeout=TRANSFER_S + 120)
        assert "error" not in result, result.get("error")
        assert len(via_s2) == 64 and all(ev["state"] == "ASSUMED_BAD" for ev in via_s2), via_s2
        # Given EVs: no random stand-in takes a retired slot; the other spines' EVs carry on.
        assert len(others) == 192 and all(ev["home"] for ev in (*via_s2, *others))
        assert result["transfer"]["bytes"] > at_retirement, "nothing was delivered after the cut"
