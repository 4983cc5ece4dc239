"""The toolchain's pin file (``pins.toml``), read into frozen records.

Why a file of its own: the versions the project is tested with are data, reviewed in one
place, and the build reads nothing else to decide which commit of which tree to build.
A malformed file is refused with the key that is wrong, before anything is built.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

PIN_FILE = Path(__file__).with_name("pins.toml")
_COMMIT = re.compile(r"[0-9a-f]{40}")


class PinError(ValueError):
    """The pin file is malformed; the message names the file and the key."""


@dataclass(frozen=True)
class Source:
    """One git tree at one commit."""

    name: str
    url: str
    commit: str
    ref: str
    folder: str
    #: (path inside this tree, name of the source that fills it)
    submodules: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Component:
    """Something `make toolchain` builds and installs under PREFIX."""

    name: str
    sources: tuple[str, ...]
    needs: tuple[str, ...]
    apt: tuple[str, ...]
    provides: tuple[str, ...]
    version_probe: tuple[str, ...] = ()
    tofino_sources: tuple[str, ...] = ()
    tofino_provides: tuple[str, ...] = ()
    tofino_python: tuple[str, ...] = ()

    @property
    def has_tofino_part(self) -> bool:
        """Whether ``TOFINO=1`` changes what this component builds (p4c's Tofino backend)."""
        return bool(self.tofino_sources or self.tofino_provides)

    def sources_for(self, tofino: bool) -> tuple[str, ...]:
        return self.sources + (self.tofino_sources if tofino else ())

    def provides_for(self, tofino: bool) -> tuple[str, ...]:
        return self.provides + (self.tofino_provides if tofino else ())


@dataclass(frozen=True)
class Pins:
    sources: dict[str, Source]
    #: In build order: every component comes after the ones it needs.
    components: tuple[Component, ...]

    def component(self, name: str) -> Component:
        for component in self.components:
            if component.name == name:
                return component
        raise KeyError(name)


def load_pins(path: Path = PIN_FILE) -> Pins:
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as err:
        raise PinError(f"{path}: {err}") from err
    return parse_pins(data, str(path))


def parse_pins(data: dict[str, Any], where: str = "pins") -> Pins:
    """Check every key and cross-reference; the first problem raises :class:`PinError`."""
    unknown = set(data) - {"sources", "components"}
    if unknown:
        raise PinError(f"{where}: unknown top-level key(s) {sorted(unknown)}")
    sources = {
        name: _source(name, table, where) for name, table in _table(data, "sources", where).items()
    }
    components: list[Component] = []
    for name, table in _table(data, "components", where).items():
        component = _component(name, table, where)
        for source_name in component.sources + component.tofino_sources:
            if source_name not in sources:
                raise PinError(f"{where}: components.{name}: unknown source {source_name!r}")
        for need in component.needs:
            if need not in {c.name for c in components}:
                raise PinError(
                    f"{where}: components.{name}: needs {need!r}, which must be declared before it"
                )
        components.append(component)
    for parent in sources.values():
        for path, sub in parent.submodules:
            if sub not in sources:
                raise PinError(
                    f"{where}: sources.{parent.name}: submodule {path} names unknown {sub!r}"
                )
    if not components:
        raise PinError(f"{where}: no components")
    return Pins(sources, tuple(components))


def _table(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    table = data.get(key)
    if not isinstance(table, dict) or not all(isinstance(v, dict) for v in table.values()):
        raise PinError(f"{where}: [{key}.NAME] tables expected")
    return table


def _str(table: dict[str, Any], key: str, ctx: str, default: str | None = None) -> str:
    value = table.get(key, default)
    if not isinstance(value, str) or not value:
        raise PinError(f"{ctx}: {key} must be a non-empty string")
    return value


def _strs(table: dict[str, Any], key: str, ctx: str) -> tuple[str, ...]:
    value = table.get(key, [])
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise PinError(f"{ctx}: {key} must be a list of non-empty strings")
    return tuple(value)


def _source(name: str, table: dict[str, Any], where: str) -> Source:
    ctx = f"{where}: sources.{name}"
    unknown = set(table) - {"url", "commit", "ref", "folder", "submodules"}
    if unknown:
        raise PinError(f"{ctx}: unknown key(s) {sorted(unknown)}")
    commit = _str(table, "commit", ctx)
    if not _COMMIT.fullmatch(commit):
        raise PinError(f"{ctx}: commit must be 40 lower-case hex digits, not {commit!r}")
    folder = _str(table, "folder", ctx)
    if "/" in folder or folder in (".", ".."):
        raise PinError(f"{ctx}: folder must be one plain folder name, not {folder!r}")
    subs = table.get("submodules", {})
    if not isinstance(subs, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in subs.items()
    ):
        raise PinError(f"{ctx}: submodules must map a path to a source name")
    return Source(
        name=name,
        url=_str(table, "url", ctx),
        commit=commit,
        ref=_str(table, "ref", ctx),
        folder=folder,
        submodules=tuple(sorted(subs.items())),
    )


def _component(name: str, table: dict[str, Any], where: str) -> Component:
    ctx = f"{where}: components.{name}"
    keys = {
        "sources",
        "needs",
        "apt",
        "provides",
        "version_probe",
        "tofino_sources",
        "tofino_provides",
        "tofino_python",
    }
    unknown = set(table) - keys
    if unknown:
        raise PinError(f"{ctx}: unknown key(s) {sorted(unknown)}")
    component = Component(
        name=name,
        sources=_strs(table, "sources", ctx),
        needs=_strs(table, "needs", ctx),
        apt=_strs(table, "apt", ctx),
        provides=_strs(table, "provides", ctx),
        version_probe=_strs(table, "version_probe", ctx),
        tofino_sources=_strs(table, "tofino_sources", ctx),
        tofino_provides=_strs(table, "tofino_provides", ctx),
        tofino_python=_strs(table, "tofino_python", ctx),
    )
    if not component.sources or not component.provides:
        raise PinError(f"{ctx}: sources and provides must not be empty")
    return component
