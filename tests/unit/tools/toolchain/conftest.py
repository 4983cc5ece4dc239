"""Small git trees standing in for the P4 toolchain's repositories."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tools.toolchain.pins import Component, Pins
from tools.toolchain.plan import RecipeOf, Request, make_plan, stamp_content, stamp_path

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t",
    "GIT_AUTHOR_EMAIL": "t@t",
    "GIT_COMMITTER_NAME": "t",
    "GIT_COMMITTER_EMAIL": "t@t",
    "HOME": "/nonexistent",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "init.defaultBranch=main", "-c", "protocol.file.allow=always", *args],
        cwd=cwd,
        check=True,
        capture_output=True,
        text=True,
        env=GIT_ENV,
    ).stdout.strip()


def make_repo(path: Path, files: dict[str, str]) -> str:
    """A repository at ``path`` with one commit of ``files``; its commit id."""
    path.mkdir(parents=True)
    git(path, "init", "-q")
    for name, text in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "one")
    return git(path, "rev-parse", "HEAD")


def add_commit(path: Path, name: str, text: str) -> str:
    (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "more")
    return git(path, "rev-parse", "HEAD")


@pytest.fixture()
def trees(tmp_path: Path) -> dict[str, object]:
    """P4_SRC with a parent tree ``top`` (one submodule ``sub`` at ``lib/sub``) and ``tool``."""
    src = tmp_path / "p4src"
    sub = make_repo(src / "sub", {"sub.h": "int sub;\n"})
    tool = make_repo(src / "tool", {"configure": "#!/bin/sh\n", "README": "tool\n"})
    top_dir = src / "top"
    make_repo(top_dir, {"top.c": "int main;\n"})
    git(top_dir, "submodule", "add", "-q", str(src / "sub"), "lib/sub")
    git(top_dir, "commit", "-q", "-m", "sub")
    top = git(top_dir, "rev-parse", "HEAD")
    return {"src": src, "top": top, "sub": sub, "tool": tool}


def pin_data(trees: dict[str, object], **over: str) -> dict[str, object]:
    """A pin file's content for the ``trees`` fixture: components ``base`` (top) and ``app``
    (tool, needing base)."""
    commits = {"top": trees["top"], "sub": trees["sub"], "tool": trees["tool"], **over}
    return {
        "sources": {
            "top": {
                "url": "https://example.invalid/top",
                "commit": commits["top"],
                "ref": "v1",
                "folder": "top",
                "submodules": {"lib/sub": "sub"},
            },
            "sub": {
                "url": "https://example.invalid/sub",
                "commit": commits["sub"],
                "ref": "v1",
                "folder": "sub",
            },
            "tool": {
                "url": "https://example.invalid/tool",
                "commit": commits["tool"],
                "ref": "v2",
                "folder": "tool",
            },
        },
        "components": {
            "base": {"sources": ["top"], "provides": ["lib/libbase.so"]},
            "app": {
                "sources": ["tool"],
                "needs": ["base"],
                "provides": ["bin/app"],
                "version_probe": ["bin/app", "--version"],
                "tofino_provides": ["bin/app-tf"],
            },
        },
    }


#: The fixture components' recipe ids, as ``recipe_id`` gives the real ones.
RECIPES = {"base": "base-r1", "app": "app-r1"}


def recipes(component: Component, tofino: bool) -> str:
    return RECIPES[component.name] + ("-tofino" if tofino else "")


def install(prefix: Path, files: list[str]) -> None:
    """Files standing in for what a component installs (executable, for version probes)."""
    for name in files:
        (prefix / name).parent.mkdir(parents=True, exist_ok=True)
        (prefix / name).write_text("#!/bin/sh\n")
        (prefix / name).chmod(0o755)


def stamp_all(pins: Pins, req: Request, recipe_of: RecipeOf = recipes) -> None:
    """Every component stamped as a build for ``req`` would stamp it."""
    plan = make_plan(pins, req, recipe_of)
    for planned in plan.components:
        path = stamp_path(req.prefix, planned.component.name)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(stamp_content(pins, planned, req.tofino)))
