"""The CRC-32 behind every ICRC: whichever implementation is installed, it is zlib's."""

from __future__ import annotations

import random
import zlib

from agent.core import crc


def test_the_installed_crc32_equals_zlibs_for_any_data_and_seed():
    rng = random.Random(7)
    for size in (0, 1, 7, 64, 1024, 1100, 4096):
        data = rng.randbytes(size)
        seed = rng.getrandbits(32)
        assert crc.crc32(data, seed) == zlib.crc32(data, seed)
        assert crc.crc32(data) == zlib.crc32(data)
        assert crc.crc32(memoryview(bytearray(data))[1:], seed) == zlib.crc32(data[1:], seed)


def test_the_fast_implementation_is_the_one_in_use_when_installed():
    try:
        import isal.isal_zlib  # noqa: F401
    except ImportError:
        assert crc.IMPLEMENTATION == "zlib"
    else:
        assert crc.IMPLEMENTATION == "isal"
