"""The mypyc-compiled agent runs only when built from exactly the sources in the tree, for this
interpreter, and all of it or none: otherwise the pure-Python modules run, with a warning that
says what changed. MRC_AGENT_PURE_PYTHON asks for the pure-Python modules outright."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib.machinery import ExtensionFileLoader
from pathlib import Path

import pytest

from agent import native
from agent.native import (
    MANIFEST_NAME,
    NativeFinder,
    NativeState,
    NativeStatus,
    activate,
    check,
    interpreter_tag,
    source_digests,
)

REPO = Path(__file__).resolve().parents[3]


def _tree(tmp_path: Path) -> tuple[Path, Path]:
    """A two-module agent tree and a native build of it, fresh."""
    agent_dir = tmp_path / "agent"
    (agent_dir / "core").mkdir(parents=True)
    (agent_dir / "__init__.py").write_text('"""agent"""\n')
    (agent_dir / "core" / "sender.py").write_text("X = 1\n")
    native_dir = tmp_path / "native"
    (native_dir / "agent" / "core").mkdir(parents=True)
    extension = native_dir / "agent" / "core" / "sender.so"
    extension.write_bytes(b"\x7fELF")
    manifest = {
        "interpreter": interpreter_tag(),
        "files": {"agent.core.sender": "agent/core/sender.so"},
        "sources": source_digests(agent_dir),
    }
    (native_dir / MANIFEST_NAME).write_text(json.dumps(manifest))
    return agent_dir, native_dir


def test_a_build_of_exactly_these_sources_runs(tmp_path):
    agent_dir, native_dir = _tree(tmp_path)
    status = check(native_dir, agent_dir, environ={})
    assert status.state is NativeState.ACTIVE
    assert status.files == {"agent.core.sender": native_dir / "agent/core/sender.so"}


def test_an_edited_source_makes_the_build_stale_and_is_named(tmp_path):
    agent_dir, native_dir = _tree(tmp_path)
    (agent_dir / "core" / "sender.py").write_text("X = 2\n")
    status = check(native_dir, agent_dir, environ={})
    assert status.state is NativeState.STALE
    assert "agent/core/sender.py" in status.detail
    assert status.files == {}


def test_an_edit_to_a_module_that_is_not_compiled_still_counts(tmp_path):
    # The compiled code may have inlined its constants.
    agent_dir, native_dir = _tree(tmp_path)
    (agent_dir / "__init__.py").write_text('"""agent, edited"""\n')
    assert check(native_dir, agent_dir, environ={}).state is NativeState.STALE


def test_an_edit_to_the_compiled_module_outside_the_agent_counts(tmp_path):
    # wire.entropy is compiled with the agent: its per-packet path calls it.
    (tmp_path / "wire").mkdir()
    (tmp_path / "wire" / "entropy.py").write_text("X = 1\n")
    agent_dir, native_dir = _tree(tmp_path)
    assert check(native_dir, agent_dir, environ={}).state is NativeState.ACTIVE
    (tmp_path / "wire" / "entropy.py").write_text("X = 2\n")
    status = check(native_dir, agent_dir, environ={})
    assert status.state is NativeState.STALE
    assert "wire/entropy.py" in status.detail


def test_an_added_or_removed_source_makes_the_build_stale(tmp_path):
    agent_dir, native_dir = _tree(tmp_path)
    (agent_dir / "core" / "new.py").write_text("")
    assert "agent/core/new.py" in check(native_dir, agent_dir, environ={}).detail
    (agent_dir / "core" / "new.py").unlink()
    (agent_dir / "core" / "sender.py").unlink()
    assert check(native_dir, agent_dir, environ={}).state is NativeState.STALE


def test_a_build_for_another_interpreter_is_stale(tmp_path):
    agent_dir, native_dir = _tree(tmp_path)
    manifest = json.loads((native_dir / MANIFEST_NAME).read_text())
    manifest["interpreter"] = "cpython-310.cpython-310-x86_64-linux-gnu.so"
    (native_dir / MANIFEST_NAME).write_text(json.dumps(manifest))
    status = check(native_dir, agent_dir, environ={})
    assert status.state is NativeState.STALE
    assert "cpython-310" in status.detail


def test_a_missing_extension_or_a_broken_manifest_is_stale(tmp_path):
    agent_dir, native_dir = _tree(tmp_path)
    (native_dir / "agent" / "core" / "sender.so").unlink()
    assert "missing" in check(native_dir, agent_dir, environ={}).detail
    (native_dir / MANIFEST_NAME).write_text("{not json")
    status = check(native_dir, agent_dir, environ={})
    assert status.state is NativeState.STALE
    assert "unreadable manifest" in status.detail


def test_no_build_is_absent_and_the_environment_can_ask_for_pure_python(tmp_path):
    agent_dir, native_dir = _tree(tmp_path)
    assert check(tmp_path / "nowhere", agent_dir, environ={}).state is NativeState.ABSENT
    pure = check(native_dir, agent_dir, environ={"MRC_AGENT_PURE_PYTHON": "1"})
    assert pure.state is NativeState.REQUESTED_PURE
    assert check(native_dir, agent_dir, environ={"MRC_AGENT_PURE_PYTHON": "0"}).state is (
        NativeState.ACTIVE
    )


def test_the_finder_claims_only_the_modules_of_the_build(tmp_path):
    extension = tmp_path / "sender.so"
    finder = NativeFinder({"agent.core.sender": extension})
    spec = finder.find_spec("agent.core.sender")
    assert spec is not None
    assert isinstance(spec.loader, ExtensionFileLoader)
    assert spec.origin == str(extension)
    assert finder.find_spec("agent.core.receiver") is None


def test_a_stale_build_warns_and_changes_no_import():
    meta_path = list(sys.meta_path)
    stale = NativeStatus(NativeState.STALE, "changed since the build: agent/core/sender.py")
    with pytest.warns(RuntimeWarning, match=r"stale .*agent/core/sender.py.*make native"):
        activate(stale)
    assert sys.meta_path == meta_path


def test_an_active_build_goes_first_on_the_import_path(monkeypatch, tmp_path):
    monkeypatch.setattr(sys, "meta_path", list(sys.meta_path))
    activate(NativeStatus(NativeState.ACTIVE, "", {"x.y": tmp_path / "y.so"}))
    assert isinstance(sys.meta_path[0], NativeFinder)


def _import_in_subprocess(environ: dict[str, str]) -> list[str]:
    code = (
        "import agent.core.sender as s, agent.io.runtime as r, agent.native as n; "
        "print(s.__file__); print(r.__file__); print(n.running_build())"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        cwd=REPO,
        env={**os.environ, **environ},
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.splitlines()


def test_the_real_build_when_fresh_runs_compiled_and_the_environment_turns_it_off():
    if check(environ={}).state is not NativeState.ACTIVE:
        pytest.skip(f"no fresh native build ({check(environ={}).detail}): make native")
    sender, runtime, label = _import_in_subprocess({"MRC_AGENT_PURE_PYTHON": ""})
    assert sender.startswith(str(native.NATIVE_DIR)) and sender.endswith(".so")
    assert runtime.startswith(str(native.NATIVE_DIR))
    assert label == "native"
    sender, runtime, label = _import_in_subprocess({"MRC_AGENT_PURE_PYTHON": "1"})
    assert sender == str(REPO / "agent" / "core" / "sender.py")
    assert label.startswith("pure-python")
