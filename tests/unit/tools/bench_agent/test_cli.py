"""``make bench-agent``'s output: the JSON report alone on standard output, as it was before
the progress lines, which go to standard error (the measuring itself needs root and is
``make bench-agent``: here the core figure is a fixed one)."""

from __future__ import annotations

import json

import pytest

from tools.bench_agent import cli

CORE = {"messages": 4, "packets_per_second": 1234.0}


def test_stdout_is_the_json_report_alone_and_the_progress_goes_to_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli, "core_benchmark", lambda messages: dict(CORE))
    assert cli.main(["--skip-veth", "--core-messages", "4"]) == 0
    out, err = capsys.readouterr()
    report = json.loads(out)
    assert out == json.dumps(report, indent=2) + "\n"
    assert list(report) == ["benchmark", "host", "core", "veth"]
    assert report["core"] == CORE and report["veth"] == {"skipped": "--skip-veth"}
    lines = err.splitlines()
    assert lines[0] == "bench-agent: 1 measurement; time left unknown until a step ends"
    assert lines[1] == "bench-agent [1/1] core, 4 messages: started"
    assert lines[2].startswith("bench-agent [1/1] core, 4 messages: done in ")
    assert lines[2].endswith(", 1234 datagrams/s; 1 of 1 done, about 0.0 s left")
    assert lines[3].startswith("bench-agent: 1 of 1 measurement done in ")
