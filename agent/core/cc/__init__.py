"""Pluggable congestion control: the interface, the registry every choice reads, and the
built-in controllers (NSCC, MRC's default; a DCQCN-like rate controller; a fixed window)."""

from __future__ import annotations

from agent.core.cc import builtin as _builtin  # noqa: F401  (registers nscc, dcqcn, fixed)
from agent.core.cc.base import CongestionControl
from agent.core.cc.dcqcn import DcqcnRate
from agent.core.cc.fixed import FixedWindow
from agent.core.cc.nscc import Nscc, NsccCase
from agent.core.cc_registry import (
    CongestionControlSpec,
    congestion_control_names,
    congestion_control_spec,
    register_congestion_control,
)
from agent.core.config import MrcConfig

__all__ = [
    "CongestionControl",
    "CongestionControlSpec",
    "DcqcnRate",
    "FixedWindow",
    "Nscc",
    "NsccCase",
    "congestion_control_names",
    "create_congestion_control",
    "register_congestion_control",
]


def create_congestion_control(config: MrcConfig) -> CongestionControl:
    """The controller ``config.congestion_control`` names, set up from ``config``."""
    controller: CongestionControl = congestion_control_spec(config.congestion_control).create(
        config
    )
    return controller
