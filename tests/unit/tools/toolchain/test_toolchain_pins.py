"""The pin file parses, names real trees at full commits, and a malformed one is refused with
the key that is wrong."""

from __future__ import annotations

import copy

import pytest

from tools.toolchain.pins import PinError, load_pins, parse_pins
from tools.toolchain.recipes import Context, recipe_id, steps

GOOD = {
    "sources": {"a": {"url": "u", "commit": "a" * 40, "ref": "r", "folder": "a"}},
    "components": {"c": {"sources": ["a"], "provides": ["bin/c"]}},
}


def test_the_committed_pin_file_parses_with_pi_bmv2_and_p4c_in_build_order():
    pins = load_pins()
    assert [c.name for c in pins.components] == ["pi", "bmv2", "p4c"]
    assert pins.component("bmv2").needs == ("pi",)
    assert "bin/simple_switch_grpc" in pins.component("bmv2").provides
    assert "bin/p4c-barefoot" in pins.component("p4c").provides_for(tofino=True)
    assert "bin/p4c-barefoot" not in pins.component("p4c").provides_for(tofino=False)


def test_the_committed_pins_name_p4cs_fetchcontent_trees_and_pis_submodules():
    pins = load_pins()
    assert set(pins.component("p4c").sources_for(tofino=True)) >= {
        "p4c",
        "abseil-cpp",
        "protobuf",
        "p4runtime",
        "z3",
        "spdlog",
    }
    assert {sub for _, sub in pins.sources["PI"].submodules} >= {"p4runtime", "googletest"}
    for source in pins.sources.values():
        assert len(source.commit) == 40
        assert source.url.startswith("https://")


def test_every_component_has_a_recipe_whose_id_changes_with_the_tofino_backend(tmp_path):
    pins = load_pins()
    for component in pins.components:
        assert recipe_id(component, tofino=False).startswith(component.name)
        for tofino in (False, True):
            ctx = Context(prefix=tmp_path / "prefix", work=tmp_path / "work", jobs=2, tofino=tofino)
            names = [step.name for step in steps(component, ctx)]
            assert "install" in names, (component.name, names)
    p4c = pins.component("p4c")
    assert recipe_id(p4c, tofino=True) != recipe_id(p4c, tofino=False)


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d["sources"]["a"].update(commit="abc123"), "sources.a: commit must be 40"),
        (lambda d: d["sources"]["a"].update(folder="x/y"), "sources.a: folder"),
        (lambda d: d["sources"]["a"].pop("url"), "sources.a: url"),
        (lambda d: d["sources"]["a"].update(colour="red"), "sources.a: unknown key"),
        (lambda d: d["components"]["c"].update(sources=["b"]), "components.c: unknown source 'b'"),
        (lambda d: d["components"]["c"].update(needs=["z"]), "components.c: needs 'z'"),
        (lambda d: d["components"]["c"].update(provides=[]), "components.c: sources and provides"),
        (lambda d: d["sources"]["a"].update(submodules={"p": "nope"}), "unknown 'nope'"),
        (lambda d: d.update(extra=1), "unknown top-level"),
    ],
)
def test_a_malformed_pin_file_is_refused_naming_the_key(edit, message):
    data = copy.deepcopy(GOOD)
    edit(data)
    with pytest.raises(PinError, match=message.replace("(", r"\(")):
        parse_pins(data, "pins.toml")


def test_a_well_formed_pin_file_parses():
    assert parse_pins(copy.deepcopy(GOOD)).sources["a"].folder == "a"
