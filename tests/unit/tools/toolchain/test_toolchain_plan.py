"""`make toolchain` decides, before building anything, what to keep, what to build and why,
and names every source tree that is missing or at the wrong commit."""

from __future__ import annotations

import shutil
from pathlib import Path

from tests.unit.tools.toolchain.conftest import add_commit, install, pin_data, recipes, stamp_all
from tools.toolchain.pins import parse_pins
from tools.toolchain.plan import (
    Action,
    Request,
    SourceStatus,
    make_plan,
    stamp_path,
    unknown_components,
)


def request(
    tmp_path: Path, src: Path | None, tofino: bool = False, only: frozenset[str] | None = None
) -> Request:
    return Request(
        prefix=tmp_path / "prefix", p4_src=src, tofino=tofino, work=tmp_path / "work", only=only
    )


def test_nothing_installed_builds_everything_from_trees_at_their_pinned_commits(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    plan = make_plan(pins, request(tmp_path, trees["src"]), recipes)
    assert [(c.component.name, c.action) for c in plan.components] == [
        ("base", Action.BUILD),
        ("app", Action.BUILD),
    ]
    assert "not installed" in plan.components[0].reason
    assert {s.source.name: s.status for s in plan.sources} == {
        "top": SourceStatus.OK,
        "sub": SourceStatus.OK,
        "tool": SourceStatus.OK,
    }
    assert plan.problems == []


def test_a_missing_tree_is_named_with_where_it_was_looked_for_and_where_it_comes_from(
    trees, tmp_path
):
    pins = parse_pins(pin_data(trees))
    shutil.rmtree(trees["src"] / "tool")
    plan = make_plan(pins, request(tmp_path, trees["src"]), recipes)
    assert len(plan.problems) == 1
    assert plan.problems[0].startswith("tool: missing: no ")
    assert str(trees["src"] / "tool") in plan.problems[0]
    assert "https://example.invalid/tool" in plan.problems[0]


def test_a_tree_without_the_pinned_commit_is_wrong_and_its_head_is_named(trees, tmp_path):
    pins = parse_pins(pin_data(trees, tool="f" * 40))
    plan = make_plan(pins, request(tmp_path, trees["src"]), recipes)
    (problem,) = plan.problems
    assert problem.startswith("tool: wrong: ")
    assert "does not hold the pinned commit" in problem
    assert trees["tool"][:12] in problem  # its HEAD


def test_a_tree_whose_head_moved_on_still_serves_its_pinned_commit(trees, tmp_path):
    add_commit(trees["src"] / "tool", "NEWS", "later\n")
    plan = make_plan(parse_pins(pin_data(trees)), request(tmp_path, trees["src"]), recipes)
    assert plan.problems == []
    assert "HEAD is" in plan.source("tool").detail


def test_a_folder_that_is_no_git_tree_is_wrong(trees, tmp_path):
    shutil.rmtree(trees["src"] / "tool" / ".git")
    plan = make_plan(parse_pins(pin_data(trees)), request(tmp_path, trees["src"]), recipes)
    assert plan.problems == [
        f"tool: wrong: {trees['src'] / 'tool'} is not a git tree; its commit cannot be checked"
    ]


def test_a_submodule_pinned_at_another_commit_than_its_parent_records_is_wrong(trees, tmp_path):
    newer = add_commit(trees["src"] / "sub", "more.h", "int more;\n")
    plan = make_plan(
        parse_pins(pin_data(trees, sub=newer)), request(tmp_path, trees["src"]), recipes
    )
    (problem,) = plan.problems
    assert problem.startswith("sub: wrong: top ")
    assert f"lib/sub at {trees['sub'][:12]}" in problem


def test_installed_at_the_pinned_commits_is_kept_and_needs_no_source_at_all(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    req = request(tmp_path, tmp_path / "no-such-folder")
    install(req.prefix, ["lib/libbase.so", "bin/app"])
    stamp_all(pins, req)
    plan = make_plan(pins, req, recipes)
    assert [c.action for c in plan.components] == [Action.KEEP, Action.KEEP]
    assert plan.sources == () and plan.problems == []


def test_a_stamp_of_another_commit_rebuilds_it_and_what_needs_it(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    req = request(tmp_path, trees["src"])
    install(req.prefix, ["lib/libbase.so", "bin/app"])
    stamp_all(pins, req)
    newer = add_commit(trees["src"] / "top", "more.c", "int more;\n")
    plan = make_plan(parse_pins(pin_data(trees, top=newer)), req, recipes)
    base, app = plan.components
    assert base.action is Action.BUILD
    assert base.reason == f"installed from top {trees['top'][:7]}, pinned {newer[:7]}"
    assert (app.action, app.reason) == (Action.BUILD, "rebuilt because base is")


def test_other_build_flags_rebuild(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    req = request(tmp_path, trees["src"])
    install(req.prefix, ["lib/libbase.so", "bin/app"])
    stamp_all(pins, req)
    plan = make_plan(pins, req, lambda c, t: recipes(c, t).replace("app-r1", "app-r2"))
    assert [c.action for c in plan.components] == [Action.KEEP, Action.BUILD]
    assert plan.components[1].reason == "installed with other build flags"


def test_a_tool_installed_by_hand_is_kept_when_its_version_names_the_pinned_commit(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    req = request(tmp_path, trees["src"])
    install(req.prefix, ["lib/libbase.so"])
    stamp_all(pins, req)
    stamp_path(req.prefix, "app").unlink()
    app = req.prefix / "bin/app"
    app.parent.mkdir(parents=True, exist_ok=True)
    app.write_text(f"#!/bin/sh\necho 'app 1.2.3-{trees['tool'][:8]}'\n")
    app.chmod(0o755)
    assert make_plan(pins, req, recipes).components[1].action is Action.KEEP
    app.write_text("#!/bin/sh\necho 'app 0.9'\n")
    plan = make_plan(pins, req, recipes)
    assert plan.components[1].action is Action.BUILD
    assert "'app 0.9'" in plan.components[1].reason


def test_the_tofino_backend_is_built_when_asked_for_and_absent(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    req = request(tmp_path, trees["src"])
    install(req.prefix, ["lib/libbase.so", "bin/app"])
    stamp_all(pins, req)
    tofino = request(tmp_path, trees["src"], tofino=True)
    plan = make_plan(pins, tofino, recipes)
    assert plan.components[1].action is Action.BUILD
    assert "app-tf" in plan.components[1].reason
    install(req.prefix, ["bin/app-tf"])
    assert make_plan(pins, tofino, recipes).components[1].reason == (
        "installed without the Tofino backend"
    )


def test_without_p4_src_trees_are_cloned_or_taken_from_the_kept_clones(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    req = request(tmp_path, None)
    plan = make_plan(pins, req, recipes)
    assert {s.status for s in plan.sources} == {SourceStatus.CLONE}
    assert plan.problems == []
    kept = req.work / "git" / "tool"
    shutil.copytree(trees["src"] / "tool", kept)
    plan = make_plan(pins, req, recipes)
    assert plan.source("tool").status is SourceStatus.OK


def test_a_build_with_the_tofino_backend_is_kept_by_a_later_run_without_it(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    tofino = request(tmp_path, trees["src"], tofino=True)
    install(tofino.prefix, ["lib/libbase.so", "bin/app", "bin/app-tf"])
    stamp_all(pins, tofino)
    plain = request(tmp_path, trees["src"])
    plan = make_plan(pins, plain, recipes)
    assert [c.action for c in plan.components] == [Action.KEEP, Action.KEEP]
    assert plan.components[1].reason.endswith("with the Tofino backend")


def test_only_builds_the_components_named_and_what_they_need_and_asks_for_no_other_tree(
    trees, tmp_path
):
    pins = parse_pins(pin_data(trees))
    shutil.rmtree(trees["src"] / "tool")  # only app needs it
    plan = make_plan(pins, request(tmp_path, trees["src"], only=frozenset({"base"})), recipes)
    assert [(c.component.name, c.action) for c in plan.components] == [
        ("base", Action.BUILD),
        ("app", Action.SKIP),
    ]
    assert plan.problems == []
    assert {s.source.name for s in plan.sources} == {"top", "sub"}


def test_only_a_component_brings_what_it_needs(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    plan = make_plan(pins, request(tmp_path, trees["src"], only=frozenset({"app"})), recipes)
    assert [c.component.name for c in plan.to_build] == ["base", "app"]


def test_only_names_that_are_no_component_are_reported(trees):
    pins = parse_pins(pin_data(trees))
    assert unknown_components(pins, frozenset({"app", "p4c", "bmv3"})) == ["bmv3", "p4c"]


def test_only_still_rebuilds_an_installed_component_whose_dependency_it_rebuilds(trees, tmp_path):
    pins = parse_pins(pin_data(trees))
    install(tmp_path / "prefix", ["bin/app"])  # app installed, base not: base is built
    plan = make_plan(pins, request(tmp_path, trees["src"], only=frozenset({"base"})), recipes)
    app = plan.components[1]
    assert app.action is Action.BUILD and "rebuilt because base is" in app.reason
