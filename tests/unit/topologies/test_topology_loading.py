"""A valid topology file loads into the resolved model: defaults applied, values derived."""

from __future__ import annotations

from ipaddress import IPv4Interface, IPv4Network, IPv6Interface, IPv6Network

from topologies import Endpoint, LinkId, LinkParams, Role
from wire.constants import DscpClass, RoceDscp


def test_switch_defaults_come_from_role_and_device_id(load_yaml, small_fabric):
    topology = load_yaml(small_fabric)
    l1, s1 = topology.switch("l1"), topology.switch("s1")
    assert (l1.role, l1.tier, l1.plane) == (Role.LEAF, 0, 0)
    assert (s1.role, s1.tier) == (Role.SPINE, 1)
    assert (l1.grpc_port, l1.thrift_port) == (50051, 9090)
    assert (s1.grpc_port, s1.thrift_port) == (50053, 9092)


def test_explicit_switch_fields_override_the_defaults(load_yaml):
    topology = load_yaml(
        """\
        switches:
          - {name: c1, role: core, tier: 3, device_id: 7, grpc_port: 60000, thrift_port: 7000}
        """
    )
    core = topology.switch("c1")
    assert (core.tier, core.grpc_port, core.thrift_port) == (3, 60000, 7000)


def test_nic_addresses_and_macs_are_derived_per_plane_edge_switch_and_port(load_yaml, small_fabric):
    topology = load_yaml(small_fabric)
    h1 = topology.host("h1").nics[0]
    h2 = topology.host("h2").nics[0]
    assert h1.name == "eth0"
    assert h1.ipv4 == IPv4Interface("10.0.1.1/24")
    assert h1.ipv6 == IPv6Interface("fd00:0:1::1/64")
    assert h2.ipv4 == IPv4Interface("10.0.2.1/24")
    assert h2.ipv6 == IPv6Interface("fd00:0:2::1/64")
    assert h1.mac == "02:10:00:01:00:00"
    assert h2.mac == "02:10:00:02:00:00"


def test_switch_port_macs_encode_device_id_and_port(load_yaml, small_fabric):
    topology = load_yaml(small_fabric)
    assert topology.switch("s1").port_mac(2) == "02:00:00:03:00:02"


def test_explicit_nic_values_are_kept(load_yaml):
    topology = load_yaml(
        """\
        switches:
          - {name: l1, role: leaf, device_id: 1}
        hosts:
          - name: h1
            nics:
              - name: data0
                switch: l1
                port: 4
                ipv4: 10.0.9.9/24
                ipv6: fd00:0:9::9/64
                mac: 02:AA:bb:cc:dd:ee
                queue_rate_pps: 500
        """
    )
    nic = topology.host("h1").nics[0]
    assert nic.name == "data0"
    assert nic.ipv4 == IPv4Interface("10.0.9.9/24")
    assert nic.ipv6 == IPv6Interface("fd00:0:9::9/64")
    assert nic.mac == "02:aa:bb:cc:dd:ee"
    assert nic.params == LinkParams(bandwidth_mbps=1000.0, queue_depth=64, queue_rate_pps=500)


def test_missing_planes_mean_one_default_plane(load_yaml, small_fabric):
    topology = load_yaml(small_fabric)
    (plane,) = topology.planes
    assert (plane.id, plane.name) == (0, "plane0")
    assert plane.ipv4_prefix == IPv4Network("10.0.0.0/16")
    assert plane.ipv6_prefix == IPv6Network("fd00::/32")


def test_settings_default_to_the_documented_values(load_yaml, small_fabric):
    settings = load_yaml(small_fabric).settings
    assert settings.cpu_port == 255
    assert settings.lldp.interval_ms == 10
    assert settings.lldp.miss_limit == 3
    defaults = (*DscpClass, *RoceDscp)
    assert settings.dscp.by_class() == {member: member.value for member in defaults}
    assert settings.ecn.min_threshold < settings.ecn.max_threshold < settings.trim_threshold
    assert settings.trim_threshold < settings.link_defaults.queue_depth
    assert settings.lossless_queue.depth == 4096


def test_settings_given_in_the_file_replace_the_defaults(load_yaml, small_fabric):
    topology = load_yaml(
        small_fabric
        + """\
settings:
  cpu_port: 200
  trim_threshold: 20
  ecn: {min_threshold: 5, max_threshold: 15}
  dscp: {control: 40}
  lldp: {interval_ms: 50}
  link_defaults: {bandwidth_mbps: 10, queue_depth: 30, queue_rate_pps: 100}
  high_priority_queue: {depth: 8}
  lossless_queue: {depth: 500}
"""
    )
    settings = topology.settings
    assert settings.cpu_port == 200
    assert settings.trim_threshold == 20
    assert (settings.ecn.min_threshold, settings.ecn.max_threshold) == (5, 15)
    assert settings.dscp.control == 40
    assert settings.dscp.trimmable == DscpClass.TRIMMABLE
    assert (settings.lldp.interval_ms, settings.lldp.miss_limit) == (50, 3)
    assert settings.high_priority_queue.depth == 8
    assert settings.lossless_queue.depth == 500
    assert topology.links[0].params == LinkParams(10.0, 30, 100)
    assert topology.host("h1").nics[0].params == LinkParams(10.0, 30, 100)


def test_per_link_queue_settings_override_the_link_defaults(load_yaml, small_fabric):
    text = small_fabric.replace(
        '{a: "l1:2", b: "s1:1"}', '{a: "l1:2", b: "s1:1", queue_rate_pps: 7}'
    )
    topology = load_yaml(text)
    assert topology.links[0].params.queue_rate_pps == 7
    assert topology.links[1].params.queue_rate_pps == 0


def test_host_links_join_each_nic_to_its_switch_port(load_yaml, small_fabric):
    topology = load_yaml(small_fabric)
    (h1_link, h2_link) = topology.host_links
    assert (h1_link.a, h1_link.b) == (Endpoint("h1", 0), Endpoint("l1", 1))
    assert (h2_link.a, h2_link.b) == (Endpoint("h2", 0), Endpoint("l2", 1))
    assert topology.link_at("l1", 1) == h1_link
    assert topology.link_at("l1", 2) == topology.links[0]
    assert topology.link_at("l1", 3) is None
    assert topology.switch_ports("l1") == (1, 2)
    assert topology.switch_ports("s1") == (1, 2)


def test_link_ids_do_not_depend_on_the_direction(load_yaml, small_fabric):
    topology = load_yaml(small_fabric)
    link = topology.links[0]
    assert link.id == LinkId.between(Endpoint("s1", 1), Endpoint("l1", 2))
    assert link.far_end("l1") == Endpoint("s1", 1)


def test_yaml_anchors_and_merge_keys_are_supported(load_yaml):
    topology = load_yaml(
        """\
        switches:
          - &leaf {name: l1, role: leaf, device_id: 1}
          - {<<: *leaf, name: l2, device_id: 2}
        """
    )
    assert [switch.role for switch in topology.switches] == [Role.LEAF, Role.LEAF]


def test_the_source_file_names_the_topology_when_the_file_does_not(write_yaml, small_fabric):
    from topologies import load_topology_file

    path = write_yaml(small_fabric.replace("name: small\n", ""), name="lab.yaml")
    topology = load_topology_file(path)
    assert topology.name == "lab"
    assert topology.source == str(path)
