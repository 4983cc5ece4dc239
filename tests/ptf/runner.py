"""`make ptf`: run the PTF suite against simple_switch_grpc over veth pairs, then clean up.

The switch, its veths and the PTF process all live in one throw-away network namespace, so the
suite never touches the host's interfaces, and deleting the namespace (always done, on success,
failure or Ctrl-C) removes every veth. Without BMv2, the compiled program or root, it prints one
line saying what is missing and exits 0: a skip, not a failure. ``--skip-log FILE`` records
that skip, and any test PTF reports skipped, for `make test`'s summary (``tests.skip_log``).
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from hostenv.netns import NetnsLab, terminate_on_signals
from hostenv.toolchain import SIMPLE_SWITCH_GRPC, bmv2_has_thrift, find_tool, is_root
from testbed.bmv2 import Bmv2Options, Bmv2Process
from tests.skip_log import record

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "p4src" / "build"
TEST_DIR = Path(__file__).resolve().parent / "tests"
N_PORTS = 8
# One more switch port whose host side PTF does not open: PTF's capture thread dies when its
# interface goes down, so the link-failure test cuts this one and reads its counters instead.
UNWATCHED_PORT = 9
GRPC_PORT = 9559
THRIFT_PORT = 9090
#: How unittest (under PTF) reports a skipped test in its verbose output.
SKIPPED_LINE = re.compile(r"^(?P<test>\S+) \.\.\. skipped '(?P<reason>.*)'$")


def skip_reason() -> str | None:
    """Why the suite cannot run here, or None."""
    bmv2 = find_tool(SIMPLE_SWITCH_GRPC)
    if bmv2 is None:
        return "simple_switch_grpc not found (see `make doctor`)"
    if not bmv2_has_thrift(bmv2):
        return "simple_switch_grpc was built without Thrift (queue tests need it)"
    if not is_root():
        return "needs root for network namespaces and veths"
    if not (BUILD / "mrc.json").exists():
        return "p4src/build/mrc.json missing (run `make build`)"
    return None


def run_ptf(command: list[str], cwd: Path, skip_log: Path | None) -> int:
    """Run PTF, passing its output through; each test it reports skipped goes to
    ``skip_log``."""
    with subprocess.Popen(
        command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            print(line, end="", flush=True)
            skipped = SKIPPED_LINE.match(line.rstrip("\n"))
            if skipped and skip_log is not None:
                record(skip_log, "ptf", skipped["reason"], skipped["test"])
    return proc.returncode


def run_suite(ptf_args: list[str], repeat: int, skip_log: Path | None = None) -> int:
    """Bring up the switch and veths, run PTF `repeat` times, always tear down."""
    log_dir = Path(tempfile.mkdtemp(prefix="mrc-ptf-"))
    ptf_bin = Path(sys.executable).parent / "ptf"
    with terminate_on_signals(), NetnsLab() as lab:
        ns = lab.add_netns("ptf")
        for i in range(1, UNWATCHED_PORT + 1):
            lab.add_veth(f"sw{i}", f"h{i}", netns_a=ns, netns_b=ns)
        opts = Bmv2Options(
            ports={i: f"sw{i}" for i in range(1, UNWATCHED_PORT + 1)},
            grpc_port=GRPC_PORT,
            thrift_port=THRIFT_PORT,
            log_dir=log_dir,
        )
        with Bmv2Process(opts, netns=ns):
            # PTF exec()s the string as Python: each value is a literal, strings quoted.
            values = {
                "grpc_addr": f"127.0.0.1:{GRPC_PORT}",
                "thrift_port": THRIFT_PORT,
                "p4info": str(BUILD / "mrc.p4info.txtpb"),
                "p4blob": str(BUILD / "mrc.json"),
                "device_id": 1,
                "unwatched_port": UNWATCHED_PORT,
            }
            params = ";".join(f"{k}={v!r}" for k, v in values.items())
            cmd = [
                "ip",
                "netns",
                "exec",
                ns,
                str(ptf_bin),
                "--test-dir",
                str(TEST_DIR),
                "--pypath",
                str(REPO),
                "--log-file",
                str(log_dir / "ptf.log"),
                "--qlen",
                "100000",
                "--test-params",
                params,
            ]
            for i in range(1, N_PORTS + 1):
                cmd += ["--interface", f"{i}@h{i}"]
            rc = 0
            for run in range(1, repeat + 1):
                if repeat > 1:
                    print(f"== PTF run {run} of {repeat}", flush=True)
                rc = run_ptf([*cmd, *ptf_args], log_dir, skip_log)
                if rc != 0:
                    print(f"PTF failed (exit {rc}); logs in {log_dir}", flush=True)
                    break
    return rc


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1, help="run the suite N times in a row")
    parser.add_argument(
        "--skip-log", type=Path, help="append each skip to this file (tests.skip_log)"
    )
    parser.add_argument("ptf_args", nargs="*", help="passed to ptf (e.g. test names)")
    args = parser.parse_args(argv)
    reason = skip_reason()
    if reason:
        print(f"PTF suite skipped: {reason}")
        if args.skip_log is not None:
            record(args.skip_log, "ptf", reason, "the whole PTF suite")
        return 0
    return run_suite(args.ptf_args, args.repeat, args.skip_log)


if __name__ == "__main__":
    raise SystemExit(main())
