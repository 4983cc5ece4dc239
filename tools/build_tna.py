"""`make build` for Tofino: compile p4src/tna/mrc.p4 with p4c-barefoot into p4src/build/tna/.

What is committed is what a controller and a reviewer need and what stays the same from one
compile to the next: the P4Info (standard P4Runtime externs, as Stratum and the SDE's P4Runtime
server take it), the BF-RT schema (``bfrt.json``), the compiler's version, and a resource summary
(``resources.json``: stages used per gress, each table's stages and memories) distilled from the
compiler's ``power.json``. The rest of the compiler's output (``tofino.bin`` and ``context.json``
from the ``bfas`` assembler, megabytes, with build dates inside) goes to build/tna/, which is not
committed: a switch needs them built by the compiler of its own SDE release anyway.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hostenv.toolchain import P4C_BAREFOOT, find_tool, tool_version
from p4src import SOURCE_DIR, TNA_BUILD_DIR

REPO = SOURCE_DIR.parent
TNA_SOURCE = SOURCE_DIR / "tna" / "mrc.p4"
#: Where the uncommitted full output goes (tofino.bin, context.json, logs).
FULL_OUTPUT = REPO / "build" / "tna"
#: Match-action stages per gress on Tofino 1.
TOFINO1_STAGES = 12
#: Memory accesses that occupy a memory (a write to one also read is the same memory).
OCCUPYING_ACCESS = ("read", "search")

COMMITTED = ("mrc.p4info.txtpb", "bfrt.json", "resources.json", "p4c-barefoot-version.txt")


def compile_command(compiler: str, out: Path) -> list[str]:
    """The p4c-barefoot invocation; ``--verbose`` makes it write logs/power.json."""
    return [
        compiler,
        "--target",
        "tofino",
        "--arch",
        "tna",
        "--std",
        "p4-16",
        "-o",
        str(out),
        "--bf-rt-schema",
        str(out / "bfrt.json"),
        "--p4runtime-files",
        str(out / "mrc.p4info.txtpb"),
        "--p4runtime-force-std-externs",
        "--verbose",
        str(TNA_SOURCE.relative_to(REPO)),
    ]


def resource_summary(power: dict[str, Any]) -> dict[str, Any]:
    """Stages and memories per gress and per named table, from the compiler's power.json.

    Tables the compiler made for straight-line code (``tbl_*``) and conditions (``cond-*``)
    count toward the stages but are not listed one by one.
    """
    gresses: dict[str, dict[str, Any]] = {}
    tables = []
    for table in power["tables"]:
        gress = gresses.setdefault(
            table["gress"], {"stages_used": 0, "memories": {}, "compiler_tables": 0}
        )
        stages = sorted(stage["stage_number"] for stage in table["stages"])
        memories: dict[str, int] = {}
        for stage in table["stages"]:
            for memory in stage["memories"]:
                if memory["access_type"] in OCCUPYING_ACCESS:
                    kind = memory["memory_type"]
                    memories[kind] = memories.get(kind, 0) + memory["num_memories"]
        if stages:
            gress["stages_used"] = max(gress["stages_used"], stages[-1] + 1)
        for kind, count in memories.items():
            gress["memories"][kind] = gress["memories"].get(kind, 0) + count
        name = table["name"]
        if name.startswith(("tbl_", "cond-")):
            gress["compiler_tables"] += 1
            continue
        tables.append(
            {"name": name, "gress": table["gress"], "stages": stages, "memories": memories}
        )
    latency = {entry["gress"]: entry["latency"] for entry in power.get("total_latency", [])}
    for name, gress in gresses.items():
        gress["memories"] = dict(sorted(gress["memories"].items()))
        if name in latency:
            gress["latency_cycles"] = latency[name]
    return {
        "chip": "tofino",
        "arch": "tna",
        "stages_available": TOFINO1_STAGES,
        "gress": dict(sorted(gresses.items())),
        "tables": sorted(tables, key=lambda t: (t["gress"], t["stages"], t["name"])),
    }


def check_fits(summary: dict[str, Any]) -> None:
    """Refuse a placement beyond Tofino 1's last stage.

    The open compiler can place tables past the last stage and still report success; only the
    assembler refuses, and it may be absent, so the build checks the stage count itself.
    """
    used = {gress: info["stages_used"] for gress, info in summary["gress"].items()}
    if max(used.values(), default=0) > TOFINO1_STAGES:
        raise RuntimeError(f"the program needs more than {TOFINO1_STAGES} stages: {used}")


def compile_tna(compiler: str, committed: Path, full: Path | None) -> None:
    """Compile into a scratch directory, then write the committed artifacts to ``committed``
    and, when ``full`` is given, the whole output (assembled with bfas when present) there."""
    with tempfile.TemporaryDirectory(prefix="mrc-tna-") as scratch:
        out = Path(scratch) / "out"
        proc = subprocess.run(
            compile_command(compiler, out), cwd=REPO, capture_output=True, text=True
        )
        if proc.returncode != 0:
            raise RuntimeError(f"p4c-barefoot failed:\n{proc.stdout}{proc.stderr}")
        power = json.loads((out / "pipe" / "logs" / "power.json").read_text())
        summary = resource_summary(power)
        check_fits(summary)
        committed.mkdir(parents=True, exist_ok=True)
        for name in ("mrc.p4info.txtpb", "bfrt.json"):
            shutil.copyfile(out / name, committed / name)
        (committed / "resources.json").write_text(json.dumps(summary, indent=1) + "\n")
        (committed / "p4c-barefoot-version.txt").write_text(
            tool_version(P4C_BAREFOOT, compiler) + "\n"
        )
        if full is not None:
            assemble(out)
            if full.exists():
                shutil.rmtree(full)
            shutil.copytree(out, full)


def assemble(out: Path) -> None:
    """tofino.bin and the full context.json, from the compiler's assembly, when bfas exists."""
    bfas = shutil.which("bfas")
    if bfas is None:
        return
    pipe = out / "pipe"
    proc = subprocess.run(
        [bfas, "-o", str(pipe), str(pipe / "mrc.bfa")], capture_output=True, text=True
    )
    if proc.returncode != 0:
        output = proc.stdout + proc.stderr
        errors = [line for line in output.splitlines() if "error" in line]
        raise RuntimeError("bfas failed:\n" + "\n".join(errors or [output]))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=TNA_BUILD_DIR, help="committed artifacts")
    parser.add_argument("--full", type=Path, default=FULL_OUTPUT, help="the whole output")
    args = parser.parse_args(argv)
    compiler = find_tool(P4C_BAREFOOT)
    if compiler is None:
        print("p4c-barefoot not found: TNA build skipped (see `make doctor`)")
        return 0
    try:
        compile_tna(compiler, args.out, args.full)
    except RuntimeError as exc:
        print(exc, file=sys.stderr)
        return 1
    summary = json.loads((args.out / "resources.json").read_text())
    stages = ", ".join(
        f"{gress} {info['stages_used']}/{summary['stages_available']}"
        for gress, info in summary["gress"].items()
    )
    print(f"p4c-barefoot: {TNA_SOURCE.relative_to(REPO)} -> {args.out} (stages: {stages})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
