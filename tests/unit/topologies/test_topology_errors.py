"""Every kind of mistake in a topology file is reported with the file, the line and the cause.

Each case marks the line the error must name with ``# <-``.
"""

from __future__ import annotations

import textwrap

import pytest

from topologies import TopologyError, load_topology_file, load_topology_text

HEAD = """\
switches:
  - {name: l1, role: leaf, device_id: 1}
  - {name: l2, role: leaf, device_id: 2}
  - {name: s1, role: spine, device_id: 3}
"""

CASES: dict[str, tuple[str, str]] = {
    "yaml syntax": ("switches:\n\t- {name: l1}  # <-\n", "YAML syntax error"),
    "bad indentation": (
        "switches:\n  - name: l1\n   role: leaf  # <-\n",
        "YAML syntax error",
    ),
    "unknown yaml tag": ("switches: !foo 3  # <-\n", "unsupported YAML value"),
    "recursive alias": ("switches: &x [*x]  # <-\n", "recursive YAML alias"),
    "duplicate key": (
        "switches:\n  - name: l1\n    role: leaf\n    name: l2  # <-\n    device_id: 1\n",
        "duplicate key 'name' (first at line 2)",
    ),
    "unknown top-level field": ("swiches: []  # <-\n", "unknown field 'swiches' in topology"),
    "unknown switch field": (
        "switches:\n  - name: l1\n    role: leaf\n    device_id: 1\n    colour: red  # <-\n",
        "unknown field 'colour' in switch #1",
    ),
    "unknown nested settings field": (
        HEAD + "settings:\n  ecn:\n    min: 3  # <-\n",
        "unknown field 'min' in topology 'settings' 'ecn'",
    ),
    "missing required field": (
        "switches:\n  - {name: l1, role: leaf}  # <-\n",
        "switch 'l1': missing required field 'device_id'",
    ),
    "missing switches": ("name: empty  # <-\n", "missing required field 'switches'"),
    "no switches": ("switches: []  # <-\n", "'switches' must list at least one switch"),
    "wrong type": (
        "switches:\n  - name: l1\n    role: leaf\n    device_id: one  # <-\n",
        "field 'device_id' must be an integer, not 'one'",
    ),
    "boolean for an integer": (
        "switches:\n  - name: l1\n    role: leaf\n    device_id: true  # <-\n",
        "must be an integer",
    ),
    "out of range": (
        "switches:\n  - name: l1\n    role: leaf\n    device_id: 0  # <-\n",
        "field 'device_id' is 0, outside 1..65535",
    ),
    "unsupported yaml value": (
        "switches:\n  - {name: l1, role: leaf, device_id: 2024-01-01}  # <-\n",
        "unsupported YAML value",
    ),
    "bad node name": (
        "switches:\n  - {name: 'leaf one', role: leaf, device_id: 1}  # <-\n",
        "does not match",
    ),
    "unknown role": (
        "switches:\n  - name: l1\n    role: tor  # <-\n    device_id: 1\n",
        "unknown role 'tor'",
    ),
    "duplicate switch name": (
        "switches:\n  - {name: l1, role: leaf, device_id: 1}\n"
        "  - {name: l1, role: leaf, device_id: 2}  # <-\n",
        "name l1 is already used by switch 'l1' (line 2)",
    ),
    "host named like a switch": (
        HEAD + "hosts:\n  - name: l2  # <-\n    nics: [{switch: l1, port: 1}]\n",
        "name l2 is already used by switch 'l2'",
    ),
    "duplicate device id": (
        "switches:\n  - {name: l1, role: leaf, device_id: 1}\n"
        "  - {name: l2, role: leaf, device_id: 1}  # <-\n",
        "device_id 1 is already used by switch 'l1'",
    ),
    "service port clash": (
        "switches:\n  - {name: l1, role: leaf, device_id: 1}\n"
        "  - name: l2\n    role: leaf\n    device_id: 2\n    thrift_port: 50051  # <-\n",
        "TCP port 50051 is already used by switch 'l1' grpc_port",
    ),
    "unknown plane": (
        "switches:\n  - name: l1\n    role: leaf\n    device_id: 1\n    plane: 3  # <-\n",
        "unknown plane 3",
    ),
    "empty planes": (
        "planes: []  # <-\nswitches:\n  - {name: l1, role: leaf, device_id: 1}\n",
        "'planes' must list at least one plane",
    ),
    "duplicate plane": (
        "planes:\n  - {id: 0}\n  - {id: 0, name: other}  # <-\n"
        "switches:\n  - {name: l1, role: leaf, device_id: 1}\n",
        "plane id 0 is already used by plane 0",
    ),
    "overlapping plane prefixes": (
        "planes:\n  - {id: 0}\n  - id: 1\n    ipv4_prefix: 10.0.0.0/8  # <-\n"
        "switches:\n  - {name: l1, role: leaf, device_id: 1}\n",
        "ipv4_prefix 10.0.0.0/8 overlaps plane 0's 10.0.0.0/16",
    ),
    "plane prefix with host bits": (
        "planes:\n  - id: 0\n    ipv4_prefix: 10.0.0.1/16  # <-\n"
        "switches:\n  - {name: l1, role: leaf, device_id: 1}\n",
        "bad ipv4_prefix '10.0.0.1/16'",
    ),
    "link to an unknown node": (
        HEAD + "links:\n  - a: l1:5\n    b: x9:1  # <-\n",
        "unknown node 'x9'",
    ),
    "link to a host": (
        HEAD + "hosts:\n  - {name: h1, nics: [{switch: l1, port: 1}]}\n"
        "links:\n  - {a: 'l2:5', b: 'h1:0'}  # <-\n",
        "'h1' is a host",
    ),
    "malformed link end": (
        HEAD + "links:\n  - {a: 'l1-5', b: 's1:1'}  # <-\n",
        "end 'a' must be NODE:PORT",
    ),
    "link port out of range": (
        HEAD + "links:\n  - {a: 'l1:600', b: 's1:1'}  # <-\n",
        "port 600 is outside 0..510",
    ),
    "link on the cpu port": (
        HEAD + "links:\n  - {a: 'l1:255', b: 's1:1'}  # <-\n",
        "port 255 of 'l1' is the CPU port",
    ),
    "port used twice by links": (
        HEAD + "links:\n  - {a: 'l1:5', b: 's1:1'}\n  - {a: 'l2:5', b: 's1:1'}  # <-\n",
        "port s1:1 is already used by link l1:5-s1:1 (line 6)",
    ),
    "port used by a link and a nic": (
        HEAD + "links:\n  - {a: 'l1:5', b: 's1:1'}\n"
        "hosts:\n  - name: h1\n    nics:\n      - switch: l1\n        port: 5  # <-\n",
        "port l1:5 is already used by link l1:5-s1:1",
    ),
    "self loop": (
        HEAD + "links:\n  - a: 's1:1'\n    b: 's1:2'  # <-\n",
        "cannot join a switch to itself",
    ),
    "link across planes": (
        "planes: [{id: 0}, {id: 1}]\nswitches:\n  - {name: l1, role: leaf, device_id: 1}\n"
        "  - {name: s1, role: spine, device_id: 2, plane: 1}\n"
        "links:\n  - {a: 'l1:5', b: 's1:1'}  # <-\n",
        "joins plane 0 to plane 1",
    ),
    "host without nics": (HEAD + "hosts:\n  - name: h1\n    nics: []  # <-\n", "at least one NIC"),
    "host missing nics": (HEAD + "hosts:\n  - name: h1  # <-\n", "missing required field 'nics'"),
    "nic on an unknown switch": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - switch: l7  # <-\n        port: 1\n",
        "unknown switch 'l7'",
    ),
    "duplicate nic names": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - {name: eth0, switch: l1, port: 1}\n"
        "      - {name: eth0, switch: l2, port: 1}  # <-\n",
        "NIC name eth0 is already used by host 'h1'",
    ),
    "nic plane differs from its switch": (
        "planes: [{id: 0}, {id: 1}]\n" + HEAD + "hosts:\n  - name: h1\n    nics:\n"
        "      - switch: l1\n        port: 1\n        plane: 1  # <-\n",
        "plane 1 differs from switch 'l1''s plane 0",
    ),
    "malformed ipv4": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - switch: l1\n        port: 1\n"
        "        ipv4: 10.0.1.300/24  # <-\n",
        "bad ipv4 '10.0.1.300/24'",
    ),
    "ipv4 without prefix length": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - switch: l1\n        port: 1\n"
        "        ipv4: 10.0.1.3  # <-\n",
        "give the prefix length",
    ),
    "ipv6 in the ipv4 field": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - switch: l1\n        port: 1\n"
        "        ipv4: fd00::1/64  # <-\n",
        "bad ipv4",
    ),
    "network address as host address": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - switch: l1\n        port: 1\n"
        "        ipv4: 10.0.1.0/24  # <-\n",
        "network address",
    ),
    "address outside its plane": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - switch: l1\n        port: 1\n"
        "        ipv4: 10.7.1.1/24  # <-\n",
        "ipv4 10.7.1.1/24 is not inside plane 0's prefix 10.0.0.0/16",
    ),
    "duplicate address": (
        HEAD + "hosts:\n  - {name: h1, nics: [{switch: l1, port: 1, ipv4: 10.0.5.5/24}]}\n"
        "  - name: h2\n    nics:\n      - switch: l2\n        port: 1\n"
        "        ipv4: 10.0.5.5/24  # <-\n",
        "address 10.0.5.5 is already used by host 'h1' NIC 'eth0'",
    ),
    "malformed mac": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - switch: l1\n        port: 1\n"
        "        mac: 02:00:00:00:00  # <-\n",
        "malformed MAC address",
    ),
    "multicast mac": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - switch: l1\n        port: 1\n"
        "        mac: 01:00:5e:00:00:01  # <-\n",
        "is multicast",
    ),
    "mac of a switch port": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - switch: l1\n        port: 1\n"
        "        mac: 02:00:00:01:00:01  # <-\n",
        "MAC 02:00:00:01:00:01 is already used by switch 'l1'",
    ),
    "addresses cannot be derived": (
        HEAD + "hosts:\n  - name: h1\n    nics:\n      - {switch: l1, port: 300}  # <-\n",
        "cannot derive its addresses (switch port 300 is outside 1..254",
    ),
    "ecn thresholds reversed": (
        HEAD + "settings:\n  ecn:\n    min_threshold: 30  # <-\n    max_threshold: 20\n",
        "min_threshold 30 is above max_threshold 20",
    ),
    "trimming not a boolean": (
        HEAD + "settings:\n  trimming: off please  # <-\n",
        "field 'trimming' must be true or false",
    ),
    "dscp value used twice": (
        HEAD + "settings:\n  dscp:\n    trimmable: 4\n    control: 4  # <-\n",
        "DSCP value 4 is used by both 'trimmable' and 'control'",
    ),
    "dscp value out of range": (
        HEAD + "settings:\n  dscp:\n    control: 64  # <-\n",
        "field 'control' is 64, outside 0..63",
    ),
    "queue shallower than the trim threshold": (
        HEAD + "links:\n  - a: 'l1:5'\n    b: 's1:1'\n    queue_depth: 40  # <-\n",
        "queue_depth 40 must be above trim_threshold 48",
    ),
    "default queue shallower than the trim threshold": (
        HEAD + "settings:\n  trim_threshold: 100\n  link_defaults: {queue_depth: 64}  # <-\n",
        "settings link_defaults: queue_depth 64 must be above trim_threshold 100",
    ),
    "lossless queue not deeper than ecn max": (
        HEAD + "settings:\n  lossless_queue: {depth: 40}  # <-\n",
        "settings lossless_queue: depth 40 must be above ecn max_threshold 40",
    ),
    "non-positive bandwidth": (
        HEAD + "links:\n  - a: 'l1:5'\n    b: 's1:1'\n    bandwidth_mbps: 0  # <-\n",
        "field 'bandwidth_mbps' must be greater than 0",
    ),
    "top level is a list": ("- switches  # <-\n", "topology must be a mapping"),
    "empty file": ("# nothing here  # <-\n", "the topology file is empty"),
}


