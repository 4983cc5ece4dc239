"""Source-level agreements between the TNA program and mrc.p4 that no compiler checks.

The TNA ingress parser must accept exactly the BTH opcodes mrc.p4's parser accepts (any other is
dropped as an unknown opcode on both targets), and the trim sessions' truncation length must
cover the longest header stack a trimmable packet has, from the header sizes both share.
"""

from __future__ import annotations

import re

from p4src import SOURCE_DIR

DEFINES = (SOURCE_DIR / "include" / "defines.p4").read_text()
TNA_DEFINES = (SOURCE_DIR / "tna" / "include" / "defines.p4").read_text()


def bth_opcodes(parser_source: str) -> set[str]:
    """The opcode constants of the first `state parse_bth` select in a parser source."""
    start = parser_source.index("state parse_bth")
    body = parser_source[start : parser_source.index("default:", start)]
    return set(re.findall(r"\b((?:OP|ROCE)_[A-Z_]+)\s*:", body))


def constant(source: str, name: str) -> int:
    match = re.search(rf"\b{name}\s*=\s*(\d+)\s*;", source)
    assert match, f"{name} not defined"
    return int(match.group(1))


def test_the_tna_parser_accepts_the_opcodes_mrc_p4_accepts() -> None:
    bmv2 = bth_opcodes((SOURCE_DIR / "include" / "parser.p4").read_text())
    tna = bth_opcodes((SOURCE_DIR / "tna" / "include" / "parser.p4").read_text())
    assert len(bmv2) == 20
    assert tna == bmv2


def test_trim_truncation_covers_the_longest_trimmable_header_stack() -> None:
    longest = sum(
        constant(DEFINES, name)
        for name in (
            "ETH_LEN",
            "IPV6_LEN",  # an SRv6 carrier's outer header
            "IPV6_LEN",
            "UDP_LEN",
            "BTH_LEN",
            "METH_LEN",
            "TSETH_LEN",
            "RETH_LEN",
            "IMM_LEN",
        )
    )
    mirror_header = 2
    assert constant(TNA_DEFINES, "TRIM_TRUNCATE_BYTES") == mirror_header + longest
