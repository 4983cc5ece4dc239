"""``make fuzz``: a bounded soak of hostile input against a running agent, during real transfers.

Two namespaces joined by a veth (offloads off both ends). In ``rx`` runs ``mrc-agent serve``
with a 256 MiB receive-memory cap. In ``tx``, on three addresses of its own (another tenant on
the same fabric), the attacker (``tools.fuzz.attacks``) sends hostile side-channel openings,
hellos over every limit and bursts of malformed datagrams; from the root namespace, malformed
lines go to the agent's control socket. Meanwhile ``tx``'s own address sends a 32 MiB file
again and again with ``mrc-agent send --no-agent``.

The soak passes when the agent was alive throughout and stops cleanly on SIGTERM; its peak
resident set (the kernel's ``VmHWM``) stayed under its resident set at start plus the memory
cap plus a fixed margin (one file's pages in flight and the interpreter's own churn); every
honest transfer arrived byte-identical; ``status`` answered between the bad requests; and after
the attack the agent holds no memory for regions, no session and no ``.part`` file. The result
is JSON on stdout (and ``--out FILE``); the exit status is 0 only if the soak passed.

Everything it makes is removed on any exit, Ctrl-C and SIGTERM included.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any, TextIO

from hostenv.netns import NetnsLab, run, terminate_on_signals
from hostenv.toolchain import is_root
from tools.fuzz.control_attacks import ControlAttacker
from tools.netns_processes import REPO
from tools.veth_lab import make_veth_pair, route_peers_via_gateway

MiB = 1 << 20
#: What the agent may hold for incoming regions (``--max-receive-memory``).
MAX_RECEIVE_MEMORY = 256 * MiB
#: Resident memory allowed on top of the start and the cap: a file's pages in flight (the
#: part file is mapped) and what the interpreter allocates while serving.
RSS_MARGIN = 128 * MiB
#: The honest transfer's size.
FILE_SIZE = 32 * MiB
#: Addresses the attacker adds to ``tx``'s veth (the honest sender keeps ``.1``).
ATTACKER_HOSTS = (3, 4, 5)
#: Seconds the agent gets to release what the attack left once it has stopped.
SETTLE_S = 5.0


@dataclass
class SoakResult:
    """What the soak saw; ``failures`` is empty when it passed."""

    duration_s: float
    seed: int
    agent_alive: bool = False
    agent_exit_code: int | None = None
    rss_start: int = 0
    rss_peak: int = 0
    #: Start + the agent's receive-memory cap + ``RSS_MARGIN`` (0: the agent shows no cap).
    rss_limit: int = 0
    honest_transfers: int = 0
    honest_bytes: int = 0
    attacks: dict[str, int] = field(default_factory=dict)
    control: dict[str, int] = field(default_factory=dict)
    side_channel: dict[str, Any] = field(default_factory=dict)
    core_drops: int = 0
    failures: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


def memory_of(pid: int) -> dict[str, int]:
    """``VmRSS``, ``VmHWM`` (peak resident set) and ``RssAnon`` of ``pid``, in bytes."""
    fields: dict[str, int] = {}
    with open(f"/proc/{pid}/status") as status:
        for text in status:
            match = re.match(r"(VmRSS|VmHWM|RssAnon):\s+(\d+) kB", text)
            if match:
                fields[match.group(1)] = int(match.group(2)) * 1024
    return fields


class Agent:
    """``mrc-agent serve`` in a namespace, its output in files (bounded by the log limit)."""

    def __init__(self, netns: str, plane: str, work: Path, limits: bool) -> None:
        self.socket = str(work / "agent.sock")
        self.out_dir = work / "received"
        self.stdout_path = work / "agent.out"
        self.stderr_path = work / "agent.err"
        command = [
            sys.executable,
            "-m",
            "agent.cli.agent_main",
            "serve",
            "--plane",
            plane,
            "--out-dir",
            str(self.out_dir),
            "--socket",
            self.socket,
        ]
        if limits:
            command += ["--max-receive-memory", str(MAX_RECEIVE_MEMORY)]
        # ``ip netns exec`` execs the command, so the pid is the agent's own.
        with open(self.stdout_path, "w") as out, open(self.stderr_path, "w") as err:
            self.proc = subprocess.Popen(
                ["ip", "netns", "exec", netns, *command], stdout=out, stderr=err, cwd=REPO
            )

    def wait_ready(self, timeout: float = 20.0) -> None:
        deadline = time.monotonic() + timeout
        while "ready" not in self.stdout_path.read_text():
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"the agent did not start: {self.stderr_tail()}")
            time.sleep(0.05)

    def stderr_tail(self) -> str:
        return " | ".join(self.stderr_path.read_text(errors="replace").strip().splitlines()[-5:])

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after 10 s; the exit code (None if it had to be killed)."""
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
                code = None
            else:
                code = self.proc.returncode
        else:
            code = self.proc.returncode
        return code


