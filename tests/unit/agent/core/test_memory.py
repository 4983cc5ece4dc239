"""Registered memory regions: writes land only inside a region and only with its key."""

from __future__ import annotations

import random

import pytest

from agent.core.drops import DropReason
from agent.core.memory import MemoryTable


def _table() -> MemoryTable:
    return MemoryTable(random.Random(7))


def test_a_write_inside_the_region_with_its_key_is_placed():
    table = _table()
    region = table.register(bytearray(16), va=0x1000)
    assert table.write(region.rkey, 0x1004, b"abcd") is None
    assert bytes(region.buffer) == bytes(4) + b"abcd" + bytes(8)
    assert table.read(region.rkey, 0x1004, 4) == b"abcd"


def test_a_write_with_an_unknown_key_is_refused_and_touches_nothing():
    table = _table()
    region = table.register(bytearray(16), va=0x1000)
    assert table.write(region.rkey ^ 1, 0x1000, b"x") is DropReason.BAD_RKEY
    assert bytes(region.buffer) == bytes(16)


@pytest.mark.parametrize(
    ("va", "size"),
    [(0x0FFF, 1), (0x1000, 17), (0x100F, 2), (0x1010, 1), (0, 1)],
)
def test_a_write_reaching_outside_the_region_is_refused(va, size):
    table = _table()
    region = table.register(bytearray(16), va=0x1000)
    assert table.write(region.rkey, va, b"z" * size) is DropReason.OUT_OF_BOUNDS
    assert bytes(region.buffer) == bytes(16)


def test_a_write_filling_the_region_exactly_is_allowed():
    table = _table()
    region = table.register(bytearray(16), va=0x1000)
    assert table.write(region.rkey, 0x1000, b"y" * 16) is None


def test_keys_are_unique_nonzero_and_a_deregistered_key_is_refused():
    table = _table()
    regions = [table.register(bytearray(4)) for _ in range(50)]
    keys = {r.rkey for r in regions}
    assert len(keys) == 50 and 0 not in keys
    table.deregister(regions[0].rkey)
    assert table.check(regions[0].rkey, 0, 1) is DropReason.BAD_RKEY
    with pytest.raises(KeyError):
        table.deregister(regions[0].rkey)


def test_registration_refuses_what_cannot_be_addressed():
    table = _table()
    with pytest.raises(TypeError):
        table.register(b"immutable")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="64-bit"):
        table.register(bytearray(16), va=(1 << 64) - 8)
    with pytest.raises(ValueError, match="cannot read"):
        table.read(1234, 0, 1)
