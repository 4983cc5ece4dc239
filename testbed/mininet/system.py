"""Thin wrappers over the commands a run needs: run in a namespace, list namespaces, links
and processes, kill. Every failure of a command that must succeed raises with its stderr."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
from collections.abc import Iterable, Sequence
from pathlib import Path

from hostenv.netns import run


class CommandFailed(RuntimeError):
    """A configuration command failed; the message names the command and its stderr."""


def run_in(netns: str | None, args: Sequence[str]) -> str:
    """Run ``args`` in the named namespace (None: the root namespace), raising on failure."""
    try:
        return run(args, netns=netns)
    except RuntimeError as error:
        where = f"in namespace {netns}" if netns else "in the root namespace"
        raise CommandFailed(f"{where}: {error}") from None


def run_all_in(netns: str | None, commands: Iterable[Sequence[str]]) -> None:
    """Run each command in order; the first failure raises."""
    for args in commands:
        run_in(netns, args)


def attach_netns(name: str, pid: int) -> None:
    """Give the network namespace of ``pid`` a name, so ``ip netns`` lists and enters it.

    The name also keeps the namespace alive until ``ip netns del``; cleanup relies on that to
    find the veths and processes of a run whose owner died.
    """
    run_in(None, ["ip", "netns", "attach", name, str(pid)])


def list_netns() -> list[str]:
    """Names of every named network namespace."""
    return [line.split()[0] for line in run(["ip", "netns", "list"]).splitlines() if line.strip()]


def netns_pids(name: str) -> list[int]:
    """Processes whose network namespace is the named one."""
    return [int(pid) for pid in run(["ip", "netns", "pids", name], check=False).split()]


def delete_netns(name: str) -> None:
    """Remove a namespace name (the namespace goes once no process holds it)."""
    run(["ip", "netns", "del", name], check=False)


def list_root_links() -> list[str]:
    """Interface names in the root namespace (without the ``@peer`` suffix of veths)."""
    names = []
    for line in run(["ip", "-o", "link", "show"]).splitlines():
        fields = line.split(":", 2)
        if len(fields) >= 2:
            names.append(fields[1].strip().split("@")[0])
    return names


def delete_root_link(name: str) -> None:
    """Delete a root-namespace interface (a veth takes its peer along)."""
    run(["ip", "link", "del", "dev", name], check=False)


def processes_naming(text: str) -> list[int]:
    """Processes with ``text`` in an argument, except this process and its ancestors."""
    spared = _self_and_ancestors()
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) in spared:
            continue
        try:
            args = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if any(text.encode() in arg for arg in args):
            found.append(int(entry.name))
    return found


def kill_now(pid: int) -> None:
    """SIGKILL ``pid``; a process that is already gone is fine."""
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)


def process_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (tells a reused pid apart), or None."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may contain spaces; the fields after it do not.
    return int(stat.rsplit(")", 1)[1].split()[19])


def _self_and_ancestors() -> set[int]:
    pids = set()
    pid = os.getpid()
    while pid > 1:
        pids.add(pid)
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(")", 1)[1].split()[1])
    return pids


def port_in_use(port: int) -> bool:
    """Whether a TCP port is taken, so that a switch could not listen on it.

    Binding (with SO_REUSEADDR, as servers do) rather than connecting also catches a port a
    server holds without accepting yet.
    """
    with contextlib.closing(socket.socket()) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind(("0.0.0.0", port))
        except OSError:
            return True
    return False