def _marked_line(text: str) -> int:
    (line,) = [number for number, row in enumerate(text.splitlines(), 1) if "# <-" in row]
    return line


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_error_names_the_file_the_line_and_the_cause(case, write_yaml):
    text, cause = CASES[case]
    path = write_yaml(text)
    with pytest.raises(TopologyError) as caught:
        load_topology_file(path)
    line = _marked_line(text)
    assert any(
        problem.line == line and cause in problem.message for problem in caught.value.problems
    ), f"expected line {line}: ...{cause}...; got:\n{caught.value}"
    assert f"{path}:{line}: " in str(caught.value)


def test_all_problems_of_a_file_are_reported_together():
    text = textwrap.dedent(
        """\
        switches:
          - {name: l1, role: leaf, device_id: 1, colour: red}
          - {name: l2, role: tor, device_id: 2}
          - {name: s1, role: spine, device_id: x}
        """
    )
    with pytest.raises(TopologyError) as caught:
        load_topology_text(text, source="three.yaml")
    assert [problem.line for problem in caught.value.problems] == [2, 3, 4]


def test_cross_checks_report_every_clash_at_once(small_fabric):
    text = small_fabric + "  - {a: 'l1:2', b: 's1:3'}\n  - {a: 'l2:9', b: 'x1:1'}\n"
    with pytest.raises(TopologyError) as caught:
        load_topology_text(text, source="clashes.yaml")
    messages = [problem.message for problem in caught.value.problems]
    assert len(messages) == 2
    assert "already used" in messages[0]
    assert "unknown node 'x1'" in messages[1]


def test_an_unreadable_file_is_reported_with_its_name(tmp_path):
    missing = tmp_path / "missing.yaml"
    with pytest.raises(TopologyError) as caught:
        load_topology_file(missing)
    assert str(caught.value).startswith(f"{missing}:1: cannot read the file")
