"""Which commit a tree is at, precisely enough that two trees compare equal only when they
run the same code: the commit, and with local changes a digest of them (``+dirty`` alone
would make two differently changed trees look the same). Local changes are those of
``git status --untracked-files=all``: changes to tracked files (their diff) and untracked
files that are not ignored (their paths and contents), since Python imports a new module as
readily as a changed one."""

from __future__ import annotations

import contextlib
import hashlib
import subprocess
from pathlib import Path

from experiments.results import REPO


def tree_identity(repo: Path = REPO) -> str:
    """``<commit>``, or ``<commit>+dirty:<12 hex digits of the changes>`` with local changes;
    ``unknown`` outside a git tree."""
    commit = _git(repo, "rev-parse", "HEAD")
    if commit is None:
        return "unknown"
    diff = _git(repo, "diff", "HEAD", "--no-ext-diff", "--binary") or ""
    status = _git(repo, "status", "--porcelain=v1", "-z", "--untracked-files=all") or ""
    untracked = sorted(entry[3:] for entry in status.split("\0") if entry.startswith("?? "))
    if not diff and not untracked:
        return commit
    digest = hashlib.sha256(diff.encode())
    for name in untracked:
        digest.update(b"\0untracked\0" + name.encode() + b"\0")
        with contextlib.suppress(OSError):  # gone, or unreadable: its name alone
            digest.update((repo / name).read_bytes())
    return f"{commit}+dirty:{digest.hexdigest()[:12]}"


def _git(repo: Path, *args: str) -> str | None:
    proc = subprocess.run(
        ["git", "-c", f"safe.directory={repo}", *args],
        cwd=repo,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.stdout.strip() if proc.returncode == 0 else None
