"""The link bytes' split: solved from packet and byte counts with MRC's two frame sizes."""

from __future__ import annotations

import pytest

from experiments.bottleneck import LinkUtilisation
from experiments.link_overhead import (
    data_frame_bytes,
    link_overhead,
    sack_frame_bytes,
)


def _link(data: int, other: int, payload: int = 1024) -> LinkUtilisation:
    size = data * data_frame_bytes(payload) + other * sack_frame_bytes()
    return LinkUtilisation("l1:3-s1:1", "port_tx", data + other, size, "200 packets/s", 0.5)


def test_frame_sizes_are_mrcs_full_data_packet_and_sack_on_ipv4_ethernet():
    assert data_frame_bytes(1024) == 1106  # Ethernet, IPv4, UDP 42 + MRC headers 36 + 1024 + ICRC 4
    assert sack_frame_bytes() == 94


def test_a_known_mix_of_data_and_sacks_is_recovered_with_its_shares():
    split = link_overhead([_link(800, 200), _link(200, 100), None], payload=1024)
    assert split is not None
    assert split.data_frames == pytest.approx(1000) and split.other_frames == pytest.approx(300)
    total = 1000 * 1106 + 300 * 94
    assert split.payload_share == pytest.approx(1000 * 1024 / total)
    assert split.header_share == pytest.approx(1000 * 82 / total)
    assert split.other_share == pytest.approx(300 * 94 / total)
    assert split.other_frames_per_data_frame == pytest.approx(0.3)


def test_nothing_counted_in_bytes_gives_no_split():
    uncounted = LinkUtilisation("l1:3-s1:1", "member", 10, None, "200 packets/s", None)
    assert link_overhead([uncounted, None], payload=1024) is None
    assert link_overhead([], payload=1024) is None


def test_counts_outside_any_mix_are_clamped_not_negative():
    only_small = LinkUtilisation("l", "port_tx", 10, 10 * 60, "x", None)  # smaller than SACKs
    split = link_overhead([only_small], payload=1024)
    assert split is not None and split.data_frames == 0 and split.other_frames == 10
    assert split.other_frames_per_data_frame is None
