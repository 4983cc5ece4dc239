"""Pluggable congestion control: the interface, NSCC (MRC's default), a DCQCN-like rate
controller and a fixed window, chosen by name with ``make_congestion_control``."""

from __future__ import annotations

from agent.core.cc.base import CongestionControl
from agent.core.cc.dcqcn import DcqcnRate
from agent.core.cc.fixed import FixedWindow
from agent.core.cc.nscc import Nscc, NsccCase
from agent.core.config import MrcConfig

__all__ = [
    "CongestionControl",
    "DcqcnRate",
    "FixedWindow",
    "Nscc",
    "NsccCase",
    "make_congestion_control",
]


def make_congestion_control(config: MrcConfig) -> CongestionControl:
    """The controller ``config.congestion_control`` names, set up from ``config``."""
    name = config.congestion_control
    if name == "nscc":
        return Nscc(config.nscc, config.initial_window, config.min_window, config.max_window)
    if name == "dcqcn":
        return DcqcnRate(config.dcqcn, config.max_window)
    if name == "fixed":
        return FixedWindow(config.initial_window)
    raise ValueError(f"unknown congestion control {name!r}")
