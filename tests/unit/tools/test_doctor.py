"""`make doctor` says whether the P4 toolchain is at the pinned commits and how to get it."""

from __future__ import annotations

import json

from tools.doctor import toolchain_finding
from tools.toolchain.pins import load_pins
from tools.toolchain.plan import Request, make_plan, stamp_content, stamp_path
from tools.toolchain.recipes import recipe_id


def test_an_empty_prefix_is_reported_missing_with_make_toolchain_to_get_it(tmp_path):
    finding = toolchain_finding(tmp_path)
    assert not finding.present
    assert "pi: not installed" in finding.detail and "p4c: not installed" in finding.detail
    assert finding.how_to_get.startswith("make toolchain")


def test_a_prefix_with_every_component_stamped_at_its_pins_is_reported_present(tmp_path):
    pins = load_pins()
    request = Request(tmp_path, None, False, tmp_path / "work")
    for planned in make_plan(pins, request, recipe_id).components:
        for name in planned.component.provides:
            (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / name).write_text("")
        stamp = stamp_path(tmp_path, planned.component.name)
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(json.dumps(stamp_content(pins, planned, False)))
    finding = toolchain_finding(tmp_path)
    assert finding.present, finding.detail
