"""``make run-topology``: the network, its controller and an agent per host come up; the CLI's
testbed commands work when fed on stdin; exit, Ctrl-C (during bring-up or at the prompt) and
``make stop`` (even after the runner was killed) leave no namespace, veth or process behind.
Every test runs on each target whose tools are present (``testbed_target``); on linux the
banner lists what the target does not do and ``restart`` is refused.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.mininet.environment import forwarding_skip_reason
from tests.e2e.mininet.machine_state import (
    LineReader,
    assert_nothing_left,
    own_session_popen,
    run_state,
)

pytestmark = pytest.mark.mininet

REPO = Path(__file__).resolve().parents[3]
RUNNER = [sys.executable, "-m", "testbed"]
#: Six BMv2s, a controller and four agents on a loaded two-core machine.
BRING_UP_TIMEOUT_S = 180.0
TEARDOWN_TIMEOUT_S = 60.0
READY = r"testbed ready"


def _prefix(runs_dir: Path, timeout: float = 60.0) -> str:
    """The prefix of the one run the test started (its directory appears first)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = [p.name for p in runs_dir.iterdir() if re.fullmatch(r"mn[0-9a-f]{4}", p.name)]
        if found:
            return found[0]
        time.sleep(0.05)
    raise AssertionError(f"no run appeared in {runs_dir}")


def _run_pids(prefix: str) -> set[int]:
    """Every process naming the run: switches (BMv2), agents, controller."""
    return set(run_state(prefix).processes)


def _expected_processes(target: str) -> int:
    """Switch processes (BMv2 only: a kernel switch is no process), agents, controller."""
    return (6 if target == "bmv2" else 0) + 4 + 1


