"""Start and stop simple_switch_grpc with the project's standard options.

One place decides how BMv2 runs everywhere (PTF, Mininet, benchmarks): bounded rotating logs
(`--log-level warn`, 4 files of 2.5 MB, so at most 10 MB), a CPU port for packet I/O, three
priority queues (``controller.southbound.queues.QueuePriority``: 0 normal, 1 the lossless RoCE
class, 2 high for control packets, trimmed headers and RoCE ACK/NAK and CNP), a Thrift port for
queue settings, and no program: the controller (or the test) pushes the pipeline over
P4Runtime.
"""

from __future__ import annotations

import socket
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from controller.southbound.queues import PRIORITY_QUEUES
from hostenv.toolchain import SIMPLE_SWITCH_CLI, SIMPLE_SWITCH_GRPC, find_tool

LOG_FILE_MAX_BYTES = 2_621_440
LOG_FILE_BACKUPS = 3
CPU_PORT = 255


@dataclass(frozen=True)
class Bmv2Options:
    """How to run one switch. `ports` maps P4 port number to interface name."""

    ports: Mapping[int, str]
    device_id: int = 1
    grpc_port: int = 9559
    thrift_port: int = 9090
    cpu_port: int = CPU_PORT
    priority_queues: int = PRIORITY_QUEUES
    log_dir: Path = Path("/tmp")
    log_level: str = "warn"
    grpc_host: str = "127.0.0.1"
    #: CPU list for `taskset -c` (benchmarks pin the switch away from the traffic generator).
    cpus: str | None = None

    @property
    def grpc_addr(self) -> str:
        return f"{self.grpc_host}:{self.grpc_port}"


def bmv2_command(opts: Bmv2Options, binary: str | None = None) -> list[str]:
    """The simple_switch_grpc command line for these options."""
    binary = binary or find_tool(SIMPLE_SWITCH_GRPC)
    if binary is None:
        raise FileNotFoundError("simple_switch_grpc not found (see `make doctor`)")
    cmd = [
        binary,
        "--no-p4",
        "--device-id",
        str(opts.device_id),
        "--thrift-port",
        str(opts.thrift_port),
        "--log-level",
        opts.log_level,
        "--log-file",
        str(opts.log_dir / f"bmv2-{opts.device_id}"),
        "--log-file-max-size",
        str(LOG_FILE_MAX_BYTES),
        "--log-file-max-files",
        str(LOG_FILE_BACKUPS),
    ]
    for port, ifname in sorted(opts.ports.items()):
        cmd += ["-i", f"{port}@{ifname}"]
    cmd += [
        "--",
        "--grpc-server-addr",
        opts.grpc_addr,
        "--cpu-port",
        str(opts.cpu_port),
        "--priority-queues",
        str(opts.priority_queues),
    ]
    return cmd


def wait_for_port(host: str, port: int, timeout: float, netns: str | None = None) -> None:
    """Block until a TCP port accepts connections (BMv2 takes a moment to open gRPC)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if netns is None:
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex((host, port)) == 0:
                    return
        else:
            probe = subprocess.run(
                ["ip", "netns", "exec", netns, "bash", "-c", f"echo > /dev/tcp/{host}/{port}"],
                capture_output=True,
                check=False,
            )
            if probe.returncode == 0:
                return
        time.sleep(0.1)
    raise TimeoutError(f"nothing listening on {host}:{port} after {timeout:.0f} s")


class Bmv2Process:
    """A running simple_switch_grpc; `stop()` (or the context manager) always ends it."""

    def __init__(self, opts: Bmv2Options, netns: str | None = None) -> None:
        self.opts = opts
        self.netns = netns
        cmd = bmv2_command(opts)
        if opts.cpus:
            cmd = ["taskset", "-c", opts.cpus, *cmd]
        if netns:
            cmd = ["ip", "netns", "exec", netns, *cmd]
        opts.log_dir.mkdir(parents=True, exist_ok=True)
        self._stdout = open(opts.log_dir / f"bmv2-{opts.device_id}.out", "ab")  # noqa: SIM115
        self.proc = subprocess.Popen(cmd, stdout=self._stdout, stderr=subprocess.STDOUT)
        try:
            wait_for_port(opts.grpc_host, opts.grpc_port, 20.0, netns)
        except TimeoutError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self._stdout.close()

    def __enter__(self) -> Bmv2Process:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def thrift_cli(commands: list[str], thrift_port: int, netns: str | None = None) -> str:
    """Run simple_switch_CLI commands (queue rate/depth: BMv2 has no P4Runtime call for them)."""
    cli = find_tool(SIMPLE_SWITCH_CLI)
    if cli is None:
        raise FileNotFoundError("simple_switch_CLI not found (see `make doctor`)")
    # simple_switch_CLI imports Debian's thrift module: run it with the system interpreter.
    cmd = ["/usr/bin/python3", cli, "--thrift-port", str(thrift_port)]
    if netns:
        cmd = ["ip", "netns", "exec", netns, *cmd]
    proc = subprocess.run(
        cmd,
        input="\n".join(commands) + "\n",
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    if proc.returncode != 0 or "Error" in proc.stdout:
        raise RuntimeError(f"simple_switch_CLI failed: {proc.stdout}{proc.stderr}")
    return proc.stdout
