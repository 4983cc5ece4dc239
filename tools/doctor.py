"""`make doctor`: which optional tools are present, with versions, and what a missing one disables.

The testbed degrades instead of failing: tests that need a missing tool skip with a one-line
reason. This report tells a user up front which parts will run on this machine and how to get the
rest: each tool, root, the kernel's qdiscs, then each switch target (``bmv2``, ``linux``): whether
it can run here, what it lacks, which one ``TARGET=auto`` picks, and what the linux target does
not do that BMv2 does (no trimming, no per-member counters, ECN only with RED or codel).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path

from agent.native import NativeState, check
from hostenv.qdiscs import probe_qdiscs
from hostenv.seg6 import seg6local_missing
from hostenv.toolchain import (
    ALL_TOOLS,
    P4C,
    SIMPLE_SWITCH_GRPC,
    bmv2_has_thrift,
    find_tool,
    is_root,
    p4c_bmv2_backend_missing,
    tool_version,
)
from testbed.mininet.switch_target import switch_targets
from testbed.targets import default_target, differences
from tools.toolchain.pins import PinError, load_pins
from tools.toolchain.plan import Action, Request, make_plan
from tools.toolchain.recipes import recipe_id

#: Where `make toolchain` installs unless told otherwise (its PREFIX).
TOOLCHAIN_PREFIX = Path("/usr/local")


@dataclass(frozen=True)
class Finding:
    """One line of the report."""

    name: str
    present: bool
    detail: str
    disables: str
    how_to_get: str
    #: Further lines worth reading even when present (a target's differences from BMv2).
    notes: tuple[str, ...] = ()


def collect() -> list[Finding]:
    """Check every optional tool, root, and the kernel's qdiscs."""
    findings: list[Finding] = []
    for spec in ALL_TOOLS:
        path = find_tool(spec)
        if path is None:
            via = f" (or set {spec.env_var})" if spec.env_var else ""
            findings.append(
                Finding(spec.name, False, f"not found on PATH{via}", spec.disables, spec.how_to_get)
            )
            continue
        detail = f"{path} {tool_version(spec, path)}".strip()
        present = True
        if spec is SIMPLE_SWITCH_GRPC and not bmv2_has_thrift(path):
            present = False
            detail += " (built without Thrift: no queue-rate/depth control)"
        if spec is P4C and (no_backend := p4c_bmv2_backend_missing(path)) is not None:
            present = False
            detail = no_backend
        findings.append(Finding(spec.name, present, detail, spec.disables, spec.how_to_get))
    root = is_root()
    findings.append(
        Finding(
            "root",
            root,
            "running as root" if root else "not root",
            "PTF, Mininet and namespace tests and benchmarks",
            "run the make targets as root or through sudo",
        )
    )
    qdiscs: dict[str, bool] | None = None
    if root:
        try:
            qdiscs = probe_qdiscs()
        except OSError as exc:
            findings.append(Finding("qdiscs", False, str(exc), "", ""))
        else:
            for name, ok in qdiscs.items():
                findings.append(
                    Finding(
                        f"qdisc {name}",
                        ok,
                        "available" if ok else "not offered by this kernel",
                        _qdisc_disables(name),
                        "a kernel built with sch_" + name,
                    )
                )
        findings.append(seg6_finding())
    findings.append(native_finding())
    findings.append(toolchain_finding())
    return findings + target_findings(qdiscs)


def seg6_finding() -> Finding:
    """Whether the kernel routes SRv6 uSID carriers itself (seg6local NEXT-C-SID routes)."""
    try:
        missing = seg6local_missing()
    except OSError as exc:
        return Finding("seg6local", False, str(exc), "", "")
    return Finding(
        "seg6local",
        missing is None,
        "takes End with the NEXT-C-SID flavour" if missing is None else missing,
        "SRv6 path mode on the linux target (it runs on bmv2 either way)",
        "a kernel with CONFIG_IPV6_SEG6_LWTUNNEL, Linux 6.1 or later",
    )


def toolchain_finding(prefix: Path = TOOLCHAIN_PREFIX) -> Finding:
    """Whether PI, BMv2 and p4c under ``prefix`` are at the commits the project is tested with
    (tools/toolchain/pins.toml); a tool found elsewhere on PATH is reported above."""
    try:
        pins = load_pins()
    except PinError as exc:
        return Finding("toolchain pins", False, str(exc), "", "")
    request = Request(prefix=prefix, p4_src=None, tofino=False, work=Path("/nonexistent"))
    plan = make_plan(pins, request, recipe_id)
    stale = [f"{c.component.name}: {c.reason}" for c in plan.components if c.action is Action.BUILD]
    return Finding(
        "toolchain pins",
        not stale,
        f"pi, bmv2, p4c under {prefix} at the pinned commits" if not stale else "; ".join(stale),
        "nothing by itself: tests run with whatever p4c and BMv2 are found, pinned or not",
        "make toolchain (tools/toolchain/pins.toml names the commits)",
    )


def native_finding() -> Finding:
    """Whether the agent runs its mypyc-compiled modules (see ``agent/native.py``)."""
    status = check()
    return Finding(
        "agent native build",
        status.state is NativeState.ACTIVE,
        f"{status.label}: {status.detail}",
        "the compiled agent (same code; 1.2-1.4x the goodput on a veth pair, paired runs)",
        "make native (needs gcc and python3-dev; make setup installs them)",
    )


def target_findings(qdiscs: dict[str, bool] | None) -> list[Finding]:
    """Whether each switch target can run here, and which one ``TARGET=auto`` picks."""
    findings = []
    for target in switch_targets():
        problems = target.machine_problems()
        findings.append(
            Finding(
                f"target {target.name}",
                not problems,
                "ready" if not problems else "; ".join(problems),
                f"`make run-topology TARGET={target.name}` and the e2e tests on {target.name}",
                "see the items above",
                tuple(differences(target.name, qdiscs)),
            )
        )
    choice = default_target({target.name: target.tool_problems() for target in switch_targets()})
    findings.append(Finding("target (auto)", True, choice.announcement, "", ""))
    return findings


def _qdisc_disables(name: str) -> str:
    return {
        "netem": "link delay/loss via Mininet (loss is injected with nftables instead)",
        "red": "kernel ECN marking on the linux target",
        "codel": "kernel ECN marking (ce_threshold) on the linux target",
        "fq_codel": "kernel ECN marking (ce_threshold) on the linux target",
        "tbf": "kernel rate limiting on the linux target",
        "htb": "kernel rate limiting on the linux target",
        "pfifo": "kernel queue depth on the linux target",
    }.get(name, "")


def main(argv: list[str] | None = None) -> int:
    """Print the report; exit 0 whatever is missing (it is a report, not a gate)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print the findings as JSON")
    args = parser.parse_args(argv)
    findings = collect()
    if args.json:
        json.dump([asdict(f) for f in findings], sys.stdout, indent=2)
        print()
        return 0
    for f in findings:
        mark = "ok " if f.present else "-- "
        print(f"{mark}{f.name:22} {f.detail}")
        if not f.present and f.disables:
            print(f"     disables: {f.disables}")
            if f.how_to_get:
                print(f"     get it:   {f.how_to_get}")
        for note in f.notes:
            print(f"     differs:  {note}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
