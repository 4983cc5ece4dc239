"""The CRC-32 the ICRC is made of, from the fastest implementation installed.

The ICRC is zlib's CRC-32 (same polynomial, reflection and final XOR), computed over every
packet sent and received, so its speed counts in the agent's per-packet time. ISA-L's
(``isal``, a project dependency; SIMD folding) computes the same value several times faster
than zlib's ``crc32``. Where ``isal`` cannot be imported (a platform without its wheels),
zlib's is used: same results, only slower.
"""

from __future__ import annotations

import zlib
from typing import Protocol


class Crc32(Protocol):
    """``crc32(data, seed=0)``: zlib-compatible CRC-32 of ``data`` continuing from ``seed``."""

    def __call__(self, data: bytes | bytearray | memoryview, value: int = 0, /) -> int: ...


def _fastest() -> tuple[Crc32, str]:
    try:
        from isal.isal_zlib import crc32 as isal_crc32
    except ImportError:  # pragma: no cover - isal is a dependency; this is for odd platforms
        return zlib.crc32, "zlib"
    return isal_crc32, "isal"


#: The CRC-32 every ICRC is computed with, and which implementation it is.
crc32, IMPLEMENTATION = _fastest()
