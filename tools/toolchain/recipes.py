"""How each component is built: its steps, with the flags the project is tested with.

The flags are part of the recipe id recorded in the install stamp, so changing one here
rebuilds that component on the next `make toolchain`. Each known trap of these trees is handled
by a step or a flag here, with its reason beside it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from tools.toolchain.pins import Component

PATCH_DIR = Path(__file__).with_name("patches")
#: The project's own P4Runtime server for the tofino southbound's tests: PI's server and
#: frontend on PI's dummy target with stateful tables and packet-I/O cables (its files say why).
PI_SERVER_DIR = Path(__file__).resolve().parents[1] / "pi_server"
PI_SERVER = "mrc_pi_server"
PI_SERVER_SOURCES = ("main.c", "state_target.c", "wire.c")
#: libpi binds the target functions the program exports ahead of libpi_dummy's (-rdynamic).
PI_SERVER_LIBS = (
    "-lpigrpcserver",
    "-lpifeproto",
    "-lpiprotogrpc",
    "-lpiprotobuf",
    "-lpiall",
    "-lpi_dummy",
    "-lpthread",
)
#: BMv2's Python tools and modules need Debian's python3-thrift, which only this interpreter sees.
SYSTEM_PYTHON = "/usr/bin/python3"

PI_CONFIGURE = (
    "--with-proto",
    "--without-internal-rpc",
    "--without-cli",
    "--disable-static",
    # PI's demo controller does not build against Debian 12's libmicrohttpd (-Werror on its
    # callback types); the one demo program the project uses is built on its own below.
    "ac_cv_lib_microhttpd_MHD_start_daemon=no",
)
#: PI's P4Runtime server on its dummy target: the frontend a Tofino switch's P4Runtime server
#: embeds, so the tofino southbound can be checked against it (docs/tofino.md).
PI_SERVER_DUMMY = "pi_server_dummy"
# No per-packet logging calls: BMv2 runs at --log-level warn here, so they would cost for nothing.
BMV2_CONFIGURE = (
    "--with-pi",
    "--with-thrift",
    "--disable-static",
    "--disable-logging-macros",
    "--disable-elogger",
    "CXXFLAGS=-O2",
    f"PYTHON={SYSTEM_PYTHON}",
)
# Only the backends the project uses; GC off as in the project's earlier hand builds.
P4C_CMAKE = (
    "-DCMAKE_BUILD_TYPE=Release",
    "-DENABLE_BMV2=ON",
    "-DENABLE_GC=OFF",
    "-DENABLE_EBPF=OFF",
    "-DENABLE_UBPF=OFF",
    "-DENABLE_DPDK=OFF",
    "-DENABLE_P4TC=OFF",
    "-DENABLE_P4FMT=OFF",
    "-DENABLE_GTESTS=OFF",
    "-DENABLE_P4C_GRAPHS=OFF",
    "-DENABLE_DOCS=OFF",
    "-DENABLE_LTO=OFF",
    "-DFETCHCONTENT_FULLY_DISCONNECTED=ON",
)
#: Patches of the project's own applied to a staged tree, by source name.
OWN_PATCHES: dict[str, tuple[Path, ...]] = {
    # GCC 12's std::erase_if hands the predicate a const element; p4c's lambdas take it mutable.
    "p4c": (PATCH_DIR / "p4c-gcc12-visitor-erase-if.patch",),
}
#: BMv2 scripts installed with `#!/usr/bin/env python3`, which runs whatever python3 leads PATH.
BMV2_PYTHON_TOOLS = ("simple_switch_CLI", "bm_CLI", "bm_nanomsg_events", "bm_p4dbg")


@dataclass(frozen=True)
class Context:
    prefix: Path
    work: Path
    jobs: int
    tofino: bool
    #: Each source's pinned commit, by source name.
    commits: dict[str, str] = field(default_factory=dict)

    def src(self, source: str) -> Path:
        return self.work / "src" / source

    def build_dir(self, component: str) -> Path:
        return self.work / "build" / component

    @property
    def ccache(self) -> str | None:
        return shutil.which("ccache")

    @property
    def tofino_venv(self) -> Path:
        return self.work / "venv-p4c"


@dataclass(frozen=True)
class Step:
    """One command (or in-process action) of a build, logged to its own file."""

    name: str
    argv: tuple[str, ...] = ()
    cwd: Path | None = None
    env: dict[str, str] = field(default_factory=dict)
    #: Runs in this process instead of argv; it gets the step's log to write to.
    action: Callable[[Context, Callable[[str], None]], None] | None = None
    #: The step is done when this file holds ``done_text`` (written after it succeeds).
    done_file: Path | None = None
    done_text: str = "done"
    #: ... or when this file exists (a step whose output shows it ran).
    done_if_exists: Path | None = None
    #: Compiles run at the lowest priority, so the machine stays usable.
    niced: bool = False


def recipe_id(component: Component, tofino: bool) -> str:
    """A short digest of everything in the recipe that changes what gets installed."""
    parts: tuple[str, ...] = {
        "pi": PI_CONFIGURE,
        "bmv2": BMV2_CONFIGURE,
        "p4c": P4C_CMAKE + ("P4C_VERSION from the pin",) + (("tofino",) if tofino else ()),
        "pi_server": PI_SERVER_LIBS,
    }.get(component.name, ())
    patches = [p.read_bytes() for p in OWN_PATCHES.get(component.sources[0], ())]
    if component.name == "pi_server":
        patches += [(PI_SERVER_DIR / name).read_bytes() for name in (*PI_SERVER_SOURCES, "wire.h")]
    digest = hashlib.sha256("\0".join(parts).encode() + b"".join(patches)).hexdigest()[:16]
    return f"{component.name}-{digest}"


def _compiler_env(ctx: Context) -> dict[str, str]:
    env = {"CCACHE_DIR": str(ctx.work / "ccache"), "CCACHE_MAXSIZE": "10G"}
    return env


def _autotools(ctx: Context, tree: Path, configure: tuple[str, ...]) -> list[Step]:
    cc = ("CC=ccache gcc", "CXX=ccache g++") if ctx.ccache else ()
    args = (f"--prefix={ctx.prefix}", *configure, *cc)
    env = _compiler_env(ctx)
    return [
        Step("autogen", ("./autogen.sh",), tree, env, done_if_exists=tree / "configure"),
        Step(
            "configure",
            ("./configure", *args),
            tree,
            env,
            done_file=tree / ".mrc-configured",
            done_text="\n".join(args),
        ),
        Step("build", ("make", f"-j{ctx.jobs}"), tree, env, niced=True),
        Step("install", ("make", "install"), tree, env),
        # Only root may refresh the linker's cache; a PREFIX of one's own needs LD_LIBRARY_PATH.
        *([Step("ldconfig", ("ldconfig",), tree)] if os.geteuid() == 0 else []),
    ]


def steps(component: Component, ctx: Context) -> list[Step]:
    if component.name == "pi":
        tree = ctx.src("PI")
        demo = tree / "proto" / "demo_grpc"
        return [
            *_autotools(ctx, tree, PI_CONFIGURE),
            Step(
                PI_SERVER_DUMMY,
                ("make", "-C", str(demo), PI_SERVER_DUMMY),
                None,
                _compiler_env(ctx),
                niced=True,
            ),
            # libtool installs it as make install would (a program of its own, with the
            # installed libraries' path), though PI's Makefile does not install it.
            Step(
                f"install-{PI_SERVER_DUMMY}",
                (
                    "./libtool",
                    "--mode=install",
                    "install",
                    "-m",
                    "0755",
                    f"demo_grpc/{PI_SERVER_DUMMY}",
                    str(ctx.prefix / "bin" / PI_SERVER_DUMMY),
                ),
                tree / "proto",
            ),
        ]
    if component.name == "bmv2":
        flags = (f"CPPFLAGS=-I{ctx.prefix}/include", f"LDFLAGS=-L{ctx.prefix}/lib")
        return [
            *_autotools(ctx, ctx.src("behavioral-model"), (*BMV2_CONFIGURE, *flags)),
            Step("python-tools", action=_pin_bmv2_python),
        ]
    if component.name == "p4c":
        return _p4c(component, ctx)
    if component.name == "pi_server":
        return _pi_server(ctx)
    raise KeyError(f"no recipe for component {component.name!r}")


def _pi_server(ctx: Context) -> list[Step]:
    build = ctx.build_dir("pi_server")
    include = f"-I{ctx.prefix}/include"
    compile_steps = [
        Step(
            f"compile-{name}",
            (
                "gcc",
                "-O2",
                "-Wall",
                "-Wextra",
                "-Werror",
                "-std=gnu11",
                include,
                "-c",
                str(PI_SERVER_DIR / name),
                "-o",
                str(build / name.replace(".c", ".o")),
            ),
            PI_SERVER_DIR,
        )
        for name in PI_SERVER_SOURCES
    ]
    objects = [str(build / name.replace(".c", ".o")) for name in PI_SERVER_SOURCES]
    return [
        Step("build-dir", ("mkdir", "-p", str(build))),
        *compile_steps,
        Step(
            "link",
            (
                "g++",
                "-rdynamic",
                "-o",
                str(build / PI_SERVER),
                *objects,
                f"-L{ctx.prefix}/lib",
                f"-Wl,-rpath,{ctx.prefix}/lib",
                *PI_SERVER_LIBS,
            ),
        ),
        Step(
            "install",
            ("install", "-m", "0755", str(build / PI_SERVER), str(ctx.prefix / "bin" / PI_SERVER)),
        ),
    ]


def _p4c(component: Component, ctx: Context) -> list[Step]:
    build = ctx.build_dir("p4c")
    src = ctx.src("p4c")
    deps = {"ABSEIL": "abseil-cpp", "PROTOBUF": "protobuf", "P4RUNTIME": "p4runtime"}
    if ctx.tofino:
        deps["Z3"] = "z3"
    python = str(ctx.tofino_venv / "bin" / "python3") if ctx.tofino else SYSTEM_PYTHON
    launcher = (
        (f"-DCMAKE_C_COMPILER_LAUNCHER={ctx.ccache}", f"-DCMAKE_CXX_COMPILER_LAUNCHER={ctx.ccache}")
        if ctx.ccache
        else ()
    )
    args = (
        "-G",
        "Ninja",
        "-S",
        str(src),
        "-B",
        str(build),
        f"-DCMAKE_INSTALL_PREFIX={ctx.prefix}",
        *P4C_CMAKE,
        f"-DENABLE_TOFINO={'ON' if ctx.tofino else 'OFF'}",
        # Tofino's CMake files need p4test's objects.
        f"-DENABLE_P4TEST={'ON' if ctx.tofino else 'OFF'}",
        *(f"-DFETCHCONTENT_SOURCE_DIR_{key}={ctx.src(name)}" for key, name in deps.items()),
        f"-DPython3_EXECUTABLE={python}",
        *launcher,
    )
    env = {**_compiler_env(ctx), **_p4c_version(ctx)}
    if ctx.tofino:
        # The Tofino backend's build runs its Python tools by name (pyinstaller packages
        # p4c-build-logs), so the venv that holds them leads PATH.
        env["PATH"] = f"{ctx.tofino_venv / 'bin'}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
    out: list[Step] = []
    if ctx.tofino:
        venv = ctx.tofino_venv
        out.append(
            Step(
                "python-venv",
                (SYSTEM_PYTHON, "-m", "venv", str(venv)),
                done_if_exists=venv / "bin" / "python3",
            )
        )
        out.append(Step("spdlog-link", action=_link_spdlog))
        out.append(
            Step(
                "python-modules",
                (str(venv / "bin" / "pip"), "install", "-q", *component.tofino_python),
                done_file=venv / ".mrc-modules",
                done_text=" ".join(component.tofino_python),
            )
        )
    out += [
        Step(
            "configure",
            ("cmake", *args),
            None,
            env,
            done_file=build / ".mrc-configured",
            done_text="\n".join((*args, *_p4c_version(ctx).values())),
        ),
        Step("build", ("ninja", "-C", str(build), f"-j{ctx.jobs}"), None, env, niced=True),
        Step("install", ("ninja", "-C", str(build), "install"), None, env),
    ]
    return out


def _p4c_version(ctx: Context) -> dict[str, str]:
    """p4c reads its SHA from git, and a staged tree has none: ``p4c --version`` would say
    ``SHA: `` and the artifact check could not tell it is the recorded compiler. The version
    is given as p4c's CMake lets one (``P4C_VERSION``), from Version.txt and the pin."""
    version_file = ctx.src("p4c") / "Version.txt"
    commit = ctx.commits.get("p4c")
    if commit is None or not version_file.is_file():
        return {}
    return {
        "P4C_VERSION": f"{version_file.read_text().strip()} (SHA: {commit[:10]} BUILD: Release)"
    }


