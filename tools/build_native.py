"""`make native`: compile the agent's core and per-packet I/O path with mypyc into build/native/.

Why a compiler: on the veth pair the agent's per-packet cost is mostly the Python interpreter's;
mypyc compiles the same typed modules to C extensions, no second implementation to keep in step.
``agent/native.py`` says which modules and decides at import whether the build may run; this
tool only builds: it type-checks and compiles the modules in a scratch directory, then swaps the
result into ``build/native/`` with a manifest of every source's SHA-256, so a half-finished or
failed build never replaces a good one. It does nothing when the build is already fresh
(``--force`` rebuilds). Needs a C compiler and the Python headers (``gcc``, ``python3-dev``:
``make setup`` installs them).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.machinery
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

from agent.native import (
    AGENT_DIR,
    COMPILED_MODULES,
    GROUP_NAME,
    MANIFEST_NAME,
    NATIVE_DIR,
    NativeState,
    changed_sources,
    check,
    interpreter_tag,
    source_digests,
)

REPO = AGENT_DIR.parent


def module_source(module: str) -> Path:
    """``agent.core.sender`` -> ``agent/core/sender.py`` (relative to the repository)."""
    return Path(*module.split(".")).with_suffix(".py")


def extension_name(module: str) -> Path:
    """Where build_ext puts a module's extension, relative to the build directory."""
    return Path(*module.split(".")).with_name(
        module.rsplit(".", 1)[-1] + importlib.machinery.EXTENSION_SUFFIXES[0]
    )


def compile_into(staging: Path, scratch: Path, verbose: bool) -> dict[str, str]:
    """Type-check and compile :data:`COMPILED_MODULES` into ``staging``; the manifest's files."""
    # Imported here: mypyc and setuptools are build-time tools, not needed to run the agent.
    from mypyc.build import mypycify
    from setuptools import setup

    sources = [str(module_source(module)) for module in COMPILED_MODULES]
    # mypyc names modules from paths relative to the current directory: run it from the repo.
    with contextlib.chdir(REPO):
        extensions = mypycify(
            sources,
            opt_level="3",
            group_name=GROUP_NAME,
            target_dir=str(scratch / "c"),
            verbose=verbose,
        )
    # Built from the scratch directory, away from pyproject.toml (the project's own metadata
    # is nothing to this build); every path in ``extensions`` is absolute.
    with contextlib.chdir(scratch):
        setup(
            name="mrc-agent-native",
            ext_modules=extensions,
            script_name="build_native",
            script_args=[
                *([] if verbose else ["--quiet"]),
                "build_ext",
                "--build-lib",
                str(staging),
                "--build-temp",
                str(scratch / "obj"),
            ],
        )
    files = {module: extension_name(module).as_posix() for module in COMPILED_MODULES}
    group = f"{GROUP_NAME}__mypyc"
    files[group] = extension_name(group).as_posix()
    missing = [name for name in files.values() if not (staging / name).is_file()]
    if missing:
        raise RuntimeError(f"mypyc built no {missing[0]} in {staging}")
    return files


def build(native_dir: Path, force: bool, verbose: bool) -> int:
    """Build unless fresh; 0 on success, 1 when the sources changed during the build."""
    status = check(native_dir=native_dir, environ={})
    if status.state is NativeState.ACTIVE and not force:
        print(f"native: up to date ({status.detail})")
        return 0
    print(f"native: compiling {len(COMPILED_MODULES)} agent modules with mypyc ({status.detail})")
    started = time.monotonic()
    before = source_digests(AGENT_DIR)
    native_dir.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="native-", dir=native_dir.parent) as tmp:
        scratch = Path(tmp)
        staging = scratch / "native"
        files = compile_into(staging, scratch, verbose)
        changed = changed_sources(before, source_digests(AGENT_DIR))
        if changed:
            print(f"native: sources changed during the build ({changed[0]}); run it again")
            return 1
        manifest = {
            "interpreter": interpreter_tag(),
            "python": sys.version.split()[0],
            "modules": list(COMPILED_MODULES),
            "files": files,
            "sources": before,
        }
        (staging / MANIFEST_NAME).write_text(json.dumps(manifest, indent=1) + "\n")
        old = scratch / "previous"
        if native_dir.exists():
            native_dir.rename(old)
        staging.rename(native_dir)
    print(f"native: built {native_dir} in {time.monotonic() - started:.0f} s")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--force", action="store_true", help="rebuild even when up to date")
    parser.add_argument("--verbose", action="store_true", help="show mypyc's and gcc's output")
    parser.add_argument("--clean", action="store_true", help="remove the build and exit")
    args = parser.parse_args(argv)
    if args.clean:
        shutil.rmtree(NATIVE_DIR, ignore_errors=True)
        print(f"native: removed {NATIVE_DIR}")
        return 0
    return build(NATIVE_DIR, args.force, args.verbose)


if __name__ == "__main__":
    sys.exit(main())
