"""A build resumes: a step that succeeded is not run again, a failing step names itself, its
log and its last lines, and `make toolchain` with everything installed does nothing."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from tests.unit.tools.toolchain.conftest import add_commit, install, pin_data, recipes, stamp_all
from tools.toolchain import __main__ as toolchain_main
from tools.toolchain.pins import load_pins, parse_pins
from tools.toolchain.plan import Action, Request, make_plan
from tools.toolchain.recipes import Context, Step, recipe_id
from tools.toolchain.runner import Runner, StepFailed, progress_hint, stop_process_group


def runner_for(trees, tmp_path: Path) -> tuple[Runner, io.StringIO]:
    pins = parse_pins(pin_data(trees))
    req = Request(tmp_path / "prefix", trees["src"], False, tmp_path / "work")
    out = io.StringIO()
    ctx = Context(prefix=req.prefix, work=req.work, jobs=1, tofino=False)
    return Runner(pins, make_plan(pins, req, recipes), ctx, out), out


def test_a_step_that_finished_is_skipped_on_the_next_run(trees, tmp_path):
    runner, out = runner_for(trees, tmp_path)
    counter = tmp_path / "count"
    step = Step(
        "configure",
        ("sh", "-c", f"echo run >> {counter}"),
        tmp_path,
        done_file=tmp_path / ".configured",
        done_text="--flag",
    )
    runner.step("base", step)
    runner.step("base", step)
    assert counter.read_text() == "run\n"
    assert "base: configure: done already" in out.getvalue()
    changed = Step(step.name, step.argv, step.cwd, done_file=step.done_file, done_text="--other")
    runner.step("base", changed)
    assert counter.read_text() == "run\nrun\n"


def test_a_failing_step_names_itself_and_its_log_which_holds_the_output(trees, tmp_path):
    runner, _ = runner_for(trees, tmp_path)
    step = Step("build", ("sh", "-c", "echo compiling x.c; echo 'x.c:1: error' >&2; exit 3"))
    with pytest.raises(StepFailed) as failed:
        runner.step("base", step)
    assert str(failed.value).startswith("base: build failed (exit 3); log: ")
    assert failed.value.log.name == "base-build.log"
    assert "x.c:1: error" in failed.value.log.read_text()


def test_a_tree_is_staged_with_its_submodule_once(trees, tmp_path):
    runner, out = runner_for(trees, tmp_path)
    runner.stage("base", "top")
    tree = runner.ctx.src("top")
    assert (tree / "top.c").read_text() == "int main;\n"
    assert (tree / "lib" / "sub" / "sub.h").read_text() == "int sub;\n"
    (tree / "top.c").write_text("edited by a build\n")
    runner.stage("base", "top")
    assert (tree / "top.c").read_text() == "edited by a build\n"  # not staged again
    assert out.getvalue().count("staging top") == 1


def test_make_toolchain_names_missing_trees_and_builds_nothing(tmp_path, capsys):
    handler = signal.getsignal(signal.SIGTERM)
    rc = toolchain_main.main(
        [
            "--no-apt",
            "--src",
            str(tmp_path),
            "--prefix",
            str(tmp_path / "prefix"),
            "--work",
            str(tmp_path / "work"),
        ]
    )
    assert rc == 2
    err = capsys.readouterr().err
    assert "nothing was built" in err
    for folder in ("PI", "behavioral-model", "p4c", "abseil-cpp", "protobuf", "p4runtime"):
        assert f"no {tmp_path / folder} " in err
    assert not (tmp_path / "work").exists()
    assert signal.getsignal(signal.SIGTERM) is handler


def test_make_toolchain_with_everything_installed_does_nothing(tmp_path, capsys):
    pins = load_pins()
    prefix = tmp_path / "prefix"
    for component in pins.components:
        install(prefix, list(component.provides))
    stamp_all(pins, Request(prefix, None, False, tmp_path / "work"), recipe_id)
    rc = toolchain_main.main(["--prefix", str(prefix), "--work", str(tmp_path / "work")])
    assert rc == 0
    assert "nothing to do" in capsys.readouterr().out


def test_a_long_steps_heartbeat_names_the_count_and_the_file_being_compiled():
    assert progress_hint(
        "[312/1504] Building CXX object frontends/p4/CMakeFiles/x.dir/a.cpp.o"
    ) == ("[312/1504] compiling a.cpp")
    libtool = "libtool: compile:  ccache g++ -std=c++17 -I. -c pi_server.cpp -fPIC -o x.o"
    assert progress_hint(libtool) == "compiling pi_server.cpp"
    assert progress_hint("checking for gcc... gcc") == "checking for gcc... gcc"


def test_an_interrupted_step_stops_its_whole_process_group_not_only_make(tmp_path):
    pidfile = tmp_path / "grandchild"
    proc = subprocess.Popen(
        ["sh", "-c", f"sleep 300 & echo $! > {pidfile}; wait"], start_new_session=True
    )
    for _ in range(100):
        if pidfile.exists() and pidfile.read_text().strip():
            break
        time.sleep(0.05)
    grandchild = int(pidfile.read_text())
    stop_process_group(proc)
    assert proc.returncode is not None
    assert not _running(grandchild)


def _running(pid: int) -> bool:
    """Alive and not a zombie (an orphan waits for init to reap it)."""
    for _ in range(50):
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except FileNotFoundError:
            return False
        if state == "Z":
            return False
        time.sleep(0.02)
    return True


def test_a_second_run_on_the_same_work_folder_is_refused_while_one_builds(tmp_path):
    with toolchain_main._exclusive(tmp_path / "work") as first:
        assert first is None
        with toolchain_main._exclusive(tmp_path / "work") as second:
            assert second == f"pid {os.getpid()}"
    with toolchain_main._exclusive(tmp_path / "work") as again:
        assert again is None


def test_a_rebuild_that_stops_halfway_leaves_what_needs_it_to_be_rebuilt(
    trees, tmp_path, monkeypatch
):
    pins = parse_pins(pin_data(trees))
    req = Request(tmp_path / "prefix", trees["src"], False, tmp_path / "work")
    install(req.prefix, ["lib/libbase.so", "bin/app"])
    stamp_all(pins, req)
    newer = add_commit(trees["src"] / "top", "more.c", "int more;\n")
    pins = parse_pins(pin_data(trees, top=newer))
    plan = make_plan(pins, req, recipes)
    ctx = Context(prefix=req.prefix, work=req.work, jobs=1, tofino=False)
    runner = Runner(pins, plan, ctx, io.StringIO())
    failing = [Step("build", ("sh", "-c", "exit 2"))]
    monkeypatch.setattr("tools.toolchain.runner.steps", lambda component, ctx: failing)
    with pytest.raises(StepFailed):
        runner.run()
    again = make_plan(pins, req, recipes)
    assert [c.action for c in again.components] == [Action.BUILD, Action.BUILD]


def test_a_cloned_tree_whose_submodule_differs_from_the_pins_is_refused_at_staging(trees, tmp_path):
    data = pin_data(trees, sub="e" * 40)
    for name in ("top", "sub", "tool"):
        data["sources"][name]["url"] = str(trees["src"] / name)
    pins = parse_pins(data)
    req = Request(tmp_path / "prefix", None, False, tmp_path / "work")
    plan = make_plan(pins, req, recipes)
    assert plan.problems == []  # a tree to clone cannot be looked into before it is cloned
    runner = Runner(pins, plan, Context(req.prefix, req.work, 1, False), io.StringIO())
    with pytest.raises(StepFailed, match=r"records lib/sub at .*pins.toml gives sub eeeeeeeeeeee"):
        runner.stage("base", "top")


def test_a_rebuild_without_the_tofino_backend_leaves_no_old_tofino_compiler(
    trees, tmp_path, monkeypatch
):
    pins = parse_pins(pin_data(trees))
    req = Request(tmp_path / "prefix", trees["src"], False, tmp_path / "work")
    install(req.prefix, ["lib/libbase.so", "bin/app-tf"])
    plan = make_plan(pins, req, recipes)
    runner = Runner(pins, plan, Context(req.prefix, req.work, 1, False), io.StringIO())
    monkeypatch.setattr(
        "tools.toolchain.runner.steps", lambda component, ctx: [Step("build", ("true",))]
    )
    runner.run()
    assert not (req.prefix / "bin/app-tf").exists()
    assert "removed" in runner.out.getvalue()