def patches_for(source: str, ctx: Context) -> list[Path]:
    """The patches a freshly staged tree needs, in the order the caller applies them."""
    patches = list(OWN_PATCHES.get(source, ()))
    if source == "z3":
        # p4c's FetchContent patches Z3 (its `uninstall` target clashes with p4c's); a source
        # folder override skips that step, so it is applied here.
        patches.append(ctx.src("p4c") / "cmake" / "z3.patch")
    return patches


def _link_spdlog(ctx: Context, log: Callable[[str], None]) -> None:
    """The Tofino backend's CMake reads spdlog from this git-ignored path only."""
    link = ctx.src("p4c") / "backends" / "tofino" / "third_party" / "spdlog"
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(ctx.src("spdlog"))
    log(f"{link} -> {ctx.src('spdlog')}")


def _pin_bmv2_python(ctx: Context, log: Callable[[str], None]) -> None:
    for name in BMV2_PYTHON_TOOLS:
        path = ctx.prefix / "bin" / name
        if not path.is_file():
            continue
        lines = path.read_text().split("\n", 1)
        if lines[0].startswith("#!") and "python" in lines[0] and lines[0] != f"#!{SYSTEM_PYTHON}":
            path.write_text(f"#!{SYSTEM_PYTHON}\n" + (lines[1] if len(lines) > 1 else ""))
            log(f"{path}: interpreter set to {SYSTEM_PYTHON} (was {lines[0][2:]})")
