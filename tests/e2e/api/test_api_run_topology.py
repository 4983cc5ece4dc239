"""Every host API example, run from ``make run-topology``'s CLI on two of its hosts as a user
would: ``h3 .venv/bin/python examples/api/... &`` and ``h1 ... --to h3``, each program finding
its host's agent through ``MRC_AGENT_SOCKET``, which the run sets in every host's shell.

The leaf-spine preset on the linux target (kernel switches: the quickest to bring up; the
examples do not depend on the switches' kind). What is checked is that each example runs to
its end across the fabric and says what it should; what the API does in detail is checked by
``test_api_examples.py`` on a veth pair.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.mininet.naming import RUN_PREFIX_PATTERN
from testbed.mininet.runs import RUNS_ROOT_ENV
from tests.e2e.mininet.environment import forwarding_skip_reason
from tests.e2e.mininet.machine_state import assert_nothing_left
from tests.e2e.testbed.topology_files import preset_on_own_ports
from topologies import load_topology

pytestmark = pytest.mark.mininet

REPO = Path(__file__).resolve().parents[3]
EXAMPLES = REPO / "examples" / "api"
TARGET = "linux"
#: Bring-up of four hosts, two spines and two leaves, then a dozen Python start-ups.
TIMEOUT_S = 600.0


@pytest.fixture
def runs_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A runs directory of this test's own (what a failed run left is swept after)."""
    reason = forwarding_skip_reason(TARGET)
    if reason:
        pytest.skip(reason)
    path = tmp_path / "runs"
    path.mkdir()
    monkeypatch.setenv(RUNS_ROOT_ENV, str(path))
    yield path
    from testbed.mininet.cleanup import sweep

    for run in path.iterdir():
        if RUN_PREFIX_PATTERN.match(run.name):
            sweep(run.name)


def test_every_example_runs_between_two_hosts_of_a_run_topology(
    tmp_path: Path, runs_dir: Path
) -> None:
    topology_file = preset_on_own_ports("leaf-spine", tmp_path, grpc_base=50950, thrift_base=9990)
    h3 = str(load_topology(topology_file).host("h3").nics[0].ipv4.ip)
    out = tmp_path / "out"
    out.mkdir()

    def example(host: str, name: str, *args: str, background: bool = False) -> str:
        """A CLI line running ``name`` on ``host``: stdout, stderr and exit code to files."""
        files = f"> {out}/{name}.{host}.out 2> {out}/{name}.{host}.err"
        command = f"{sys.executable} {EXAMPLES}/{name}.py {' '.join(args)} {files}"
        return f"{host} sh -c '{command}; echo $? > {out}/{name}.{host}.rc'" + (
            " &" if background else ""
        )

    script = [
        example("h3", "qp_management", background=True),
        example("h1", "qp_management", "--to", h3),
        example(
            "h3",
            "benchmark",
            "--min-size 4096 --size 65536 --step-factor 16 --iters 50 --json",
            background=True,
        ),
        example("h1", "benchmark", h3, "--min-size 4096 --size 65536 --step-factor 16 --iters 50"),
        example("h1", "explicit_evs", "--count 16 --deny 3:4"),
        example("h1", "generated_evs", "--count 128"),
        example("h1", "ev_probes", "--to", h3, "0xc0010000", "--timeout-ms 500"),
        example("h1", "ev_events", "--profile 1 --timeout 2"),
        # The servers wrote their results when their clients finished; let the shells settle.
        "h3 wait",
        "exit",
    ]
    proc = subprocess.run(
        [sys.executable, "-m", "testbed", "run", str(topology_file), "--target", TARGET],
        cwd=REPO,
        input="\n".join(script) + "\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    up = re.search(r"up as run (mn[0-9a-f]{4})", output)
    assert up, output

    def result(name: str, host: str) -> tuple[int, str, str]:
        rc = (out / f"{name}.{host}.rc").read_text().strip()
        return (
            int(rc),
            (out / f"{name}.{host}.out").read_text(),
            (out / f"{name}.{host}.err").read_text(),
        )

    code, stdout, stderr = result("qp_management", "h3")
    assert code == 0, stderr
    server = json.loads(stdout)
    assert server["imm_data"] == 0x4D524321 and server["data_ok"]
    assert result("qp_management", "h1")[0] == 0

    code, stdout, stderr = result("benchmark", "h1")
    assert code == 0, stderr
    assert re.search(r"^ 65536 +\d+ ", stdout, re.MULTILINE), stdout  # OCP's columns
    code, stdout, stderr = result("benchmark", "h3")
    assert code == 0, stderr
    assert [e["ok"] for e in json.loads(stdout)["server"]] == [True, True]

    code, stdout, stderr = result("explicit_evs", "h1")
    assert code == 0, stderr
    assert json.loads(stdout)["denied"] == 2

    code, stdout, stderr = result("generated_evs", "h1")
    assert code == 0, stderr
    assert len(json.loads(stdout)["evs"]) == 128

    code, stdout, stderr = result("ev_probes", "h1")
    assert code == 0, stderr
    (answer,) = json.loads(stdout)
    assert answer["rtt_ns"] > 0, answer

    # Nothing uses profile 1 here, so no EV changes state: the watcher starts, then gives up.
    code, stdout, stderr = result("ev_events", "h1")
    assert json.loads(stdout.splitlines()[0]) == {"watching": 1}
    assert code == 1 and "no event within 2 s" in stderr, stderr

    assert f"run {up.group(1)} torn down: nothing left" in output
    assert_nothing_left(up.group(1))
