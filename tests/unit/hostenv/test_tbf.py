"""A port's packet rate and depth become a tbf that passes the same number of full frames."""

from __future__ import annotations

import pytest

from hostenv.tbf import (
    FRAME_BYTES,
    MAX_FRAME_BYTES,
    TbfParameters,
    tbf_parameters,
)


def test_frame_bytes_is_a_full_mrc_data_frame_over_ipv6() -> None:
    # Ethernet 14 + IPv6 40 + UDP 8 + BTH 12 + METH 4 + TSETH 4 + RETH 16 + 1024 + ICRC 4.
    assert FRAME_BYTES == 1126
    assert FRAME_BYTES <= MAX_FRAME_BYTES


def test_rate_is_packets_per_second_times_frame_bits() -> None:
    assert tbf_parameters(1000, 64).rate_bits_per_s == 1000 * FRAME_BYTES * 8


def test_queue_holds_depth_full_frames() -> None:
    assert tbf_parameters(1000, 64).limit_bytes == 64 * FRAME_BYTES


def test_bucket_and_queue_always_hold_one_largest_frame() -> None:
    parameters = tbf_parameters(1, 1)
    assert parameters.burst_bytes == MAX_FRAME_BYTES
    assert parameters.limit_bytes == MAX_FRAME_BYTES


def test_bucket_grows_with_rate_to_a_millisecond_of_tokens() -> None:
    # 100 kpps of 1126-byte frames is 112.6 MB/s: a millisecond of it is 112600 bytes.
    assert tbf_parameters(100_000, 64).burst_bytes == 112_600


@pytest.mark.parametrize(("rate", "depth"), [(0, 64), (-5, 64), (100, 0)])
def test_unlimited_rate_or_empty_queue_has_no_tbf(rate: int, depth: int) -> None:
    with pytest.raises(ValueError, match="tbf needs"):
        tbf_parameters(rate, depth)


def test_tc_arguments_spell_units_explicitly() -> None:
    arguments = TbfParameters(rate_bits_per_s=8000, burst_bytes=1514, limit_bytes=3000)
    assert arguments.tc_arguments() == (
        "tbf",
        "rate",
        "8000bit",
        "burst",
        "1514b",
        "limit",
        "3000b",
    )
