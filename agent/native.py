"""Run the agent's mypyc-compiled modules, but only when they were built from the sources here.

Why: the protocol core and the socket runtime's per-packet path are plain, typed Python. That
stays the reference implementation, read, tested and profiled as such, but on a veth pair the
agent's per-packet cost is mostly the interpreter's. ``make native`` (``tools/build_native.py``)
compiles the modules named in :data:`COMPILED_MODULES` with mypyc, a compiler for type-annotated
Python that ships with mypy, into C extensions under ``build/native/`` and writes a manifest of
the SHA-256 of every source file under ``agent/`` and of the compiled module outside it.

On ``import agent`` (``agent/__init__.py`` calls :func:`install`) those extensions go first on
the import path only if the manifest matches every source byte for byte and was built for this
interpreter. After any edit to those sources the pure-Python modules run, with a warning naming
what changed, until the next ``make native``: a stale extension can never run code that is no
longer in the tree. All modules run compiled or none do (compiled modules call each other
directly, so a mix would be stale in hidden ways). ``MRC_AGENT_PURE_PYTHON=1`` asks for the
pure-Python modules, for profilers (which cannot see into compiled functions) and for the test
pass that keeps both builds equivalent.

Stdlib only and free of the agent's own imports: it runs before any other agent module loads.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import json
import os
import sys
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from pathlib import Path
from types import ModuleType

#: The modules ``make native`` compiles: the sans-IO core whole (every module but the package
#: ``__init__`` files, which only re-export), the RoCE baseline's whole (so that MRC and RoCE
#: are compared at the same per-packet cost), and the runtime's per-datagram path (event loop,
#: batched receive and send), and the one module outside ``agent/`` that path calls per packet,
#: ``wire.entropy`` (the EV's header fields: from compiled code, a call into a pure-Python
#: function costs some 0.1-0.2 us, many times the arithmetic), and the simulator's per-packet
#: work (event queue, links, hosts), where a large simulated fabric spends its time. Left out:
#: ``agent.io.mmsg`` (ctypes structures, which mypyc cannot compile; its work is the system
#: call anyway), the control plane (side channel, transfers, control socket: per message, not
#: per packet), the CLI and the simulator's set-up.
COMPILED_MODULES: tuple[str, ...] = (
    "agent.core.cc.base",
    "agent.core.cc.dcqcn",
    "agent.core.cc.dcqcn_law",
    "agent.core.cc.fixed",
    "agent.core.cc.nscc",
    "agent.core.codec",
    "agent.core.config",
    "agent.core.connection",
    "agent.core.crc",
    "agent.core.data_encoder",
    "agent.core.datagram",
    "agent.core.drops",
    "agent.core.endpoint",
    "agent.core.ev",
    "agent.core.events",
    "agent.core.icrc",
    "agent.core.memory",
    "agent.core.messages",
    "agent.core.packets",
    "agent.core.psn",
    "agent.core.receiver",
    "agent.core.recovery",
    "agent.core.rtt",
    "agent.core.send_slots",
    "agent.core.sender",
    "agent.core.stats",
    "agent.roce.codec",
    "agent.roce.config",
    "agent.roce.endpoint",
    "agent.roce.packets",
    "agent.roce.qp",
    "agent.roce.requester",
    "agent.roce.responder",
    "agent.roce.rto",
    "agent.roce.selective_responder",
    "agent.io.datagram_io",
    "agent.io.raw_sender",
    "agent.io.reactor",
    "agent.io.runtime",
    "agent.io.udp_receiver",
    "agent.sim.host",
    "agent.sim.link",
    "agent.sim.packet",
    "agent.sim.scheduler",
    "wire.entropy",
)

#: mypyc puts the compiled code of all modules in one shared library, a top-level module named
#: ``<GROUP_NAME>__mypyc``; each module's own extension is a small shim that loads it.
GROUP_NAME = "mrc_agent_native"
MANIFEST_NAME = "manifest.json"
PURE_PYTHON_ENV = "MRC_AGENT_PURE_PYTHON"

AGENT_DIR = Path(__file__).resolve().parent
NATIVE_DIR = AGENT_DIR.parent / "build" / "native"


class NativeState(Enum):
    """Which build of the agent this process runs, and why."""

    ACTIVE = "native"  #: the compiled modules, fresh
    REQUESTED_PURE = "pure-python (MRC_AGENT_PURE_PYTHON)"
    ABSENT = "pure-python (no native build: make native)"
    STALE = "pure-python (native build is stale: make native)"


@dataclass(frozen=True)
class NativeStatus:
    """The decision :func:`check` made, with the files it would load when ``ACTIVE``."""

    state: NativeState
    detail: str = ""
    files: Mapping[str, Path] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """Short text for reports and JSON (``native``, or ``pure-python (why)``)."""
        return self.state.value


def source_digests(agent_dir: Path) -> dict[str, str]:
    """SHA-256 of every ``.py`` file under ``agent_dir`` and of each compiled module outside
    it, keyed by its path relative to the repository (``agent_dir``'s parent).

    Every file of the agent counts, not only the compiled ones: mypyc inlines constants and
    resolves calls across modules at compile time, so an edit anywhere the compiled code
    imports from can make it stale.
    """
    repo = agent_dir.parent
    outside = [
        repo.joinpath(*module.split(".")).with_suffix(".py")
        for module in COMPILED_MODULES
        if module.split(".", 1)[0] != agent_dir.name
    ]
    digests: dict[str, str] = {}
    for path in [*sorted(agent_dir.rglob("*.py")), *outside]:
        if path.is_file():
            relative = path.relative_to(repo).as_posix()
            digests[relative] = hashlib.sha256(path.read_bytes()).hexdigest()
    return digests


def interpreter_tag() -> str:
    """What a C extension must have been built for: implementation, version and ABI suffix."""
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    return f"{sys.implementation.cache_tag}{suffix}"


def changed_sources(built: Mapping[str, str], now: Mapping[str, str]) -> list[str]:
    """Source files added, removed or edited since the build, sorted."""
    return sorted(name for name in built.keys() | now.keys() if built.get(name) != now.get(name))


def check(
    native_dir: Path = NATIVE_DIR,
    agent_dir: Path = AGENT_DIR,
    environ: Mapping[str, str] = os.environ,
) -> NativeStatus:
    """Whether the native build in ``native_dir`` may run for the sources in ``agent_dir``."""
    if environ.get(PURE_PYTHON_ENV, "") not in ("", "0"):
        return NativeStatus(NativeState.REQUESTED_PURE, f"{PURE_PYTHON_ENV} is set")
    manifest_path = native_dir / MANIFEST_NAME
    if not manifest_path.is_file():
        return NativeStatus(NativeState.ABSENT, f"no {manifest_path}")
    try:
        manifest = json.loads(manifest_path.read_text())
        built_for = str(manifest["interpreter"])
        built_sources = {str(k): str(v) for k, v in dict(manifest["sources"]).items()}
        files = {str(k): native_dir / str(v) for k, v in dict(manifest["files"]).items()}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        return NativeStatus(NativeState.STALE, f"unreadable manifest {manifest_path}: {exc}")
    if built_for != interpreter_tag():
        return NativeStatus(
            NativeState.STALE, f"built for {built_for}, this interpreter is {interpreter_tag()}"
        )
    changed = changed_sources(built_sources, source_digests(agent_dir))
    if changed:
        shown = ", ".join(changed[:3])
        more = f" and {len(changed) - 3} more" if len(changed) > 3 else ""
        return NativeStatus(NativeState.STALE, f"changed since the build: {shown}{more}")
    missing = [str(path) for path in files.values() if not path.is_file()]
    if missing:
        return NativeStatus(NativeState.STALE, f"missing {missing[0]}")
    return NativeStatus(NativeState.ACTIVE, f"{len(files)} extensions in {native_dir}", files)


class NativeFinder(MetaPathFinder):
    """Finds the named modules as the C extensions given, before the normal path search."""

    def __init__(self, files: Mapping[str, Path]) -> None:
        self._files = dict(files)

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> ModuleSpec | None:
        file = self._files.get(fullname)
        if file is None:
            return None
        loader = importlib.machinery.ExtensionFileLoader(fullname, str(file))
        return importlib.util.spec_from_file_location(fullname, file, loader=loader)


#: What this process decided, once: see :func:`install`.
_decision: NativeStatus | None = None


def activate(status: NativeStatus) -> None:
    """Act on a decision: put an ``ACTIVE`` build's finder first, warn about a ``STALE`` one."""
    if status.state is NativeState.ACTIVE:
        sys.meta_path.insert(0, NativeFinder(status.files))
    elif status.state is NativeState.STALE:
        warnings.warn(
            f"agent: running the pure-Python modules, the native build is stale "
            f"({status.detail}); `make native` rebuilds it",
            RuntimeWarning,
            stacklevel=3,
        )


def install() -> NativeStatus:
    """Decide for this process, once, and act on it (``agent/__init__.py`` calls this first)."""
    global _decision
    if _decision is None:
        _decision = check()
        activate(_decision)
    return _decision


def running_build() -> str:
    """Which build this process runs, for reports: ``native`` or ``pure-python (why)``."""
    return install().label
