"""A pinned commit is exported from a tree that lacks some of its files' content (as trees
brought in by a snapshot tool can), and the files left out are reported."""

from __future__ import annotations

import subprocess

from tests.unit.tools.toolchain.conftest import git, make_repo
from tools.toolchain import git_trees


def drop_blob(repo, path: str) -> None:
    blob = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", f"HEAD:{path}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    (repo / ".git" / "objects" / blob[:2] / blob[2:]).unlink()


def test_export_writes_the_commits_files_and_leaves_out_absent_blobs(tmp_path):
    repo = tmp_path / "repo"
    commit = make_repo(repo, {"src/a.c": "a\n", "docs/big.pptx": "big\n", "README": "r\n"})
    drop_blob(repo, "docs/big.pptx")
    git_dir = git_trees.git_dir_of(repo)
    assert git_dir is not None
    assert git_trees.missing_blobs(git_dir, commit) == ["docs/big.pptx"]
    absent = git_trees.export_commit(git_dir, commit, tmp_path / "out")
    assert absent == ["docs/big.pptx"]
    assert (tmp_path / "out" / "src" / "a.c").read_text() == "a\n"
    assert not (tmp_path / "out" / "docs" / "big.pptx").exists()
    assert not (tmp_path / "out" / ".git").exists()


def test_a_folder_inside_another_repository_is_not_a_tree_of_its_own(tmp_path):
    repo = tmp_path / "repo"
    make_repo(repo, {"sub/x": "x\n"})
    assert git_trees.git_dir_of(repo) == repo / ".git"
    assert git_trees.git_dir_of(repo / "sub") is None
    assert git_trees.git_dir_of(tmp_path / "absent") is None


def test_a_linked_worktree_a_separate_git_dir_and_a_bare_clone_are_trees_of_their_own(tmp_path):
    repo = tmp_path / "repo"
    commit = make_repo(repo, {"a": "a\n"})
    git(repo, "worktree", "add", "-q", "--detach", str(tmp_path / "linked"), commit)
    git(tmp_path, "clone", "-q", "--separate-git-dir", str(tmp_path / "sep.git"), str(repo), "sep")
    git(tmp_path, "clone", "-q", "--bare", str(repo), "bare.git")
    for tree in ("linked", "sep", "bare.git"):
        git_dir = git_trees.git_dir_of(tmp_path / tree)
        assert git_dir is not None, tree
        assert git_trees.has_commit(git_dir, commit), tree
        git_trees.export_commit(git_dir, commit, tmp_path / "out" / tree)
        assert (tmp_path / "out" / tree / "a").read_text() == "a\n", tree
    assert git_trees.git_dir_of(tmp_path / "bare.git" / "refs") is None
