"""Fixtures for the topology tests: small YAML files written to a temporary directory."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from topologies import Topology, load_topology_file


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
