"""A tree's identity is its commit, and with local changes (to tracked files, or untracked
files not ignored) a digest of them too: two trees compare equal only when they run the same
code (``+dirty`` alone would make two differently changed trees equal)."""

from __future__ import annotations

import subprocess
from pathlib import Path

from experiments.cluster.tree import tree_identity


def _git(repo: Path, *args: str) -> str:
    command = ["git", "-c", "user.name=test", "-c", "user.email=test@invalid", *args]
    return subprocess.run(command, cwd=repo, capture_output=True, text=True, check=True).stdout


def test_a_clean_tree_is_its_commit_and_a_changed_one_its_commit_and_its_changes(
    tmp_path: Path,
) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    _git(tmp_path, "add", "code.py")
    _git(tmp_path, "commit", "-qm", "one")
    commit = _git(tmp_path, "rev-parse", "HEAD").strip()
    assert tree_identity(tmp_path) == commit
    (tmp_path / "code.py").write_text("x = 2\n")
    changed = tree_identity(tmp_path)
    assert changed.startswith(f"{commit}+dirty:") and len(changed) == len(commit) + 19
    (tmp_path / "code.py").write_text("x = 3\n")
    assert tree_identity(tmp_path) not in (commit, changed)
    (tmp_path / "code.py").write_text("x = 1\n")
    assert tree_identity(tmp_path) == commit


def test_an_untracked_file_not_ignored_changes_the_identity_by_its_content(
    tmp_path: Path,
) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / ".gitignore").write_text("results/\n")
    _git(tmp_path, "add", ".gitignore")
    _git(tmp_path, "commit", "-qm", "one")
    commit = _git(tmp_path, "rev-parse", "HEAD").strip()
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "run.json").write_text("{}")  # ignored: not code
    assert tree_identity(tmp_path) == commit
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "new.py").write_text("x = 1\n")  # a module Python would import
    one = tree_identity(tmp_path)
    assert one.startswith(f"{commit}+dirty:")
    (tmp_path / "pkg" / "new.py").write_text("x = 2\n")
    assert tree_identity(tmp_path) not in (commit, one)


def test_outside_a_git_tree_the_identity_is_unknown(tmp_path: Path) -> None:
    assert tree_identity(tmp_path) == "unknown"
