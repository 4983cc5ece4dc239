"""Git operations on the source trees: which commit a tree holds, and exporting one commit.

Why exporting rather than cloning: a tree brought in by another tool may lack a few large
blobs (a snapshot that drops big files); a clone or checkout of it fails on the first missing
object. Reading the commit into a private index and checking out all but the absent files
works on such trees, writes nothing into them, and reports what it left out.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

#: Trees under P4_SRC may belong to another user; reading them is all that is done.
_GIT = ("git", "-c", "safe.directory=*")


class GitError(RuntimeError):
    pass


def _git_in(path: Path, *args: str) -> str:
    """``git -C path ARGS``: what it prints; ``GitError`` when it fails."""
    proc = subprocess.run([*_GIT, "-C", str(path), *args], capture_output=True, text=True)
    if proc.returncode != 0:
        raise GitError(f"git -C {path} {' '.join(args)}: {proc.stderr.strip()}")
    return proc.stdout


def _git(
    git_dir: Path | None, *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> str:
    argv = [*_GIT, *(("--git-dir", str(git_dir)) if git_dir else ()), *args]
    proc = subprocess.run(
        argv,
        capture_output=True,
        text=True,
        input=stdin,
        check=False,
        env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        raise GitError(f"{' '.join(argv)}: {proc.stderr.strip() or proc.stdout.strip()}")
    return proc.stdout


def git_dir_of(path: Path) -> Path | None:
    """The git directory of the repository whose root is ``path`` (a work tree, including a
    linked worktree or one with a separate git directory, or a bare repository); None when
    ``path`` is no repository's root (a plain folder, or a folder inside another tree)."""
    if not path.is_dir():
        return None
    try:
        bare = _git_in(path, "rev-parse", "--is-bare-repository").strip() == "true"
        git_dir = Path(_git_in(path, "rev-parse", "--absolute-git-dir").strip())
        root = git_dir if bare else Path(_git_in(path, "rev-parse", "--show-toplevel").strip())
    except GitError:
        return None
    return git_dir if root.resolve() == path.resolve() else None


def has_commit(git_dir: Path, commit: str) -> bool:
    try:
        _git(git_dir, "cat-file", "-e", f"{commit}^{{commit}}")
    except GitError:
        return False
    return True


def head(git_dir: Path) -> str:
    try:
        return _git(git_dir, "rev-parse", "HEAD").strip()
    except GitError:
        return "(no HEAD)"


def gitlink(git_dir: Path, commit: str, path: str) -> str | None:
    """The commit a tree pins a submodule at, or None when ``path`` is no submodule there."""
    out = _git(git_dir, "ls-tree", commit, "--", path).split()
    return out[2] if len(out) >= 3 and out[1] == "commit" else None


def missing_blobs(git_dir: Path, commit: str) -> list[str]:
    """Paths of files at ``commit`` whose content the repository does not hold."""
    entries = [
        line.split("\t", 1)
        for line in _git(git_dir, "ls-tree", "-r", "-z", commit).split("\0")
        if line and line.split(" ", 2)[1] == "blob"
    ]
    if not entries:
        return []
    shas = [meta.split()[2] for meta, _ in entries]
    answer = _git(git_dir, "cat-file", "--batch-check", stdin="\n".join(shas) + "\n")
    return [
        path
        for (_, path), line in zip(entries, answer.splitlines(), strict=True)
        if line.endswith(" missing")
    ]


def export_commit(git_dir: Path, commit: str, dest: Path) -> list[str]:
    """Write the files of ``commit`` into ``dest`` (not a repository); the paths left out."""
    absent = missing_blobs(git_dir, commit)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        env = {"GIT_INDEX_FILE": str(Path(scratch) / "index")}
        _git(git_dir, "read-tree", commit, env=env)
        if absent:
            _git(
                git_dir,
                "update-index",
                "--force-remove",
                "--stdin",
                env=env,
                stdin="\n".join(absent) + "\n",
            )
        # A work tree named explicitly: a bare clone (core.bare) refuses checkout-index without.
        _git(git_dir, "--work-tree", str(dest), "checkout-index", "--all", "--force", env=env)
    return absent


def clone_bare(url: str, dest: Path, commit: str) -> Path:
    """A bare clone of ``url`` at ``dest`` holding ``commit`` (fetched by id if need be)."""
    if git_dir_of(dest) is None:
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(parents=True, exist_ok=True)
        _git(None, "clone", "--bare", "--quiet", url, str(dest))
    if not has_commit(dest, commit):
        _git(dest, "fetch", "--quiet", "origin", commit)
    return dest