class PeakWatch(threading.Thread):
    """Reads the agent's ``VmHWM`` every 50 ms while it lives, so that the peak is known even
    if the kernel kills it."""

    def __init__(self, pid: int) -> None:
        super().__init__(name="peak-watch", daemon=True)
        self.pid = pid
        self.peak = 0
        self.stop_event = threading.Event()

    def run(self) -> None:
        while not self.stop_event.wait(0.05):
            try:
                self.peak = max(self.peak, memory_of(self.pid)["VmHWM"])
            except (OSError, KeyError):
                return


class HonestSender(threading.Thread):
    """Sends the same file again and again until told to stop; checks each arrival."""

    def __init__(self, netns: str, target: str, source: Path, out_dir: Path) -> None:
        super().__init__(name="honest-sender", daemon=True)
        self.netns, self.target, self.source, self.out_dir = netns, target, source, out_dir
        self.stop_event = threading.Event()
        self.transfers = 0
        self.failures: list[str] = []

    def run(self) -> None:
        expected = self.source.read_bytes()
        while not self.stop_event.is_set() and len(self.failures) < 3:
            name = f"honest-{self.transfers}.bin"
            command = [sys.executable, "-m", "agent.cli.agent_main", "send", str(self.source)]
            command += ["--to", self.target, "--no-agent", "--name", name]
            proc = subprocess.run(
                ["ip", "netns", "exec", self.netns, *command],
                capture_output=True,
                text=True,
                timeout=180,
                cwd=REPO,
                check=False,
            )
            arrived = self.out_dir / name
            if proc.returncode != 0:
                self.failures.append(f"send exited {proc.returncode}: {proc.stderr.strip()[-300:]}")
            elif not arrived.exists() or arrived.read_bytes() != expected:
                self.failures.append(f"{name} did not arrive byte-identical")
            else:
                self.transfers += 1
            arrived.unlink(missing_ok=True)


