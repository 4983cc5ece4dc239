"""Fixtures for the topology tests: small YAML files written to a temporary directory."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from topologies import Topology, load_topology_file

_SMALL_FABRIC = """\
name: small
switches:
  - {name: l1, role: leaf, device_id: 1}
  - {name: l2, role: leaf, device_id: 2}
  - {name: s1, role: spine, device_id: 3}
hosts:
  - name: h1
    nics:
      - {switch: l1, port: 1}
  - name: h2
    nics:
      - {switch: l2, port: 1}
links:
  - {a: "l1:2", b: "s1:1"}
  - {a: "l2:2", b: "s1:2"}
"""


@pytest.fixture
def small_fabric() -> str:
    """Two leaves, one spine, one host per leaf: the smallest routed fabric, as YAML text."""
    return _SMALL_FABRIC


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[str], Path]:
    """Write dedented YAML text to a file and return its path."""

    def write(text: str, name: str = "topo.yaml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text), encoding="utf-8")
        return path

    return write


@pytest.fixture
def load_yaml(write_yaml: Callable[[str], Path]) -> Callable[[str], Topology]:
    """Write YAML text to a file and load it as a topology."""

    def load(text: str) -> Topology:
        return load_topology_file(write_yaml(text))

    return load
