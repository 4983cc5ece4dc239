"""The TNA program answers to mrc.p4's P4Runtime names, except where p4src/name_map.py says.

Every table, action, counter, action profile, register and controller header of mrc.p4 is either
in the committed TNA P4Info under the name tna_name() gives, with the same match fields and action
parameters (names, match kinds, widths), or listed as absent with a reason; and the map holds no
entry that names nothing. Read from the committed P4Infos, so no compiler is needed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from finsy.proto import p4i
from google.protobuf import text_format

from p4src import BUILD_DIR, TNA_BUILD_DIR
from p4src.name_map import TNA_ABSENT, TNA_RENAMED, tna_name

KINDS = ("tables", "actions", "counters", "action_profiles", "registers")


def load(path: str) -> p4i.P4Info:
    info = p4i.P4Info()
    text_format.Parse((BUILD_DIR / path).read_text(), info)
    return info


BMV2 = load("mrc.p4info.txtpb")
TNA = load("tna/mrc.p4info.txtpb")


def named(info: p4i.P4Info) -> dict[str, tuple[str, Any]]:
    """Every P4Runtime-visible object by name: (kind, message)."""
    objects: dict[str, tuple[str, Any]] = {}
    for kind in KINDS:
        for obj in getattr(info, kind):
            objects[obj.preamble.name] = (kind, obj)
    for header in info.controller_packet_metadata:
        objects[header.preamble.name] = ("controller_packet_metadata", header)
    return objects


BMV2_NAMES = named(BMV2)
TNA_NAMES = named(TNA)


def mapped() -> Iterator[tuple[str, str]]:
    for name in sorted(BMV2_NAMES):
        target = tna_name(name)
        if target is not None:
            yield name, target


def action_names(info_names: dict[str, tuple[str, Any]], table: Any) -> set[str]:
    by_id = {obj.preamble.id: name for name, (kind, obj) in info_names.items() if kind == "actions"}
    return {by_id[ref.id] for ref in table.action_refs}


def test_committed_tna_p4info_exists() -> None:
    assert (TNA_BUILD_DIR / "mrc.p4info.txtpb").is_file()


@pytest.mark.parametrize(("bmv2_name", "tna"), list(mapped()))
def test_every_mrc_object_is_in_the_tna_program_under_its_mapped_name(
    bmv2_name: str, tna: str
) -> None:
    assert tna in TNA_NAMES, (
        f"{bmv2_name} (as {tna}) is not in p4src/build/tna/mrc.p4info.txtpb: add it to the TNA "
        "program or to p4src/name_map.py"
    )
    assert TNA_NAMES[tna][0] == BMV2_NAMES[bmv2_name][0]


@pytest.mark.parametrize(("bmv2_name", "tna"), list(mapped()))
def test_mapped_objects_take_the_same_keys_and_parameters(bmv2_name: str, tna: str) -> None:
    kind, ours = BMV2_NAMES[bmv2_name]
    theirs = TNA_NAMES[tna][1]
    if kind == "tables":
        assert [(f.name, f.bitwidth, f.match_type) for f in ours.match_fields] == [
            (f.name, f.bitwidth, f.match_type) for f in theirs.match_fields
        ]
        assert {tna_name(a) for a in action_names(BMV2_NAMES, ours)} == action_names(
            TNA_NAMES, theirs
        )
    elif kind == "actions":
        assert [(p.name, p.bitwidth) for p in ours.params] == [
            (p.name, p.bitwidth) for p in theirs.params
        ]
    elif kind == "counters":
        assert ours.spec.unit == theirs.spec.unit
        assert ours.size <= theirs.size
    elif kind == "controller_packet_metadata":
        assert [(m.name, m.bitwidth) for m in ours.metadata] == [
            (m.name, m.bitwidth) for m in theirs.metadata
        ]


def test_the_map_names_only_objects_that_exist() -> None:
    stale = [name for name in [*TNA_RENAMED, *TNA_ABSENT] if name not in BMV2_NAMES]
    assert not stale, f"p4src/name_map.py names objects mrc.p4 does not have: {stale}"
    missing = [tna for tna in TNA_RENAMED.values() if tna not in TNA_NAMES]
    assert not missing, f"p4src/name_map.py maps to objects the TNA program lacks: {missing}"
    assert not set(TNA_RENAMED) & set(TNA_ABSENT)


def test_absent_objects_are_really_absent_and_say_why() -> None:
    for name, reason in TNA_ABSENT.items():
        assert name not in TNA_NAMES, f"{name} is in the TNA program: drop it from TNA_ABSENT"
        assert reason
