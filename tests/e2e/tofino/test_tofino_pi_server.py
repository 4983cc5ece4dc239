"""The tofino southbound against PI's P4Runtime server, the frontend a Tofino switch's
``bf_switchd --p4rt-server`` embeds: ``mrc-controller run TOPOLOGY --config`` with
``target: tofino`` and ``device_config: bf_p4rt`` wins arbitration, pushes the TNA P4Info with
the packed device config, finds the links by LLDP packet-outs and packet-ins with the TNA's
controller headers, and installs the whole intent, every write accepted, before and after link
failures, across a backup's take-over and the restarts of a controller and of a switch.

What the server proves is the control plane's half: every write is checked by PI's frontend
against the P4Info (tables, match kinds and widths, actions and parameters, action profiles and
groups, clone sessions, packet-out metadata). The device config is not loaded (PI's dummy
target; the packing is checked against bf-drivers' reader in the unit tests) and no data packet
is forwarded.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.e2e.tofino.pi_fabric import (
    REPO,
    PiFabric,
    controller_config,
    held_by,
    links_between_switches,
    sessions_held_by,
    sessions_wanted_by,
    wanted_by,
)
from topologies import LinkId
from topologies.paths import PathMode

PRESETS = sorted(path.stem for path in (REPO / "topologies" / "presets").glob("*.yaml"))
CONVERGE_S = 90.0


def _preset(name: str) -> str:
    return (REPO / "topologies" / "presets" / f"{name}.yaml").read_text()


def _in_service(controller: Any, fabric: PiFabric, after: int = 0) -> None:
    """Every switch in service and every link between switches up, as the controller says."""
    controller.events.wait_in_service(
        [switch.name for switch in fabric.topology.switches], CONVERGE_S, after
    )
    expected = len(list(links_between_switches(fabric.topology)))
    _wait(
        lambda: [link["state"] for link in controller.status()["links"]] == ["up"] * expected,
        CONVERGE_S,
        "every link found up by LLDP over packet I/O",
    )


def _wait(check: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: not within {timeout} s")
        time.sleep(0.2)


def _mismatches(
    fabric: PiFabric,
    down: frozenset[LinkId] = frozenset(),
    path_mode: PathMode = PathMode.ECMP,
    routed_down: frozenset[LinkId] | None = None,
) -> dict[str, tuple[int, int]]:
    """Switches whose read-back differs from the intent: (missing, unexpected) record counts."""
    out = {}
    for switch in fabric.topology.switches:
        held = set(held_by(fabric.topology, switch.name))
        wanted = set(wanted_by(fabric.topology, switch.name, down, path_mode, routed_down))
        if held != wanted:
            out[switch.name] = (len(wanted - held), len(held - wanted))
        sessions = sessions_held_by(fabric.topology, switch.name)
        if sessions != sessions_wanted_by(fabric.topology, switch.name, down):
            out[f"{switch.name} clone sessions"] = (len(sessions), 0)
    return out


def _holds_intent(fabric: PiFabric, **kwargs: Any) -> None:
    _wait(lambda: not _mismatches(fabric, **kwargs), 30, "every switch holds its intent")


def _no_write_refused(*controllers: Any) -> None:
    refused = [e for c in controllers for e in c.events.named("write_failed")]
    assert refused == [], f"the server refused writes: {refused[:3]}"


def _writes(controller: Any, after: int = 0) -> int:
    return sum(
        e["inserts"] + e["modifies"] + e["deletes"]
        for e in controller.events.events[after:]
        if e["event"] == "program"
    )


def _cut_and_restore(
    fabric: PiFabric, controller: Any, link: LinkId, path_mode: PathMode, routing: str
) -> None:
    """Cut ``link``: the controller sees its probes lost and reroutes as ``routing`` says; the
    switches then hold that intent. Restore it: they hold the full intent again."""
    start = controller.events.mark()
    fabric.cut(link)
    controller.events.wait_for("link_down", 30, lambda e: e["link"] == str(link), start)
    down = frozenset({link})
    routed = frozenset() if routing == "static" else down
    if routing.startswith("converge"):
        controller.events.wait_for("failover", 30, lambda e: e.get("phase") == "converged", start)
    _holds_intent(fabric, down=down, path_mode=path_mode, routed_down=routed)
    start = controller.events.mark()
    fabric.restore(link)
    controller.events.wait_for("link_up", 30, lambda e: e["link"] == str(link), start)
    if routing.startswith("converge"):
        controller.events.wait_for("failover", 30, lambda e: e.get("phase") == "converged", start)
    _holds_intent(fabric, path_mode=path_mode)


@pytest.mark.parametrize("path_mode", list(PathMode))
@pytest.mark.parametrize("preset", PRESETS)
def test_every_preset_and_path_mode_is_installed_whole_and_rerouted_with_no_write_refused(
    fabrics, controllers, program, tmp_path, preset, path_mode
):
    fabric = fabrics(_preset(preset))
    config = controller_config(tmp_path / "ctl.yaml", program, path_mode=path_mode.value)
    controller = controllers(fabric, config)
    _in_service(controller, fabric)
    _holds_intent(fabric, path_mode=path_mode)
    links = list(links_between_switches(fabric.topology))
    for link in (links[0], links[-1]):
        _cut_and_restore(fabric, controller, link, path_mode, "reactive")
    _no_write_refused(controller)


@pytest.mark.parametrize("routing", ["static", "converge:1"])
@pytest.mark.parametrize("preset", PRESETS)
def test_each_routing_policy_programs_what_it_says_through_a_cut(
    fabrics, controllers, program, tmp_path, preset, routing
):
    """``reactive``, the default, is the matrix above."""
    fabric = fabrics(_preset(preset))
    controller = controllers(fabric, controller_config(tmp_path / "c.yaml", program, routing))
    _in_service(controller, fabric)
    link = next(iter(links_between_switches(fabric.topology)))
    _cut_and_restore(fabric, controller, link, PathMode.ECMP, routing)
    _no_write_refused(controller)


def test_a_backup_takes_over_without_writing_then_reroutes_a_cut(
    fabrics, controllers, program, tmp_path
):
    fabric = fabrics(_preset("leaf-spine"))
    config = controller_config(tmp_path / "c.yaml", program)
    primary = controllers(fabric, config, "primary", 20)
    _in_service(primary, fabric)
    backup = controllers(fabric, config, "backup", 10)
    names = [switch.name for switch in fabric.topology.switches]
    for name in names:
        backup.events.wait_for("switch_connected", CONVERGE_S, lambda e, n=name: e["switch"] == n)
    assert {e["role"] for e in backup.events.named("switch_connected")} == {"backup"}
    assert backup.events.named("program") == []
    primary.kill()
    backup.events.wait_in_service(names, CONVERGE_S)
    assert _writes(backup) == 0, "the backup rewrote state on take-over"
    _holds_intent(fabric)
    _in_service(backup, fabric)
    _cut_and_restore(
        fabric,
        backup,
        next(iter(links_between_switches(fabric.topology))),
        PathMode.ECMP,
        "reactive",
    )
    _no_write_refused(primary, backup)


def test_a_restarted_controller_reconciles_by_reading_back_and_writes_nothing(
    fabrics, controllers, program, tmp_path
):
    fabric = fabrics(_preset("leaf-spine"))
    config = controller_config(tmp_path / "c.yaml", program)
    first = controllers(fabric, config, "first")
    _in_service(first, fabric)
    first.kill()
    second = controllers(fabric, config, "second")
    _in_service(second, fabric)
    programs = second.events.named("program")
    assert programs and all(e["read_back"] and e["ok"] for e in programs)
    assert _writes(second) == 0, "the restarted controller rewrote state"
    _holds_intent(fabric)
    _no_write_refused(first, second)


def test_a_restarted_switch_gets_the_pipeline_and_its_whole_intent_again(
    fabrics, controllers, program, tmp_path
):
    fabric = fabrics(_preset("leaf-spine"))
    controller = controllers(fabric, controller_config(tmp_path / "c.yaml", program))
    _in_service(controller, fabric)
    start = controller.events.mark()
    fabric.stop_switch("l2")
    controller.events.wait_for("switch_disconnected", 30, lambda e: e["switch"] == "l2", start)
    fabric.start_switch("l2")
    controller.events.wait_in_service(["l2"], CONVERGE_S, start)
    _holds_intent(fabric)
    assert _writes(controller, start) >= len(held_by(fabric.topology, "l2"))
    _no_write_refused(controller)
