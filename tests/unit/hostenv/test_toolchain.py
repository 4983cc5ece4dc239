"""tool_version reports the line that holds the version, whatever the tool prints first."""

from __future__ import annotations

from pathlib import Path

from hostenv.toolchain import P4C_BAREFOOT, tool_version


def fake_tool(tmp_path: Path, name: str, output: str) -> str:
    path = tmp_path / name
    path.write_text(f"#!/bin/sh\nprintf '{output}'\n")
    path.chmod(0o755)
    return str(path)


def test_a_tool_that_prints_its_name_first_reports_the_next_line(tmp_path: Path) -> None:
    path = fake_tool(tmp_path, "p4c-barefoot", "p4c-barefoot\\nVersion 9.13.4\\n")
    assert tool_version(P4C_BAREFOOT, path) == "Version 9.13.4"


def test_a_tool_that_prints_its_path_first_reports_the_next_line(tmp_path: Path) -> None:
    path = fake_tool(tmp_path, "p4c-barefoot", "")
    Path(path).write_text(f"#!/bin/sh\necho {path}\necho 'Version 9.13.4'\n")
    assert tool_version(P4C_BAREFOOT, path) == "Version 9.13.4"


def test_a_tool_whose_first_line_is_the_version_reports_it(tmp_path: Path) -> None:
    path = fake_tool(tmp_path, "p4c-barefoot", "p4c 1.2.5 (SHA: x)\\nmore\\n")
    assert tool_version(P4C_BAREFOOT, path) == "p4c 1.2.5 (SHA: x)"
