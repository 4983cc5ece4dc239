"""The testbed starts each host's agent with the host's planes and the topology's DSCP values,
and asks the agents for transfers with the RoCE settings given."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from agent.io.config_overrides import parse_dscp
from testbed.agents import HostAgents, TransferSpec, slowest_fabric_rate
from topologies import load_topology
from wire.dscp import DscpMap

TOPOLOGY = """\
name: custom-dscp
settings:
  dscp: {trimmable: 20, trimmable_retx: 21, control: 40}
planes:
  - {id: 0, name: p0, ipv4_prefix: 10.0.0.0/16, ipv6_prefix: "fd00::/32"}
switches:
  - {name: s1, role: leaf, device_id: 1, grpc_port: 50001, thrift_port: 9091}
hosts:
  - {name: h1, nics: [{plane: 0, switch: s1, port: 1}]}
  - {name: h2, nics: [{plane: 0, switch: s1, port: 2}]}
"""


def _option(options: list[str], name: str) -> str:
    return options[options.index(name) + 1]


def test_every_agent_gets_the_topologys_dscp_values(tmp_path: Path) -> None:
    path = tmp_path / "topology.yaml"
    path.write_text(TOPOLOGY)
    topology = load_topology(str(path))
    agents = HostAgents(topology, tmp_path, "mnt")
    options = agents.serve_options(topology.host("h1"))
    assert _option(options, "--plane") == str(topology.host("h1").nics[0].ipv4.ip)
    dscp = _option(options, "--dscp")
    assert parse_dscp(dscp) == DscpMap(trimmable=20, trimmable_retx=21, control=40)


def test_agents_aim_their_queueing_at_the_slowest_fabric_link(tmp_path: Path) -> None:
    topology = load_topology("leaf-spine")
    assert "--fabric-rate" not in HostAgents(topology, tmp_path, "m").serve_options(
        topology.host("h1")
    )
    document = yaml.safe_load(_preset("leaf-spine"))
    for number, link in enumerate(document["links"]):
        link["queue_rate_pps"] = 300 if number else 200
    path = tmp_path / "slowed.yaml"
    path.write_text(yaml.safe_dump(document))
    slowed = load_topology(str(path))
    assert slowest_fabric_rate(slowed) == 200
    options = HostAgents(slowed, tmp_path, "m").serve_options(slowed.host("h1"))
    assert _option(options, "--fabric-rate") == "200"


def _preset(name: str) -> str:
    return (
        Path(__file__).resolve().parents[3] / "topologies" / "presets" / f"{name}.yaml"
    ).read_text()


def test_in_structured_mode_every_agent_gets_the_topology_to_name_paths(tmp_path: Path) -> None:
    topology = load_topology("leaf-spine")
    plain = HostAgents(topology, tmp_path, "mnt").serve_options(topology.host("h1"))
    assert "--path-mode" not in plain and "--topology" not in plain
    agents = HostAgents(topology, tmp_path, "mnt", "structured", "leaf-spine")
    options = agents.serve_options(topology.host("h1"))
    assert _option(options, "--path-mode") == "structured"
    assert _option(options, "--topology") == "leaf-spine"
    assert _option(options, "--plane") == str(topology.host("h1").nics[0].ipv4.ip)


def test_in_srv6_mode_agents_run_over_ipv6_with_the_topology(tmp_path: Path) -> None:
    topology = load_topology("leaf-spine")
    agents = HostAgents(topology, tmp_path, "mnt", "srv6", "leaf-spine")
    options = agents.serve_options(topology.host("h1"))
    assert _option(options, "--path-mode") == "srv6"
    assert _option(options, "--topology") == "leaf-spine"
    assert _option(options, "--plane") == str(topology.host("h1").nics[0].ipv6.ip)
    assert agents.address_of("h2", "h1") == str(topology.host("h2").nics[0].ipv6.ip)


def test_an_exact_path_mode_without_the_topology_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs the topology"):
        HostAgents(load_topology("leaf-spine"), tmp_path, "mnt", "srv6")


def test_a_roce_transfer_asks_for_its_profile_and_qp_count_when_given() -> None:
    spec = TransferSpec("h1", "h2", transport="roce", roce_profile="nccl", roce_qps=16)
    options = spec.request_options()
    assert (options["roce_profile"], options["roce_qps"]) == ("nccl", 16)
    assert "roce_profile" not in TransferSpec("h1", "h2", transport="roce").request_options()
    with pytest.raises(ValueError, match="unknown RoCE profile 'cx7'"):
        TransferSpec("h1", "h2", transport="roce", roce_profile="cx7").request_options()


def test_a_roce_transfer_asks_for_its_nics_line_rate_when_given() -> None:
    spec = TransferSpec("h1", "h2", transport="roce", roce_line_rate=4e5)
    assert spec.request_options()["roce_line_rate"] == 4e5
    assert "roce_line_rate" not in TransferSpec("h1", "h2", transport="roce").request_options()
    assert "roce_line_rate" not in TransferSpec("h1", "h2", roce_line_rate=4e5).request_options()
    with pytest.raises(ValueError, match="line rate must be"):
        TransferSpec("h1", "h2", transport="roce", roce_line_rate=0.0).request_options()
