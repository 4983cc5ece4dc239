"""Preset topologies on service ports of their own, for the testbed tests.

The presets use the default ports (gRPC 50050 + device id, Thrift 9089 + device id); other
test modules and a user's ``make run-topology`` may hold those at the same time. The copies
written here are the same fabrics with every switch's ports moved to a base the tests own.
"""

from __future__ import annotations

from pathlib import Path

import yaml

from topologies.presets import PRESETS


def preset_on_own_ports(preset: str, directory: Path, grpc_base: int, thrift_base: int) -> Path:
    """Write ``preset`` with ports ``grpc_base + device_id`` and ``thrift_base + device_id``."""
    document = yaml.safe_load(PRESETS[preset].path.read_text(encoding="utf-8"))
    for switch in document["switches"]:
        switch["grpc_port"] = grpc_base + switch["device_id"]
        switch["thrift_port"] = thrift_base + switch["device_id"]
    path = directory / f"{preset}.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    return path
