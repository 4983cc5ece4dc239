"""SRv6 uSID mode (docs/routing.md "Path modes"): with ``path_mode srv6`` the agents run over
IPv6 and send every packet in the carrier of its EV's path; the switches only shift the uSID
list, the last one decapsulates, the receiver's answers come back in carriers of their own. An
MRC transfer spreads its data over every spine and completes; a spine cut under ``static``
routing costs it only the EVs whose paths cross the cut. Both on BMv2 and on kernel switches
(seg6local routes).

Needs root, Mininet, and BMv2 with the compiled program or a kernel that takes seg6local
NEXT-C-SID routes; skips with the reason otherwise.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from agent.io.control_client import connect_to_agent
from agent.io.control_protocol import StatusRequest
from testbed.agents import TransferSpec
from tests.e2e.testbed.topology_files import preset_on_own_ports
from topologies.paths import PathTable, path_table

pytestmark = pytest.mark.mininet

#: A transfer long enough for every EV to carry packets many times over.
TRANSFER_BYTES = 4 << 20
#: The cut test's transfer: the cut, and every EV through it retired, happen well within it.
TRANSFER_S = 30.0
#: Generous: six BMv2s, a controller and four agents on a loaded two-core machine.
RETIRE_WITHIN_S = 60.0


@pytest.fixture
def topology_file(tmp_path: Path) -> Path:
    return preset_on_own_ports("leaf-spine", tmp_path, grpc_base=51050, thrift_base=10090)


def _agent_status(socket_path: Path, evs: bool = False) -> dict[str, Any]:
    client = connect_to_agent(str(socket_path))
    assert client is not None
    with client:
        return client.request(StatusRequest(evs=evs))


def _rx(status: dict[str, Any], switch: str, port: int) -> int:
    return int(status["counters"][switch]["ports"][str(port)]["rx_packets"])


def _needs_kernel_srv6() -> None:
    """Skip unless this kernel routes uSID carriers itself (the linux target's rendering)."""
    from hostenv.seg6 import seg6local_missing

    missing = seg6local_missing()
    if missing is not None:
        pytest.skip(f"linux target in SRv6 mode: {missing}")


def _arrivals(table: PathTable, source: str, destination: str) -> dict[str, int]:
    """Per spine, its port toward ``source`` (where packets from ``source`` arrive)."""
    return {path.switches[1]: path.ports[1] for path in table.between(destination, source)}


def test_a_transfer_goes_in_carriers_over_every_spine_and_its_answers_come_back_in_carriers(
    testbed_target: str, runs_dir: Path, topology_file: Path
) -> None:
    from testbed.session import Testbed

    if testbed_target == "linux":
        _needs_kernel_srv6()
    with Testbed.open(str(topology_file), testbed_target, path_mode="srv6") as testbed:
        agents = testbed.agents
        assert agents is not None
        assert ":" in agents.address_of("h3"), "SRv6 mode runs the agents over IPv6"
        table = path_table(testbed.topology)
        from_l1, from_l2 = _arrivals(table, "l1", "l2"), _arrivals(table, "l2", "l1")
        before = testbed.status()
        result = testbed.transfer(TransferSpec("h1", "h3", total_bytes=TRANSFER_BYTES))
        assert result["bytes"] == TRANSFER_BYTES
        after = testbed.status()
        data = {s: _rx(after, s, p) - _rx(before, s, p) for s, p in from_l1.items()}
        answers = {s: _rx(after, s, p) - _rx(before, s, p) for s, p in from_l2.items()}
        packets = TRANSFER_BYTES // 1024
        # 256 EVs, 64 naming each spine, sent round robin: a quarter each, give or take.
        assert all(count >= packets // 8 for count in data.values()), data
        assert all(count > 0 for count in answers.values()), answers
        for host in ("h1", "h3"):
            carriers = _agent_status(agents.socket_of(host))["srv6_carriers"]
            assert carriers["in_carrier"] > 0 and carriers["without_carrier"] == 0, (host, carriers)


def test_mrc_survives_a_spine_cut_under_static_routing_by_retiring_the_evs_through_it(
    testbed_target: str, runs_dir: Path, topology_file: Path
) -> None:
    from testbed.session import Testbed

    if testbed_target == "linux":
        _needs_kernel_srv6()
    with Testbed.open(
        str(topology_file), testbed_target, routing="static", path_mode="srv6"
    ) as testbed:
        agents = testbed.agents
        assert agents is not None
        table = path_table(testbed.topology)
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
            testbed.fail("l1", "s2")  # the carriers naming s2 now end in a dead link
            deadline = time.monotonic() + RETIRE_WITHIN_S
            while time.monotonic() < deadline and worker.is_alive():
                status = _agent_status(agents.socket_of("h1"), evs=True)
                evs = [ev for c in status["connections"] for ev in c.get("evs", [])]
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
        assert len(others) == 192 and all(ev["home"] for ev in (*via_s2, *others))
        assert result["transfer"]["bytes"] > at_retirement, "nothing was delivered after the cut"
