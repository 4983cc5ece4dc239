"""docs/extending.md, as a specification: a congestion control, a transport variant and a switch
target are added through their registries alone, and every choice list and check then offers
them."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.api.cc_config import cc_algorithms, cc_config
from agent.cli.perf_main import build_parser
from agent.core import MrcConfig
from agent.core.cc import create_congestion_control
from agent.core.cc.base import CongestionControl
from agent.core.cc_registry import (
    CongestionControlSpec,
    congestion_control_names,
    register_congestion_control,
    unregister_congestion_control,
)
from agent.core.events import MessageAcked
from agent.io.config_overrides import with_overrides
from agent.io.control_protocol import PerfRequest, parse_request
from agent.io.errors import ProtocolError, UsageError
from agent.io.transport import (
    Engine,
    Transport,
    check_transport_options,
    mrc_config_for,
    parse_transport,
    register_transport,
    transport_names,
    unregister_transport,
)
from collective.job import JobSpec
from collective.plans import Collective
from controller import cli as controller_cli
from controller.app.config import ConfigError, ControllerConfig, load_config
from controller.app.eventlog import EventLog
from controller.app.runtime import build_fabric, build_southbound, check_compatible
from controller.intent.model import SwitchIntent
from controller.southbound.interface import (
    LinkEvidence,
    ProgramResult,
    SouthboundEvents,
    SwitchCounters,
    SwitchRole,
)
from controller.southbound.target import (
    Capabilities,
    ControllerTarget,
    EcnMarking,
    Feature,
    TargetSettingsError,
)
from controller.targets import register_target, target_names, unregister_target
from experiments.capabilities import target_facts
from testbed import controller_run
from testbed.agents import TransferSpec
from testbed.live.actions import TestbedActions, next_hops_of
from testbed.live.paths import KernelNextHops
from testbed.mininet import cli as mininet_cli
from testbed.mininet import switch_target as switch_target_module
from testbed.mininet.switch_kind import SwitchKind
from testbed.mininet.switch_target import (
    SwitchTarget,
    register_switch_target,
    switch_target,
    switch_target_names,
    unregister_switch_target,
)
from testbed.mininet.wiring import plan_wiring
from testbed.targets import (
    PathModeUnavailable,
    check_path_mode,
    choose_target,
    default_target,
    differences,
)
from tests.unit.agent.core.loopback import Loopback
from tools import bench_controller
from tools.doctor import target_findings
from topologies import Topology, load_topology
from topologies.paths import PathMode


class HalfWindow(CongestionControl):
    """A dummy controller: half the initial window, whatever happens."""

    name = "half"

    def __init__(self, window: int) -> None:
        self._window = window

    @property
    def window(self) -> int:
        return self._window

    def on_ack(self, now, acked_bytes, rtt, base_rtt, ecn) -> None:
        pass

    def on_trim(self, now, last_hop, base_rtt) -> None:
        pass

    def on_timeout(self, now) -> None:
        pass


def _half_profile(base: MrcConfig, params: Mapping[str, float]) -> MrcConfig:
    return dataclasses.replace(base, congestion_control="half")


@pytest.fixture()
def half_window() -> Iterator[CongestionControlSpec]:
    spec = CongestionControlSpec(
        "half", "half the initial window", lambda c: HalfWindow(c.initial_window // 2),
        "example-half-window", _half_profile,
    )  # fmt: skip
    register_congestion_control(spec)
    yield spec
    unregister_congestion_control("half")


@pytest.fixture()
def mrc4() -> Iterator[Transport]:
    transport = register_transport(Transport("mrc4", Engine.MRC, "MRC on four EVs", evs=4))
    yield transport
    unregister_transport("mrc4")


def test_a_registered_congestion_control_is_offered_everywhere_and_carries_data(half_window):
    assert "half" in congestion_control_names()
    config = MrcConfig(ev_set_size=8, congestion_control="half")
    assert isinstance(create_congestion_control(config), HalfWindow)
    assert build_parser().parse_args(["--cc", "half", "--to", "10.0.0.2"]).cc == "half"
    assert with_overrides(MrcConfig(), cc="half").congestion_control == "half"
    assert "example-half-window" in cc_algorithms()
    assert cc_config(MrcConfig(), "example-half-window", {}).congestion_control == "half"
    link = Loopback.create(config)
    msn = link.post(b"x" * 20000)
    link.run(20e-3)
    assert [e.msn for e in link.events_a if isinstance(e, MessageAcked)] == [msn]


def test_an_unregistered_congestion_control_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="unknown congestion control 'half': choose nscc"):
        MrcConfig(congestion_control="half")
    with pytest.raises(UsageError, match="unknown congestion control"):
        with_overrides(MrcConfig(), cc="half")


def test_a_name_taken_is_refused(half_window):
    with pytest.raises(ValueError, match="taken"):
        register_congestion_control(half_window)
    with pytest.raises(ValueError, match="registered already"):
        register_transport(Transport("single", Engine.MRC, "again", evs=1))


def test_a_registered_transport_is_offered_everywhere_with_its_fixed_ev_count(mrc4):
    assert "mrc4" in transport_names()
    assert parse_transport("mrc4") is mrc4 and mrc4.on_wire == "mrc"
    assert (
        build_parser().parse_args(["--transport", "mrc4", "--to", "10.0.0.2"]).transport == "mrc4"
    )
    assert mrc_config_for(mrc4, MrcConfig()).ev_set_size == 4
    with pytest.raises(UsageError, match="--transport mrc4 is MRC on 4 EVs"):
        check_transport_options(mrc4, evs=8)
    request = parse_request({"op": "perf", "to": "10.0.0.2", "transport": "mrc4"})
    assert isinstance(request, PerfRequest) and request.transport == "mrc4"
    JobSpec(Collective.ALLREDUCE, 1 << 20, transport="mrc4").check(4)
    assert TransferSpec("h1", "h2", transport="mrc4").request_options()["transport"] == "mrc4"


def test_an_unregistered_transport_is_refused_by_each_entry_point():
    with pytest.raises(UsageError, match="unknown transport 'mrc4': choose mrc, single, roce"):
        parse_transport("mrc4")
    with pytest.raises(ValueError, match="unknown transport"):
        TransferSpec("h1", "h2", transport="mrc4").request_options()
    with pytest.raises(ProtocolError, match="unknown transport 'mrc4'"):
        parse_request({"op": "perf", "to": "10.0.0.2", "transport": "mrc4"})


class DummySouthbound:
    """A dummy southbound: every switch is ours at once, takes any intent, counts nothing."""

    def __init__(self, switches: Sequence[str]) -> None:
        self.switches = tuple(switches)

    async def run(self, events: SouthboundEvents) -> None:
        for switch in self.switches:
            events.switch_connected(switch, SwitchRole.PRIMARY)
        await asyncio.Event().wait()

    async def program(self, intent: SwitchIntent, *, read_back: bool = False) -> ProgramResult:
        return ProgramResult(intent.switch, read_back=read_back)

    async def send_frames(self, switch: str, frames: Sequence[tuple[int, bytes]]) -> int:
        return 0

    async def read_counters(
        self, switch: str, ports: Sequence[int], members: Sequence[int]
    ) -> SwitchCounters:
        return SwitchCounters(not_counted=("a dummy switch counts nothing",))


def _no_srv6(mode: PathMode | None) -> str | None:
    return "path mode srv6: a dummy switch has no uSID table" if mode is PathMode.SRV6 else None


def _check_dummy(topology: Topology, settings: ControllerConfig) -> None:
    refusal = _no_srv6(settings.path_mode)
    if refusal is not None:
        raise TargetSettingsError(refusal)


DUMMY_CAPABILITIES = Capabilities(
    lacks={
        Feature.TRIMMING: "a dummy switch drops what it cannot queue",
        Feature.RESTART: "a dummy switch is a namespace, with no process to restart",
    },
    ecn=EcnMarking(),
    link_evidence=LinkEvidence.CARRIER,
    link_source="the dummy switch's carrier",
    path_mode_refusal=_no_srv6,
)


@pytest.fixture()
def dummy_target() -> Iterator[SwitchTarget]:
    register_target(
        ControllerTarget[ControllerConfig](
            name="dummy",
            summary="switches that forward nothing, for tests",
            capabilities=DUMMY_CAPABILITIES,
            check=_check_dummy,
            build=lambda topology, _: DummySouthbound([s.name for s in topology.switches]),
        )
    )
    # Its testbed side reuses the linux target's switch kind: a namespace per switch.
    testbed_side = register_switch_target(
        SwitchTarget("dummy", SwitchKind.KERNEL, "Mininet, dummy switches", "dummy switches")
    )
    yield testbed_side
    unregister_switch_target("dummy")
    unregister_target("dummy")


@pytest.fixture()
def leaf_spine() -> Topology:
    return load_topology("leaf-spine")


def test_a_registered_target_is_offered_by_the_controller(dummy_target, leaf_spine, tmp_path):
    assert "dummy" in target_names()
    run = controller_cli._parser().parse_args(["run", "leaf-spine", "--target", "dummy"])
    assert run.target == "dummy"
    (tmp_path / "c.yaml").write_text("target: dummy\n")
    assert load_config(tmp_path / "c.yaml").target == "dummy"
    config = ControllerConfig().with_overrides(target="dummy")
    check_compatible(leaf_spine, config)
    with pytest.raises(ConfigError, match="a dummy switch has no uSID table"):
        check_compatible(leaf_spine, dataclasses.replace(config, path_mode=PathMode.SRV6))
    assert isinstance(build_southbound(leaf_spine, config), DummySouthbound)
    fabric = build_fabric(leaf_spine, config, EventLog.open(None))
    assert fabric.discovery.evidence is LinkEvidence.CARRIER


def test_a_registered_target_is_offered_by_the_testbed(dummy_target, leaf_spine, monkeypatch):
    assert "dummy" in switch_target_names() and switch_target("dummy") is dummy_target
    up = mininet_cli.build_parser().parse_args(["up", "leaf-spine", "--target", "dummy"])
    assert up.target == "dummy"
    monkeypatch.setattr(switch_target_module, "machine_problems", lambda kind: [])
    assert choose_target("dummy", leaf_spine).announcement == "target dummy: as asked"
    assert default_target().target.name in ("bmv2", "linux")  # auto never takes it
    wiring = plan_wiring(leaf_spine, "mn0a1b", dummy_target.kind)
    assert wiring.switch_netns["s1"] == "mn0a1b-s1"
    command = controller_run.controller_command(
        "leaf-spine", Path("c.sock"), Path("c.jsonl"), "mn0a1b", target="dummy"
    )
    assert command[command.index("--target") + 1] == "dummy"
    assert command[command.index("--netns-prefix") + 1] == "mn0a1b"
    with pytest.raises(PathModeUnavailable, match="no uSID table"):
        check_path_mode(dummy_target, PathMode.SRV6)
    testbed = SimpleNamespace(
        capabilities=dummy_target.capabilities,
        network=SimpleNamespace(kind=dummy_target.kind),
        path_mode=None,
        prefix="mn0a1b",
    )
    assert not TestbedActions(testbed).can_restart  # a namespace has no process to restart
    assert isinstance(next_hops_of(testbed), KernelNextHops)


def test_a_registered_targets_capabilities_reach_every_lacks_line(dummy_target):
    lacks = [
        "no packet trimming: a dummy switch drops what it cannot queue",
        "no ECN marking",
        "no switch restart: a dummy switch is a namespace, with no process to restart "
        "(`restart` is refused)",
        "link state from the dummy switch's carrier, not LLDP probes",
    ]
    assert differences("dummy", None) == lacks
    facts = target_facts("dummy", None)
    assert (facts.trimming, facts.ecn_marking, facts.ecn_by) == (False, False, None)
    assert list(facts.lacks) == lacks
    finding = next(f for f in target_findings(None) if f.name == "target dummy")
    assert list(finding.notes) == lacks
    command = bench_controller.controller_command(
        Path("t.yaml"), Path("w"), Path("e.jsonl"), 10, "dummy", "mn0a1b"
    )
    assert "--probe-interval-ms" not in command  # it watches carrier
    assert bench_controller.evidence_account("dummy").startswith("the dummy switch's carrier: ")


def test_an_unregistered_target_is_refused_by_each_entry_point(leaf_spine):
    with pytest.raises(ConfigError, match="target must be one of bmv2, linux, tofino, not 'dummy'"):
        ControllerConfig().with_overrides(target="dummy")
    with pytest.raises(ValueError, match="unknown target 'dummy'; targets: bmv2, linux, auto"):
        choose_target("dummy", leaf_spine)
    with pytest.raises(ValueError, match="unknown switch target 'dummy'; targets: bmv2, linux"):
        switch_target("dummy")
    with pytest.raises(ValueError, match="register its controller side first"):
        register_switch_target(SwitchTarget("dummy", SwitchKind.KERNEL, "", ""))
    with pytest.raises(ValueError, match="'tofino' is hardware: there is no Tofino switch"):
        register_switch_target(SwitchTarget("tofino", SwitchKind.BMV2, "", ""))


def test_a_target_declaring_restart_on_switches_without_a_process_is_refused(leaf_spine):
    register_target(
        ControllerTarget[ControllerConfig](
            name="dummy",
            summary="claims restart",
            capabilities=dataclasses.replace(DUMMY_CAPABILITIES, lacks={}),
            check=_check_dummy,
            build=lambda topology, _: DummySouthbound([s.name for s in topology.switches]),
        )
    )
    try:
        with pytest.raises(ValueError, match="no process to restart"):
            register_switch_target(SwitchTarget("dummy", SwitchKind.KERNEL, "", ""))
    finally:
        unregister_switch_target("dummy")
        unregister_target("dummy")
