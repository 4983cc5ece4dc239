"""Result types written as summary.json holds them: a field's name is its key; a flat part
stands in its parent, a prefixed spread as ``<key>_mean`` and its spread, a mode as its
label; what cannot be written as JSON is refused."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

import pytest

from experiments.json_form import FLAT, OMIT_NONE, PREFIXED, TEXT, key, to_json
from experiments.stats import Spread


class Colour(StrEnum):
    RED = "red"


@dataclass(frozen=True)
class Mode:
    transport: str
    colour: Colour

    def __str__(self) -> str:
        return f"{self.transport}-{self.colour}"


@dataclass(frozen=True)
class Record:
    mode: Mode = field(metadata=FLAT)
    seeds: tuple[int, ...]
    recovery_s: tuple[float | None, ...]
    recovery: Spread = field(metadata=key("recovery_s", PREFIXED))
    order: tuple[Mode, ...] = field(metadata=TEXT)
    by_mode: Mapping[Mode, int] = field(default_factory=dict)
    stall_s: float | None = field(default=None, metadata=OMIT_NONE)
    extra: Mode | None = field(default=None, metadata=FLAT)


MODE = Mode("mrc", Colour.RED)


def test_a_record_is_written_with_its_parts_flat_its_spreads_prefixed_and_its_modes_as_labels():
    record = Record(MODE, (0, 1), (0.5, None), Spread.of([0.5, None]), (MODE,), {MODE: 3})
    assert to_json(record) == {
        "transport": "mrc",
        "colour": "red",
        "seeds": [0, 1],
        "recovery_s": [0.5, None],
        "recovery_s_mean": 0.5,
        "recovery_s_min": 0.5,
        "recovery_s_max": 0.5,
        "recovery_s_stdev": None,
        "recovery_s_seeds": 1,
        "order": ["mrc-red"],
        "by_mode": {"mrc-red": 3},
    }


def test_an_optional_figure_and_a_flat_part_that_are_none_leave_no_key():
    record = Record(MODE, (), (), Spread.of([]), (), stall_s=0.25)
    written = to_json(record)
    assert isinstance(written, dict)
    assert written["stall_s"] == 0.25 and "extra" not in written


def test_a_mapping_is_keyed_by_its_keys_labels_and_seed_numbers():
    assert to_json({0: {MODE: Colour.RED}}) == {"0": {"mrc-red": "red"}}


def test_what_json_cannot_hold_is_refused():
    with pytest.raises(TypeError, match="no JSON form for bytes"):
        to_json({"raw": b"\x00"})
