"""Which target ``auto`` takes and why, and what a target lacks against BMv2, one line each,
read from its declared capabilities (no root, Mininet or BMv2 needed)."""

from __future__ import annotations

import pytest

from testbed import targets
from testbed.targets import (
    default_target,
    differences,
    kernel_qdiscs_for,
    roce_class,
    target_help,
)

BMV2_MISSING = [
    "simple_switch_grpc not found: make toolchain",
    "simple_switch_CLI not found: make toolchain",
]


def test_auto_takes_bmv2_where_its_tools_are_present_and_names_the_other_choice() -> None:
    choice = default_target({"bmv2": [], "linux": ["never asked"]})
    assert choice.announcement == (
        "target bmv2: BMv2's tools are present (TARGET=linux for kernel switches)"
    )


def test_auto_falls_back_to_kernel_switches_naming_what_bmv2_lacks() -> None:
    choice = default_target({"bmv2": BMV2_MISSING, "linux": ["pyroute2 not found"]})
    assert choice.target.name == "linux"  # the last choice, whatever it lacks
    assert choice.announcement == (
        "target linux: kernel switches, because BMv2 is not usable here "
        "(simple_switch_grpc not found and 1 more; `make doctor`)"
    )


def test_the_help_names_every_target_the_testbed_can_start() -> None:
    assert target_help() == (
        "the switch target: bmv2, linux, or auto (bmv2 where its tools are present)"
    )


def test_bmv2_lacks_nothing_and_linux_lists_each_difference_in_order() -> None:
    assert differences("bmv2", None) == []
    assert differences("linux", {"red": True}) == [
        "no packet trimming: MRC recovers lost packets by SACK and timeout",
        "no DSCP classes or high-priority queue: MRC control, trimmed headers and RoCE ACK/NAKs "
        "and CNPs queue with data (the kernel forwards RoCE and MRC alike, by address)",
        "no lossless RoCE class: RoCE data shares each port's one queue, and a full queue drops "
        "it at the tail",
        "no per-member counters: per-interface rx/tx/drop counters instead",
        "ECN marking by the kernel's red, on rate-limited fabric ports only",
        "no switch restart: a kernel switch has no process to kill (`restart` is refused)",
        "link state from netlink carrier events, not LLDP probes",
    ]


def test_a_roce_figure_from_bmv2_names_its_lossless_class_and_dcqcns_marks() -> None:
    assert roce_class("bmv2", None) == (
        "lossless class: no congestion drops; pause frames (PFC) not modelled; ECN marking by "
        "mrc.p4 on fabric ports, so DCQCN acts"
    )


def test_a_roce_figure_from_linux_says_it_meets_tail_drops_and_whether_dcqcn_acts() -> None:
    tail_drops = (
        "no lossless RoCE class: RoCE data shares each port's one queue, and a full queue drops "
        "it at the tail"
    )
    assert roce_class("linux", {"red": False, "codel": False, "fq_codel": False}) == (
        f"{tail_drops}; no ECN marking: this kernel offers neither RED nor codel "
        "(hostenv/qdiscs.py), so DCQCN never acts"
    )
    assert roce_class("linux", {"red": True}) == (
        f"{tail_drops}; ECN marking by the kernel's red, on rate-limited fabric ports only, so "
        "DCQCN acts"
    )
    unprobed = roce_class("linux", None)
    assert unprobed.endswith("could not be probed (needs root), so DCQCN may not act")


def test_a_roce_figure_from_tofino_rests_on_the_switchs_pfc_configuration() -> None:
    assert roce_class("tofino", None).startswith(
        "lossless class (queue QID_LOSSLESS) as far as the switch's port configuration runs PFC"
    )


def test_a_hardware_target_has_its_differences_too() -> None:
    assert differences("tofino", None) == []


def test_the_kernels_qdiscs_are_probed_only_where_ecn_marking_rests_on_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(targets, "probe_qdiscs", lambda: {"red": True})
    assert kernel_qdiscs_for("bmv2") is None
    assert kernel_qdiscs_for("linux") == {"red": True}

    def no_root() -> dict[str, bool]:
        raise PermissionError("needs root")

    monkeypatch.setattr(targets, "probe_qdiscs", no_root)
    assert kernel_qdiscs_for("linux") is None
