"""What `make toolchain` would do, decided before anything is built.

For each component: keep it (installed at its pinned commits) or build it, and why; for each
source tree a build needs: where it comes from, and whether it is there at its pinned commit.
A missing or wrong tree is named here, so a build never starts only to fail an hour in.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from tools.toolchain import git_trees
from tools.toolchain.pins import Component, Pins, Source

#: Where a build records what it installed, under PREFIX.
STAMP_DIR = Path("share/mrc-toolchain")


@dataclass(frozen=True)
class Request:
    prefix: Path
    #: P4_SRC: a folder of trees brought in by hand; None to clone each tree from its URL.
    p4_src: Path | None
    tofino: bool
    #: The kept work folder (clones, staged trees, build folders, logs, ccache).
    work: Path
    #: Build only these components and what they need; None for all of them.
    only: frozenset[str] | None = None


class Action(Enum):
    KEEP = "keep"
    BUILD = "build"
    SKIP = "skip"


@dataclass(frozen=True)
class ComponentPlan:
    component: Component
    action: Action
    reason: str
    #: Recorded in the stamp; a change of it rebuilds.
    recipe: str


class SourceStatus(Enum):
    OK = "ok"
    CLONE = "clone"
    MISSING = "missing"
    WRONG = "wrong"


@dataclass(frozen=True)
class SourcePlan:
    source: Source
    status: SourceStatus
    detail: str
    git_dir: Path | None


@dataclass(frozen=True)
class Plan:
    request: Request
    components: tuple[ComponentPlan, ...]
    sources: tuple[SourcePlan, ...]

    @property
    def problems(self) -> list[str]:
        return [
            f"{s.source.name}: {s.status.value}: {s.detail}"
            for s in self.sources
            if s.status in (SourceStatus.MISSING, SourceStatus.WRONG)
        ]

    @property
    def to_build(self) -> list[ComponentPlan]:
        return [c for c in self.components if c.action is Action.BUILD]

    def source(self, name: str) -> SourcePlan:
        return next(s for s in self.sources if s.source.name == name)


def stamp_path(prefix: Path, component: str) -> Path:
    return prefix / STAMP_DIR / f"{component}.json"


def stamp_content(pins: Pins, plan: ComponentPlan, tofino: bool) -> dict[str, object]:
    sources = plan.component.sources_for(tofino)
    return {
        "component": plan.component.name,
        "commits": {name: pins.sources[name].commit for name in sources},
        "recipe": plan.recipe,
        "tofino": tofino,
    }


def read_stamp(prefix: Path, component: str) -> dict[str, object] | None:
    try:
        value = json.loads(stamp_path(prefix, component).read_text())
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def probe_version(prefix: Path, component: Component) -> str:
    """What the installed tool says its version is ('' when it has no probe or fails)."""
    if not component.version_probe:
        return ""
    tool, *args = component.version_probe
    try:
        proc = subprocess.run(
            [str(prefix / tool), *args], capture_output=True, text=True, timeout=20, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return " ".join((proc.stdout + proc.stderr).split())[:200]


#: A component's recipe id (its flags) with or without the Tofino backend, as a build records it.
RecipeOf = Callable[[Component, bool], str]


def make_plan(pins: Pins, request: Request, recipe_of: RecipeOf) -> Plan:
    planned: list[ComponentPlan] = []
    wanted = _wanted(pins, request.only)
    for component in pins.components:
        recipe = recipe_of(component, request.tofino and component.has_tofino_part)
        if component.name not in wanted:
            planned.append(_unasked(request, component, recipe, planned))
            continue
        action, reason = _decide(pins, request, component, recipe_of, planned)
        planned.append(ComponentPlan(component, action, reason, recipe))
    needed: list[str] = []
    for plan in planned:
        if plan.action is Action.BUILD:
            for name in plan.component.sources_for(request.tofino):
                _with_submodules(pins, name, needed)
    sources = tuple(_check_source(pins.sources[name], request) for name in needed)
    sources = sources + tuple(_submodule_pins(pins, sources))
    return Plan(request, tuple(planned), _merge(sources))


def unknown_components(pins: Pins, only: frozenset[str]) -> list[str]:
    """The names in ``only`` that ``pins.toml`` declares no component for."""
    return sorted(only - {c.name for c in pins.components})


def _wanted(pins: Pins, only: frozenset[str] | None) -> set[str]:
    """The components asked for and, transitively, the ones they need."""
    by_name = {c.name: c for c in pins.components}
    if only is None:
        return set(by_name)
    wanted: set[str] = set()
    todo = [name for name in only if name in by_name]
    while todo:
        name = todo.pop()
        if name not in wanted:
            wanted.add(name)
            todo.extend(by_name[name].needs)
    return wanted


def _rebuilt_needs(component: Component, earlier: list[ComponentPlan]) -> list[str]:
    """What ``component`` needs that this plan builds (it must be rebuilt against them)."""
    return [
        p.component.name
        for p in earlier
        if p.action is Action.BUILD and p.component.name in component.needs
    ]


def _unasked(
    request: Request, component: Component, recipe: str, earlier: list[ComponentPlan]
) -> ComponentPlan:
    """A component ``--only`` leaves out: skipped, unless it is installed and something it
    needs is rebuilt (it would be left linked against the replaced install)."""
    rebuilt = _rebuilt_needs(component, earlier)
    installed = all((request.prefix / f).exists() for f in component.provides)
    if rebuilt and installed:
        reason = f"rebuilt because {', '.join(rebuilt)} is (it was built against the old one)"
        return ComponentPlan(component, Action.BUILD, reason, recipe)
    return ComponentPlan(component, Action.SKIP, "not asked for (--only)", recipe)


def _decide(
    pins: Pins,
    request: Request,
    component: Component,
    recipe_of: RecipeOf,
    earlier: list[ComponentPlan],
) -> tuple[Action, str]:
    """Keep or build, and why, in this order: files missing; something it needs being built;
    no stamp (kept only when the tool's version names the pinned commit); another commit; the
    Tofino backend asked for and absent; other build flags."""
    rebuilt = _rebuilt_needs(component, earlier)
    missing = [
        f for f in component.provides_for(request.tofino) if not (request.prefix / f).exists()
    ]
    if missing:
        return Action.BUILD, f"not installed ({request.prefix / missing[0]} missing)"
    if rebuilt:
        return Action.BUILD, f"rebuilt because {', '.join(rebuilt)} is"
    main = pins.sources[component.sources[0]]
    stamp = read_stamp(request.prefix, component.name)
    if stamp is None:
        version = probe_version(request.prefix, component)
        if version and main.commit[:7] in version:
            return Action.KEEP, f"installed at the pinned {main.name} {main.commit[:7]} ({version})"
        said = f" (it says {version!r})" if version else ""
        return Action.BUILD, f"installed by other means, not at a version it can show{said}"
    commits = stamp.get("commits")
    wanted = {name: pins.sources[name].commit for name in component.sources_for(request.tofino)}
    if not isinstance(commits, dict):
        return Action.BUILD, "its stamp is unreadable"
    changed = [n for n, c in wanted.items() if commits.get(n) != c]
    if changed:
        name = changed[0]
        had = str(commits.get(name) or "none")[:7]
        return Action.BUILD, f"installed from {name} {had}, pinned {wanted[name][:7]}"
    with_tofino = bool(stamp.get("tofino")) and component.has_tofino_part
    if request.tofino and component.has_tofino_part and not with_tofino:
        return Action.BUILD, "installed without the Tofino backend"
    # A build with the Tofino backend serves a request without it as it is.
    tofino_recipe = component.has_tofino_part and (with_tofino or request.tofino)
    if stamp.get("recipe") != recipe_of(component, tofino_recipe):
        return Action.BUILD, "installed with other build flags"
    extra = " with the Tofino backend" if with_tofino else ""
    return Action.KEEP, f"installed at the pinned {main.name} {main.commit[:7]}{extra}"


def _with_submodules(pins: Pins, name: str, out: list[str]) -> None:
    if name in out:
        return
    out.append(name)
    for _, sub in pins.sources[name].submodules:
        _with_submodules(pins, sub, out)


def _check_source(source: Source, request: Request) -> SourcePlan:
    pinned = f"{source.ref}, {source.commit[:12]}"
    if request.p4_src is None:
        cached = request.work / "git" / source.folder
        git_dir = git_trees.git_dir_of(cached)
        if git_dir is not None and git_trees.has_commit(git_dir, source.commit):
            return SourcePlan(source, SourceStatus.OK, f"{cached} ({pinned})", git_dir)
        return SourcePlan(source, SourceStatus.CLONE, f"will clone {source.url} ({pinned})", None)
    folder = request.p4_src / source.folder
    if not folder.exists():
        return SourcePlan(
            source, SourceStatus.MISSING, f"no {folder} ({source.url} at {pinned})", None
        )
    git_dir = git_trees.git_dir_of(folder)
    if git_dir is None:
        return SourcePlan(
            source,
            SourceStatus.WRONG,
            f"{folder} is not a git tree; its commit cannot be checked",
            None,
        )
    if not git_trees.has_commit(git_dir, source.commit):
        return SourcePlan(
            source,
            SourceStatus.WRONG,
            f"{folder} does not hold the pinned commit ({pinned}); its HEAD is "
            f"{git_trees.head(git_dir)[:12]}",
            git_dir,
        )
    at = git_trees.head(git_dir)
    note = "" if at == source.commit else f"; HEAD is {at[:12]}, the pinned commit is read from it"
    return SourcePlan(source, SourceStatus.OK, f"{folder} ({pinned}){note}", git_dir)


def _submodule_pins(pins: Pins, checked: tuple[SourcePlan, ...]) -> list[SourcePlan]:
    """A submodule whose pin differs from the commit its parent tree records is wrong."""
    wrong: list[SourcePlan] = []
    for plan in checked:
        if plan.status is not SourceStatus.OK or plan.git_dir is None:
            continue
        for path, sub in plan.source.submodules:
            try:
                recorded = git_trees.gitlink(plan.git_dir, plan.source.commit, path)
            except git_trees.GitError as err:  # a damaged tree: said, not a traceback
                recorded = f"unreadable ({err})"
            pinned = pins.sources[sub].commit
            if recorded != pinned:
                wrong.append(
                    SourcePlan(
                        pins.sources[sub],
                        SourceStatus.WRONG,
                        f"{plan.source.name} {plan.source.commit[:12]} records {path} at "
                        f"{(recorded or 'no submodule')[:12]}, pins.toml says {pinned[:12]}",
                        None,
                    )
                )
    return wrong


def _merge(sources: tuple[SourcePlan, ...]) -> tuple[SourcePlan, ...]:
    """One entry per source; a later finding that it is wrong wins."""
    by_name: dict[str, SourcePlan] = {}
    for plan in sources:
        if plan.source.name not in by_name or plan.status is SourceStatus.WRONG:
            by_name[plan.source.name] = plan
    return tuple(by_name.values())


def describe(plan: Plan) -> list[str]:
    """The plan as lines for a person."""
    lines = [
        f"toolchain: prefix {plan.request.prefix}, work folder {plan.request.work}"
        + (", with the Tofino backend" if plan.request.tofino else "")
    ]
    for c in plan.components:
        lines.append(f"  {c.component.name:5} {c.action.value:5} {c.reason}")
    for s in plan.sources:
        lines.append(f"  source {s.source.name}: {s.status.value}: {s.detail}")
    return lines
