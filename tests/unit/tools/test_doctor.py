"""`make doctor` says whether the P4 toolchain is at the pinned commits and how to get it."""

from __future__ import annotations

from tests.unit.tools.toolchain.conftest import install, stamp_all
from tools.doctor import toolchain_finding
from tools.toolchain.pins import load_pins
from tools.toolchain.plan import Request
from tools.toolchain.recipes import recipe_id


def test_an_empty_prefix_is_reported_missing_with_make_toolchain_to_get_it(tmp_path):
    finding = toolchain_finding(tmp_path)
    assert not finding.present
    assert "pi: not installed" in finding.detail and "p4c: not installed" in finding.detail
    assert finding.how_to_get.startswith("make toolchain")


def test_a_prefix_with_every_component_stamped_at_its_pins_is_reported_present(tmp_path):
    pins = load_pins()
    for component in pins.components:
        install(tmp_path, list(component.provides))
    stamp_all(pins, Request(tmp_path, None, False, tmp_path / "work"), recipe_id)
    finding = toolchain_finding(tmp_path)
    assert finding.present, finding.detail