def soak(
    duration_s: float,
    seed: int = 1,
    only: Sequence[str] = (),
    limits: bool = True,
    log: TextIO = sys.stderr,
) -> SoakResult:
    """Run the soak for ``duration_s`` seconds of attack (see the module docstring)."""
    result = SoakResult(duration_s=duration_s, seed=seed)
    rng = random.Random(seed)
    with TemporaryDirectory(prefix="mrc-fuzz-") as tmp, NetnsLab() as lab:
        work = Path(tmp)
        pair = make_veth_pair(lab)
        route_peers_via_gateway(pair)
        prefix = pair.tx_ip.rsplit(".", 1)[0]
        attackers = [f"{prefix}.{host}" for host in ATTACKER_HOSTS]
        for address in attackers:
            run(["ip", "addr", "add", f"{address}/24", "dev", pair.tx_if], netns=pair.tx_ns)
        source = work / "payload.bin"
        source.write_bytes(rng.randbytes(FILE_SIZE))
        agent = Agent(pair.rx_ns, pair.rx_ip, work, limits)
        try:
            agent.wait_ready()
            pid = agent.proc.pid
            result.rss_start = memory_of(pid)["VmRSS"]
            cap = _memory_cap(agent)
            if cap is not None:
                result.rss_limit = result.rss_start + cap + RSS_MARGIN
            watch = PeakWatch(pid)
            watch.start()
            honest = HonestSender(pair.tx_ns, pair.rx_ip, source, agent.out_dir)
            control = ControlAttacker(agent.socket, random.Random(seed + 1))
            attack_cmd = [sys.executable, "-m", "tools.fuzz.attacks", "--target", pair.rx_ip]
            attack_cmd += ["--duration", str(duration_s), "--seed", str(seed)]
            for address in attackers:
                attack_cmd += ["--source", address]
            for name in only:
                if name != "control":
                    attack_cmd += ["--only", name]
            print(f"fuzz: attacking the agent for {duration_s:.0f} s", file=log)
            attacker = subprocess.Popen(
                ["ip", "netns", "exec", pair.tx_ns, *attack_cmd],
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                cwd=REPO,
            )
            honest.start()
            fuzz_control = not only or "control" in only
            while attacker.poll() is None and agent.proc.poll() is None:
                if fuzz_control:
                    control.attack()
                    if rng.random() < 0.2 and not control.status_answers():
                        result.failures.append("the control socket did not answer status")
                else:
                    time.sleep(0.1)
            out, err = attacker.communicate(timeout=60)
            honest.stop_event.set()
            honest.join(timeout=200)
            result.agent_alive = agent.proc.poll() is None
            watch.stop_event.set()
            watch.join(timeout=5)
            result.rss_peak = watch.peak
            if attacker.returncode != 0:
                result.failures.append(f"the attacker failed: {err.strip()[-300:]}")
            else:
                result.attacks = json.loads(out)
            result.control = dict(sorted(control.tally.items()))
            result.honest_transfers = honest.transfers
            result.honest_bytes = honest.transfers * FILE_SIZE
            result.failures += honest.failures
            if result.agent_alive:
                result.rss_peak = max(result.rss_peak, memory_of(pid)["VmHWM"])
                _settle(agent, result)
            else:
                result.failures.append(
                    f"the agent died (exit {agent.proc.returncode}): {agent.stderr_tail()}"
                )
        finally:
            result.agent_exit_code = agent.stop()
        if result.agent_alive and result.agent_exit_code != 0:
            result.failures.append(f"the agent exited {result.agent_exit_code} on SIGTERM")
        if result.rss_limit and result.rss_peak > result.rss_limit:
            result.failures.append(
                f"peak RSS {result.rss_peak >> 20} MiB over the limit {result.rss_limit >> 20} MiB"
            )
        if result.agent_alive and result.honest_transfers == 0:
            result.failures.append("no honest transfer completed")
    return result


def _settle(agent: Agent, result: SoakResult) -> None:
    """After the attack: status answers, and nothing the attacker opened is still held."""
    deadline = time.monotonic() + SETTLE_S
    while True:
        status = _status(agent)
        side = (status or {}).get("side_channel", {})
        held = side.get("limits", {}).get("memory_held")
        parts = list(agent.out_dir.glob("*.part"))
        if status is not None and side.get("sessions") == 0 and held == 0 and not parts:
            break
        if time.monotonic() > deadline:
            result.failures.append(
                f"{SETTLE_S:.0f} s after the attack: status "
                f"{'answered' if status else 'did not answer'}, sessions "
                f"{side.get('sessions')}, memory held {held}, part files {len(parts)}"
            )
            break
        time.sleep(0.2)
    if status is not None:
        result.side_channel = side
        result.core_drops = sum(status.get("core_drops", {}).values())


def _memory_cap(agent: Agent) -> int | None:
    """The agent's ``--max-receive-memory`` as its status shows it (None: it shows none)."""
    status = _status(agent) or {}
    cap = status.get("side_channel", {}).get("limits", {}).get("max_receive_memory")
    return cap if isinstance(cap, int) else None


def _status(agent: Agent) -> dict[str, Any] | None:
    proc = subprocess.run(
        [sys.executable, "-m", "agent.cli.agent_main", "status", "--socket", agent.socket],
        capture_output=True,
        text=True,
        timeout=20,
        cwd=REPO,
        check=False,
    )
    if proc.returncode != 0:
        return None
    answer: dict[str, Any] = json.loads(proc.stdout)
    return answer


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="tools.fuzz", description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=60.0, help="seconds of attack")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        help="run just this attack (repeatable; 'control' for the control socket)",
    )
    parser.add_argument(
        "--default-limits",
        action="store_true",
        help="start the agent without --max-receive-memory (its default: a share of memory)",
    )
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if not is_root():
        print("fuzz: needs root (network namespaces): run with sudo", file=sys.stderr)
        return 2
    with terminate_on_signals():
        result = soak(args.duration, args.seed, args.only, limits=not args.default_limits)
    payload = {**asdict(result), "passed": result.passed}
    text = json.dumps(payload, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    for failure in result.failures:
        print(f"fuzz: FAILED: {failure}", file=sys.stderr)
    return 0 if result.passed else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    sys.exit(main())
