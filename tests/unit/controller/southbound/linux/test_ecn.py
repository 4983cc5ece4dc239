"""A port's ECN thresholds become a marking qdisc under its tbf: RED with ``ecn`` where the
kernel has it (BMv2's model: a ramp from min to max queued frames), else codel, else fq_codel
with ``ce_threshold`` at the time the min threshold takes to drain; never toward hosts, and never
on an unshaped port (no queue on a veth)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from controller.intent.model import PortIntent
from controller.southbound.linux.ecn import (
    EcnMarker,
    ce_threshold_marker,
    choose_ecn_qdisc,
    ecn_marker,
    plain_fifo,
    red_marker,
)
from hostenv.tbf import FRAME_BYTES, tbf_parameters

FABRIC_PORT = PortIntent(
    port=3,
    host_facing=False,
    ecn_enabled=True,
    ecn_min_threshold=10,
    ecn_max_threshold=40,
    trim_threshold=60,
    queue_depth=64,
    queue_rate_pps=1000,
    high_priority_queue_depth=0,
    high_priority_queue_rate_pps=0,
    lossless_queue_depth=0,
)


@pytest.mark.parametrize(
    ("offered", "chosen"),
    [
        ({"red", "codel", "fq_codel"}, "red"),
        ({"codel", "fq_codel"}, "codel"),
        ({"fq_codel", "tbf"}, "fq_codel"),
        ({"pfifo", "tbf", "htb"}, None),
        (set(), None),
    ],
)
def test_the_most_faithful_offered_qdisc_is_chosen(offered: set[str], chosen: str | None) -> None:
    assert choose_ecn_qdisc(offered) == chosen


def test_red_thresholds_and_limit_are_frames_of_the_intent() -> None:
    rate_bits = 1000 * FRAME_BYTES * 8
    assert red_marker(FABRIC_PORT).tc_arguments() == (
        "red",
        "limit",
        f"{64 * FRAME_BYTES}b",
        "min",
        f"{10 * FRAME_BYTES}b",
        "max",
        f"{40 * FRAME_BYTES}b",
        "avpkt",
        f"{FRAME_BYTES}b",
        "bandwidth",
        f"{rate_bits}bit",
        "probability",
        "1.0",
        "ecn",
    )


def test_red_max_at_or_below_min_becomes_one_frame_above_it() -> None:
    port = replace(FABRIC_PORT, ecn_min_threshold=20, ecn_max_threshold=20)
    arguments = red_marker(port).arguments
    assert arguments[arguments.index("max") + 1] == f"{21 * FRAME_BYTES}b"


@pytest.mark.parametrize("kind", ["codel", "fq_codel"])
def test_ce_threshold_is_the_time_the_min_threshold_takes_at_the_port_rate(kind: str) -> None:
    # 10 frames at 1000 frames/s wait 10 ms.
    assert ce_threshold_marker(kind, FABRIC_PORT) == EcnMarker(
        kind, ("limit", "64", "ce_threshold", "10000us", "ecn")
    )


def test_ce_threshold_rounds_up_to_a_whole_microsecond() -> None:
    port = replace(FABRIC_PORT, ecn_min_threshold=1, queue_rate_pps=3_000_000)
    assert "1us" in ce_threshold_marker("codel", port).arguments


def test_a_qdisc_without_ce_threshold_is_refused() -> None:
    with pytest.raises(ValueError, match="no ce_threshold"):
        ce_threshold_marker("red", FABRIC_PORT)


def test_a_shaped_fabric_port_gets_the_chosen_marker() -> None:
    assert ecn_marker(FABRIC_PORT, {"red", "codel"}) == red_marker(FABRIC_PORT)
    assert ecn_marker(FABRIC_PORT, {"fq_codel"}) == ce_threshold_marker("fq_codel", FABRIC_PORT)


@pytest.mark.parametrize(
    "port",
    [
        replace(FABRIC_PORT, host_facing=True, ecn_enabled=False),  # toward a host
        replace(FABRIC_PORT, queue_rate_pps=0),  # unshaped: no queue on a veth
    ],
    ids=["host-facing", "unshaped"],
)
def test_ports_without_ecn_or_without_a_queue_are_not_marked(port: PortIntent) -> None:
    assert ecn_marker(port, {"red", "codel", "fq_codel"}) is None


def test_no_marker_where_the_kernel_offers_no_marking_qdisc() -> None:
    assert ecn_marker(FABRIC_PORT, {"pfifo", "tbf", "htb"}) is None


def test_a_marker_no_longer_wanted_gives_way_to_the_tbfs_own_fifo() -> None:
    shaper = tbf_parameters(1000, 64)
    assert plain_fifo(shaper).tc_arguments() == ("bfifo", "limit", f"{64 * FRAME_BYTES}b")