def _interactive(topology: Path, target: str) -> tuple[subprocess.Popen[str], LineReader]:
    proc = subprocess.Popen(
        [*RUNNER, "run", str(topology), "--target", target],
        cwd=REPO,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        bufsize=1,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    return proc, LineReader(proc)


def _wait_or_describe(proc: subprocess.Popen[str], reader: LineReader) -> int:
    """The runner's exit status; if it does not exit within TEARDOWN_TIMEOUT_S, fail with
    what it printed (ending with its Python stacks) and what is still running in its session, so
    a hang can be diagnosed."""
    try:
        return proc.wait(TEARDOWN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        tree = subprocess.run(
            ["ps", "-o", "pid,pgid,sid,stat,etime,wchan:20,args", "-s", str(proc.pid)],
            capture_output=True,
            text=True,
        ).stdout
        os.kill(proc.pid, signal.SIGUSR1)  # the runner's faulthandler prints its stacks
        time.sleep(2)
        os.killpg(proc.pid, signal.SIGKILL)  # its output ends, so reader.rest() returns
        pytest.fail(
            f"the runner did not exit within {TEARDOWN_TIMEOUT_S:.0f} s of Ctrl-C\n"
            f"its output:\n{reader.rest()}\nits session:\n{tree}"
        )


def _send(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


@pytest.mark.usefixtures("runs_dir")
def test_scripted_session_runs_every_testbed_command_and_leaves_nothing(
    leaf_spine_file: Path, testbed_target: str
) -> None:
    restart = ["restart s2"] if testbed_target == "bmv2" else []  # linux: refused, see below
    script = "\n".join(
        [
            "status",
            "mrc h1 h3 --bytes 256K",
            "mrc h1 h3 --bytes 128K --evs 1",
            "fail l1 s1",
            "mrc h1 h4 --bytes 128K",
            "restore l1 s1",
            "loss 10",
            "mrc h1 h3 --bytes 128K",
            "loss",
            "loss off",
            *restart,
            "mrc h2 h4 --bytes 128K",
            "exit",
        ]
    )
    proc = subprocess.run(
        [*RUNNER, "run", str(leaf_spine_file), "--target", testbed_target],
        cwd=REPO,
        input=script + "\n",
        capture_output=True,
        text=True,
        timeout=BRING_UP_TIMEOUT_S + 240,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    up = re.search(r"up as run (mn[0-9a-f]{4})", output)
    assert up, output
    prefix = up.group(1)
    assert "*** error" not in output
    assert f"target {testbed_target}: as asked" in output
    assert f"on target {testbed_target}" in output
    assert re.search(r"l1 +\S+ +in service", output), output  # status: the controller's view
    goodputs = re.findall(r"goodput .*\((\d+\.\d+) KiB confirmed", output)
    assert [float(g) for g in goodputs] == [256.0, 128.0, 128.0, 128.0, 128.0], output
    assert "every fabric link drops 10 % of UDP 4791 frames, each way; LLDP never" in output
    seen = re.search(r"loss rules: (\d+) UDP 4791 frames seen, (\d+) dropped", output)
    assert seen and int(seen.group(1)) > int(seen.group(2)) > 0, output
    assert "every fabric link lossless again" in output
    assert "256 EVs over 1 plane(s)" in output and "1 EVs over 1 plane(s)" in output
    assert re.search(r"cut l1:3<->s1:1; the controller saw it down after", output), output
    assert re.search(r"restored l1:3<->s1:1; the controller saw it up after", output), output
    if testbed_target == "bmv2":
        assert re.search(r"restarted s2 \(pid \d+\); reprogrammed by the controller", output)
        assert "l1       primary      in service" in output
    else:
        assert "linux: no packet trimming" in output  # the banner's differences
        assert "linux: no per-member counters" in output
        assert re.search(r"linux: (no )?ECN marking", output), output
    assert f"run {prefix} torn down: nothing left" in output
    assert_nothing_left(prefix)


def test_failed_commands_are_reported_and_ctrl_c_at_the_prompt_tears_everything_down(
    leaf_spine_file: Path, runs_dir: Path, testbed_target: str
) -> None:
    proc, reader = _interactive(leaf_spine_file, testbed_target)
    try:
        reader.wait_for(READY, BRING_UP_TIMEOUT_S)
        prefix = _prefix(runs_dir)
        pids = _run_pids(prefix)
        expected = _expected_processes(testbed_target)
        assert len(pids) >= expected, f"expected switches, agents and controller: {pids}"
        _send(proc, "fail l1 h4")
        reader.wait_for(r"\*\*\* error: no link between l1 and h4", 30)
        _send(proc, "link l1 s1 down")
        reader.wait_for(r"\*\*\* error: `link` sets both veth ends down", 30)
        if testbed_target == "linux":
            _send(proc, "restart s1")
            reader.wait_for(r"\*\*\* error: s1: restart does not apply to the linux target", 30)
        _send(proc, "mrc h1 h9")
        reader.wait_for(r"\*\*\* error: no agent runs on 'h9'", 30)
        os.killpg(proc.pid, signal.SIGINT)  # what the terminal does on Ctrl-C
        # 1: commands failed and stdin is no terminal, so a script can tell.
        assert _wait_or_describe(proc, reader) == 1, reader.rest()
    finally:
        if proc.poll() is None:
            proc.kill()
    assert f"run {prefix} torn down: nothing left" in reader.rest()
    assert_nothing_left(prefix, pids)


def test_ctrl_c_during_bring_up_tears_everything_down(
    leaf_spine_file: Path, runs_dir: Path, testbed_target: str
) -> None:
    proc = own_session_popen([*RUNNER, "run", str(leaf_spine_file), "--target", testbed_target])
    reader = LineReader(proc)
    try:
        prefix = _prefix(runs_dir)
        deadline = time.monotonic() + BRING_UP_TIMEOUT_S
        while not run_state(prefix).namespaces and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run_state(prefix).namespaces, "the bring-up created no namespace"
        os.killpg(proc.pid, signal.SIGINT)
        _wait_or_describe(proc, reader)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert "torn down" in reader.rest()
    assert_nothing_left(prefix)


def test_stop_tears_down_a_live_run_through_its_runner(
    leaf_spine_file: Path, runs_dir: Path, testbed_target: str
) -> None:
    proc, reader = _interactive(leaf_spine_file, testbed_target)
    try:
        reader.wait_for(READY, BRING_UP_TIMEOUT_S)
        prefix = _prefix(runs_dir)
        pids = _run_pids(prefix)
        stop = subprocess.run(
            [*RUNNER, "stop", prefix], cwd=REPO, capture_output=True, text=True, timeout=120
        )
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert f"asking its runner (pid {proc.pid}) to stop" in stop.stdout
        assert _wait_or_describe(proc, reader) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
    assert f"run {prefix} torn down: nothing left" in reader.rest()
    assert_nothing_left(prefix, pids)


def test_stop_cleans_up_after_a_runner_killed_with_sigkill(
    leaf_spine_file: Path, runs_dir: Path, testbed_target: str
) -> None:
    proc, reader = _interactive(leaf_spine_file, testbed_target)
    try:
        reader.wait_for(READY, BRING_UP_TIMEOUT_S)
        prefix = _prefix(runs_dir)
        pids = _run_pids(prefix)
        proc.kill()  # no teardown at all: switches, agents, controller stay behind
        proc.wait(10)
        assert run_state(prefix).processes, "nothing was left to clean: the test proves nothing"
        stop = subprocess.run(
            [*RUNNER, "stop", prefix], cwd=REPO, capture_output=True, text=True, timeout=120
        )
        assert stop.returncode == 0, stop.stdout + stop.stderr
        assert f"{prefix}: removed" in stop.stdout
    finally:
        if proc.poll() is None:
            proc.kill()
    assert_nothing_left(prefix, pids)


@pytest.mark.usefixtures("runs_dir")
def test_a_run_with_a_backup_says_when_a_controller_dies_takes_over_rejoins_or_none_is_left(
    leaf_spine_file: Path,
) -> None:
    # The CLI and its lines are the same on every target: one (kernel switches, the faster
    # bring-up) stands for both; each target's takeover is tested in test_controller_backup.
    reason = forwarding_skip_reason("linux")
    if reason:
        pytest.skip(reason)
    script = "\n".join(
        [
            "controller",
            "controller kill primary",
            "sh sleep 1",
            "status",
            "controller restart primary",
            "controller kill backup",
            "sh sleep 1",
            "mrc h1 h3 --bytes 128K",
            "controller kill primary",
            "sh sleep 1",
            "controller restart backup",
            "exit",
        ]
    )
    proc = subprocess.run(
        [*RUNNER, "run", str(leaf_spine_file), "--target", "linux", "--backup"],
        cwd=REPO,
        input=script + "\n",
        capture_output=True,
        text=True,
        timeout=BRING_UP_TIMEOUT_S + 120,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert "*** error" not in output
    assert re.search(r"primary: primary \(pid \d+\); backup: backup \(pid \d+\)", output), output
    assert re.search(r"\*\*\* controller primary \(pid \d+\) died", output), output
    assert "*** controller backup took over: primary on every switch" in output
    assert re.search(r"l1 +primary +in service", output), output  # status from the backup
    assert "restarted the primary controller: backup on every switch" in output
    assert "*** controller primary took over: primary on every switch" in output
    assert "*** no controller is running: the fabric is unmanaged" in output
    assert "restarted the backup controller: primary on every switch" in output
    up = re.search(r"up as run (mn[0-9a-f]{4})", output)
    assert up, output
    assert f"run {up.group(1)} torn down: nothing left" in output
    assert_nothing_left(up.group(1))
