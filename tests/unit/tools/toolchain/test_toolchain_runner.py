"""A build resumes: a step that succeeded is not run again, a failing step names itself, its
log and its last lines, and `make toolchain` with everything installed does nothing."""

from __future__ import annotations

import io
import json
import subprocess
import time
from pathlib import Path

import pytest

from tests.unit.tools.toolchain.conftest import pin_data
from tools.toolchain import __main__ as toolchain_main
from tools.toolchain.pins import load_pins, parse_pins
from tools.toolchain.plan import Request, make_plan, stamp_content, stamp_path
from tools.toolchain.recipes import Context, Step, recipe_id
from tools.toolchain.runner import Runner, StepFailed, progress_hint, stop_process_group

RECIPES = {"base": "base-r1", "app": "app-r1"}


def recipes(component, tofino: bool) -> str:
    return RECIPES[component.name] + ("-tofino" if tofino else "")


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
    rc = toolchain_main.main(
        [
            "--plan",
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


def test_make_toolchain_with_everything_installed_does_nothing(tmp_path, capsys):
    pins = load_pins()
    prefix = tmp_path / "prefix"
    for component in pins.components:
        for name in component.provides:
            (prefix / name).parent.mkdir(parents=True, exist_ok=True)
            (prefix / name).write_text("")
    req = Request(prefix, None, False, tmp_path / "work")
    for planned in make_plan(pins, req, recipe_id).components:
        stamp = stamp_path(prefix, planned.component.name)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(stamp_content(pins, planned, False)))
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
