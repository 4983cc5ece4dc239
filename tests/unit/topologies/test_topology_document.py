"""The explicit form spells out every resolved value and loads back to the same topology."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topologies import PRESETS, load_topology, load_topology_text
from topologies.document import dump_document, explicit_document
from topologies.generator import leaf_spine


@pytest.mark.parametrize("name", sorted(PRESETS))
def test_explicit_form_of_each_preset_loads_back_equal(name):
    topology = load_topology(name)
    text = dump_document(explicit_document(topology))
    assert load_topology_text(text, source="<explicit>") == topology


def test_explicit_form_shows_derived_values():
    document = explicit_document(load_topology("leaf-spine"))
    nic = document["hosts"][0]["nics"][0]
    assert (nic["ipv4"], nic["ipv6"], nic["mac"]) == (
        "10.0.1.1/24",
        "fd00:0:1::1/64",
        "02:10:00:01:00:00",
    )
    assert document["switches"][0]["grpc_port"] == 50051


def test_a_header_becomes_comment_lines():
    text = dump_document({"name": "x"}, header="first\n\nsecond")
    assert text.splitlines()[:3] == ["# first", "#", "# second"]


@settings(max_examples=10, deadline=None)
@given(
    leaves=st.integers(1, 4),
    spines=st.integers(1, 3),
    hosts=st.integers(1, 3),
    planes=st.integers(1, 2),
    queue_rate=st.integers(0, 5000),
)
def test_explicit_round_trip_holds_for_generated_fabrics(leaves, spines, hosts, planes, queue_rate):
    generated = dump_document(leaf_spine(leaves, spines, hosts, planes=planes))
    generated += f"settings: {{link_defaults: {{queue_rate_pps: {queue_rate}}}}}\n"
    topology = load_topology_text(generated)
    assert load_topology_text(dump_document(explicit_document(topology))) == topology
