"""tool_version reports the line that holds the version, whatever the tool prints first; a p4c
driver counts for BMv2 only with its BMv2 backend beside it."""

from __future__ import annotations

from pathlib import Path

from hostenv.toolchain import P4C_BAREFOOT, p4c_bmv2_backend_missing, tool_version


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


def test_a_p4c_driver_without_its_bmv2_backend_says_so(tmp_path: Path) -> None:
    driver = fake_tool(tmp_path, "p4c", "p4c 1.2.5\\n")
    missing = p4c_bmv2_backend_missing(driver)
    assert missing is not None and "no BMv2 backend" in missing and "p4c-bm2-ss" in missing
    fake_tool(tmp_path, "p4c-bm2-ss", "")
    assert p4c_bmv2_backend_missing(driver) is None


def test_the_backend_is_looked_for_beside_the_driver_a_symlink_points_to(tmp_path: Path) -> None:
    install = tmp_path / "install"
    install.mkdir()
    fake_tool(install, "p4c", "")
    fake_tool(install, "p4c-bm2-ss", "")
    link = tmp_path / "p4c"
    link.symlink_to(install / "p4c")
    assert p4c_bmv2_backend_missing(str(link)) is None
