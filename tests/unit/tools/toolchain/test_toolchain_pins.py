"""The pin file parses, names real trees at full commits, and a malformed one is refused with
the key that is wrong."""

from __future__ import annotations

import copy
import os

import pytest

from tools.toolchain import recipes
from tools.toolchain.pins import PinError, load_pins, parse_pins
from tools.toolchain.recipes import Context, recipe_id, steps

GOOD = {
    "sources": {"a": {"url": "u", "commit": "a" * 40, "ref": "r", "folder": "a"}},
    "components": {"c": {"sources": ["a"], "provides": ["bin/c"]}},
}


def test_the_committed_pin_file_parses_with_pi_bmv2_the_pi_server_and_p4c_in_build_order():
    pins = load_pins()
    assert [c.name for c in pins.components] == ["pi", "bmv2", "pi_server", "p4c"]
    assert pins.component("bmv2").needs == ("pi",)
    assert pins.component("pi_server").needs == ("pi",)
    assert pins.component("pi_server").provides == ("bin/mrc_pi_server",)
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


def test_the_pi_servers_recipe_changes_with_its_sources_and_exports_its_target_functions(
    tmp_path, monkeypatch
):
    """A change to tools/pi_server/ rebuilds the server; -rdynamic lets libpi bind to the
    program's table and profile functions ahead of the dummy target's."""
    component = load_pins().component("pi_server")
    before = recipe_id(component, tofino=False)
    copy = tmp_path / "pi_server"
    copy.mkdir()
    for source in recipes.PI_SERVER_DIR.iterdir():
        (copy / source.name).write_bytes(source.read_bytes())
    monkeypatch.setattr(recipes, "PI_SERVER_DIR", copy)
    assert recipe_id(component, tofino=False) == before
    (copy / "wire.c").write_text((copy / "wire.c").read_text() + "\n/* changed */\n")
    assert recipe_id(component, tofino=False) != before
    ctx = Context(prefix=tmp_path / "prefix", work=tmp_path / "work", jobs=2, tofino=False)
    by_name = {step.name: step.argv for step in steps(component, ctx)}
    assert {f"compile-{name}" for name in recipes.PI_SERVER_SOURCES} <= set(by_name)
    assert all("-Werror" in by_name[f"compile-{n}"] for n in recipes.PI_SERVER_SOURCES)
    assert "-rdynamic" in by_name["link"] and "-lpi_dummy" in by_name["link"]


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


def test_p4cs_tofino_build_finds_its_python_tools_in_its_own_venv(tmp_path):
    """The Tofino backend's ninja rules call pyinstaller by name: without the venv on PATH the
    build stopped at step 411 of 1060 ('pyinstaller: not found')."""
    p4c = load_pins().component("p4c")
    ctx = Context(prefix=tmp_path / "prefix", work=tmp_path / "work", jobs=2, tofino=True)
    by_name = {step.name: step for step in steps(p4c, ctx)}
    for name in ("configure", "build"):
        first = by_name[name].env["PATH"].split(os.pathsep)[0]
        assert first == str(ctx.tofino_venv / "bin"), name
    plain = Context(prefix=tmp_path / "prefix", work=tmp_path / "work", jobs=2, tofino=False)
    assert all("PATH" not in step.env for step in steps(p4c, plain))
