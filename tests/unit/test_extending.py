"""docs/extending.md, as a specification: a congestion control and a transport variant are added
through their registries alone, and every choice list and check then offers them."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator, Mapping

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
from testbed.agents import TransferSpec
from tests.unit.agent.core.loopback import Loopback


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
