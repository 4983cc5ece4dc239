"""Per-port configuration, DSCP classification, CPU port and LLDP settings in the intent."""

from __future__ import annotations

from controller.intent import DscpRule, LldpIntent, compute_intent
from topologies import load_topology_text
from topologies.document import dump_document, explicit_document
from wire.constants import DscpClass, RoceDscp


def test_ecn_is_off_toward_hosts_and_on_between_switches(leaf_spine):
    l1 = compute_intent(leaf_spine).switch("l1")
    assert [(p.port, p.host_facing, p.ecn_enabled) for p in l1.ports] == [
        (1, True, False),
        (2, True, False),
        (3, False, True),
        (4, False, True),
        (5, False, True),
        (6, False, True),
    ]
    spine = compute_intent(leaf_spine).switch("s1")
    assert spine.ports
    assert all(not p.host_facing and p.ecn_enabled for p in spine.ports)


def test_port_thresholds_and_queues_come_from_settings_and_links(leaf_spine):
    document = explicit_document(leaf_spine)
    document["links"][0]["queue_rate_pps"] = 300
    document["links"][0]["queue_depth"] = 100
    document["settings"]["high_priority_queue"] = {"depth": 16, "rate_pps": 5000}
    document["settings"]["lossless_queue"] = {"depth": 2000}
    topology = load_topology_text(dump_document(document))
    settings = topology.settings
    port = compute_intent(topology).switch("l1").port(3)  # links[0] is l1:3 - s1:1
    assert (port.queue_depth, port.queue_rate_pps) == (100, 300)
    assert (port.high_priority_queue_depth, port.high_priority_queue_rate_pps) == (16, 5000)
    assert port.lossless_queue_depth == 2000
    assert port.ecn_min_threshold == settings.ecn.min_threshold
    assert port.ecn_max_threshold == settings.ecn.max_threshold
    assert port.trim_threshold == settings.trim_threshold
    far_end = compute_intent(topology).switch("s1").port(1)
    assert (far_end.queue_depth, far_end.queue_rate_pps) == (100, 300)
    assert compute_intent(topology).switch("l1").port(4).queue_rate_pps == 0


def test_a_fabric_with_trimming_off_has_no_port_that_trims(leaf_spine):
    document = explicit_document(leaf_spine)
    document["settings"]["trimming"] = False
    topology = load_topology_text(dump_document(document))
    ports = [port for switch in compute_intent(topology).switches for port in switch.ports]
    assert ports and all(port.trim_threshold is None for port in ports)
    assert all(port.ecn_enabled != port.host_facing for port in ports)  # ECN as before


def test_dscp_rules_map_each_configured_value_to_its_class(leaf_spine):
    rules = compute_intent(leaf_spine).switch("l1").dscp_rules
    assert rules == tuple(sorted(DscpRule(int(c), c) for c in (*DscpClass, *RoceDscp)))


def test_cpu_port_and_lldp_come_from_the_settings(leaf_spine):
    intent = compute_intent(leaf_spine)
    assert {s.cpu_port for s in intent.switches} == {255}
    assert {s.lldp for s in intent.switches} == {LldpIntent(interval_ms=10, miss_limit=3)}
