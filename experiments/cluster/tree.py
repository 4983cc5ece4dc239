"""Which commit a tree is at, precisely enough that two trees compare equal only when they
run the same code: the commit, and with local changes to tracked files a digest of them
(``+dirty`` alone would make two differently changed trees look the same)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

from experiments.results import REPO


def tree_identity(repo: Path = REPO) -> str:
    """``<commit>``, or ``<commit>+dirty:<12 hex digits of the diff>`` with local changes;
    ``unknown`` outside a git tree."""
    commit = _git(repo, "rev-parse", "HEAD")
    if commit is None:
        return "unknown"
    diff = _git(repo, "diff", "HEAD", "--no-ext-diff", "--binary")
    if not diff:
        return commit
    return f"{commit}+dirty:{hashlib.sha256(diff.encode()).hexdigest()[:12]}"


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
