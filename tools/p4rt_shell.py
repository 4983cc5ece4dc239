"""`make shell SW=s1 [TOPO=...]`: p4runtime-shell on one switch of a topology, for debugging.

p4runtime-shell pins protobuf < 3.21, which conflicts with finsy, so it lives in its own virtualenv
(`.venv-shell`, made by the make target). It is started WITHOUT a pipeline config: pushing one
would wipe the switch's tables. It reads the P4Info from the switch instead, and connects with
election id (0, 1), below the controller's, so with a controller running it is a read-only backup
(use `tables`, `te.read()`, counters), and it can write only when no controller holds the switch.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from topologies import load_topology

REPO = Path(__file__).resolve().parents[1]
SHELL_PYTHON = REPO / ".venv-shell" / "bin" / "python"


def shell_command(grpc_addr: str, device_id: int) -> list[str]:
    return [
        str(SHELL_PYTHON),
        "-m",
        "p4runtime_sh",
        "--grpc-addr",
        grpc_addr,
        "--device-id",
        str(device_id),
        "--election-id",
        "0,1",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("switch", nargs="?", default="", help="switch name, e.g. s1")
    parser.add_argument("topology", nargs="?", default="", help="preset name or file")
    args = parser.parse_args(argv)
    if not args.switch:
        parser.error("name a switch: make shell SW=<name> [TOPO=<preset or file>]")
    topology = load_topology(args.topology or "leaf-spine")
    names = [s.name for s in topology.switches]
    if args.switch not in names:
        parser.error(f"no switch {args.switch!r} in this topology (switches: {', '.join(names)})")
    switch = topology.switch(args.switch)
    cmd = shell_command(f"127.0.0.1:{switch.grpc_port}", switch.device_id)
    os.execv(cmd[0], cmd)
    return 1  # not reached: execv replaces this process


if __name__ == "__main__":
    raise SystemExit(main())
