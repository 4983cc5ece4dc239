"""Locate the optional external tools the testbed uses (P4 toolchain, Mininet, tcpreplay, ...).

Every tool is looked up on PATH unless an environment variable names it (``P4C``,
``P4C_BAREFOOT``, ``SIMPLE_SWITCH_GRPC``, ``SIMPLE_SWITCH_CLI``, ``MRC_PI_SERVER``), so a user
with a toolchain outside PATH, or several BMv2 builds, can choose one per command. The Makefile
passes these variables through sudo.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class ToolSpec:
    """An optional tool: how to find it, what it enables, and how to get it upstream."""

    name: str
    env_var: str | None
    version_args: tuple[str, ...]
    disables: str
    how_to_get: str


P4C = ToolSpec(
    "p4c",
    "P4C",
    ("--version",),
    "`make build` and the test that checks p4src/build/ is up to date",
    "make toolchain (add P4_SRC=DIR where the forge cannot be reached; docs/bmv2.md)",
)
P4C_BAREFOOT = ToolSpec(
    "p4c-barefoot",
    "P4C_BAREFOOT",
    ("--version",),
    "the Tofino (TNA) build of `make build` and the test that checks p4src/build/tna/",
    "make toolchain TOFINO=1 (p4c's Tofino backend: hours on 2 cores; docs/bmv2.md)",
)
SIMPLE_SWITCH_GRPC = ToolSpec(
    "simple_switch_grpc",
    "SIMPLE_SWITCH_GRPC",
    ("--version",),
    "the PTF suite, the bmv2 target of `make run-topology` (the linux target runs without "
    "it), `make bench-dataplane`",
    "make toolchain (builds PI, behavioral-model and p4c; docs/bmv2.md)",
)
SIMPLE_SWITCH_CLI = ToolSpec(
    "simple_switch_CLI",
    "SIMPLE_SWITCH_CLI",
    (),
    "queue rate/depth settings on BMv2 (ECN and trimming tests)",
    "make toolchain (installed with behavioral-model; needs Debian's python3-thrift)",
)
MRC_PI_SERVER = ToolSpec(
    "mrc_pi_server",
    "MRC_PI_SERVER",
    (),
    "the tofino southbound's end-to-end tests against PI's P4Runtime server",
    "make toolchain (built against PI from tools/pi_server/; docs/tofino.md)",
)
MININET = ToolSpec(
    "mn",
    None,
    ("--version",),
    "`make run-topology`, the end-to-end tests and experiments",
    "apt-get install mininet (done by `make setup`)",
)
TC = ToolSpec(
    "tc",
    None,
    ("-V",),
    "the linux target (queue rate and depth on kernel switches are tc qdiscs)",
    "apt-get install iproute2 (done by `make setup`)",
)
TCPREPLAY = ToolSpec(
    "tcpreplay",
    None,
    ("--version",),
    "`make bench-dataplane`",
    "apt-get install tcpreplay (done by `make setup`)",
)
ALL_TOOLS = (
    P4C,
    P4C_BAREFOOT,
    SIMPLE_SWITCH_GRPC,
    SIMPLE_SWITCH_CLI,
    MRC_PI_SERVER,
    MININET,
    TC,
    TCPREPLAY,
)


def find_tool(spec: ToolSpec) -> str | None:
    """Path of the tool: the environment variable's value if set, else the PATH lookup."""
    if spec.env_var and os.environ.get(spec.env_var):
        candidate = os.environ[spec.env_var]
        resolved = shutil.which(candidate)
        return resolved or (candidate if Path(candidate).is_file() else None)
    return shutil.which(spec.name)


def tool_version(spec: ToolSpec, path: str) -> str:
    """First line the tool prints for its version flag, other than its bare name ('' when it
    has none or fails)."""
    if not spec.version_args:
        return ""
    try:
        proc = subprocess.run(
            [path, *spec.version_args], capture_output=True, text=True, timeout=10, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return ""
    # p4c-barefoot prints its own name on the first line and the version on the next.
    lines = [
        line.strip()
        for line in (proc.stdout or proc.stderr).splitlines()
        if line.strip() and line.strip() not in (path, Path(path).name)
    ]
    return lines[0] if lines else ""


#: The BMv2 (v1model) backend the ``p4c`` driver runs from its own directory. A p4c built with
#: other backends only (its Tofino backend alone, say) has the driver but not this.
P4C_BMV2_BACKEND = "p4c-bm2-ss"


def p4c_bmv2_backend_missing(path: str) -> str | None:
    """Why the ``p4c`` at ``path`` cannot compile for BMv2, or None when it can."""
    backend = Path(os.path.realpath(path)).parent / P4C_BMV2_BACKEND
    if backend.is_file():
        return None
    return f"{path} has no BMv2 backend ({backend} is missing: p4c built without ENABLE_BMV2)"


def bmv2_has_thrift(path: str) -> bool:
    """Whether this simple_switch_grpc was built with Thrift (it then accepts --thrift-port)."""
    try:
        proc = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return "thrift-port" in proc.stdout + proc.stderr


def is_root() -> bool:
    """Namespaces, veths and BMv2 interfaces need root."""
    return os.geteuid() == 0
