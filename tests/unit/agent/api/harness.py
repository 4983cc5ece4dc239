"""Two agents in this process on the deterministic in-memory link, each with its control
socket and host API, and applications bound to them in process.

Every wait of an application turns both agents one step of a ``SteppedClock``, so what the
core sees (times, RTTs, timeouts) is the same however loaded the machine is. ``hang_guard``
counts steps only to stop a test that would never finish.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from agent.api.client import QP, Context
from agent.api.controller import Controller
from agent.api.inprocess import controller_in_process, open_in_process
from agent.api.service import ApiService
from agent.api.types import Access, QpState
from agent.core import MrcConfig, OutgoingDatagram
from agent.io.control_server import ControlServer
from agent.io.runtime import AgentRuntime
from tests.unit.agent.io.memory_link import PLANE_A, PLANE_B, SteppedClock, memory_link

STEP = 10e-6


class Agents:
    """Agents ``a`` and ``b`` joined by a memory link; ``pump`` turns both one step."""

    def __init__(
        self, tmp_path: Path, config: MrcConfig | None = None, hang_guard: int = 2_000_000
    ) -> None:
        self.clock = SteppedClock()
        self.link_a, self.link_b = memory_link()
        config = config or MrcConfig()
        self.a = AgentRuntime([PLANE_A], config, datagram_io=self.link_a, seed=1, clock=self.clock)
        self.b = AgentRuntime([PLANE_B], config, datagram_io=self.link_b, seed=2, clock=self.clock)
        self.server_a = ControlServer(self.a, str(tmp_path / "a.sock"))
        self.server_b = ControlServer(self.b, str(tmp_path / "b.sock"))
        self.api_a = ApiService(self.a)
        self.api_a.install(self.server_a)
        self.api_b = ApiService(self.b)
        self.api_b.install(self.server_b)
        self.steps = 0
        self.hang_guard = hang_guard

    def pump(self) -> None:
        """One step of the clock, one turn of each agent."""
        self.steps += 1
        if self.steps > self.hang_guard:
            raise AssertionError(f"not done after {self.hang_guard} steps")
        self.clock.advance(STEP)
        self.a.turn(max_wait=0.0)
        self.b.turn(max_wait=0.0)

    def run(self, seconds: float) -> None:
        """Let ``seconds`` of the stepped clock pass."""
        for _ in range(round(seconds / STEP)):
            self.pump()

    def run_until(self, done: Callable[[], bool]) -> None:
        """Pump until ``done()``."""
        while not done():
            self.pump()

    def context(self, side: str) -> Context:
        """An application on agent ``side`` ("a" or "b")."""
        return open_in_process(self.server_a if side == "a" else self.server_b, self.pump)

    def controller(self, side: str) -> Controller:
        """A controller on agent ``side``."""
        return controller_in_process(self.server_a if side == "a" else self.server_b, self.pump)

    def drop(self, side: str, rule: Callable[[OutgoingDatagram], bool] | None) -> None:
        """Lose what ``side`` sends that ``rule`` picks (None: lose nothing)."""
        (self.link_a if side == "a" else self.link_b).drop = rule

    def close(self) -> None:
        self.a.close()
        self.b.close()


class Endpoint:
    """One application's context, CQ, PD, region and QP, ready to connect."""

    def __init__(self, context: Context, region: int = 1 << 20, **qp_options: object) -> None:
        self.ctx = context
        self.channel = context.create_comp_channel()
        self.cq = context.create_cq(256, channel=self.channel)
        self.pd = context.alloc_pd()
        self.mr = self.pd.reg_mr(region, Access.LOCAL_WRITE | Access.REMOTE_WRITE)
        self.qp = context.create_qp(self.pd, self.cq, self.cq, **qp_options)  # type: ignore[arg-type]

    def info(self) -> dict[str, object]:
        """What the peer needs (the OCP examples' ``struct wire``)."""
        return {
            "qpn": self.qp.qp_num,
            "psn": 0x100 + self.qp.qp_num % 1000,
            "rkey": self.mr.rkey,
            "addr": self.mr.addr,
            "gid": self.ctx.device.ports[0],
        }


def connect(a: Endpoint, b: Endpoint, ev_profile_id: int = 0, cc_profile_id: int = 0) -> None:
    """Both QPs RESET -> INIT -> RTR -> RTS towards each other; ``a`` with the profiles given
    (its agent's), ``b`` with its agent's own."""
    a.qp.modify(QpState.INIT, ev_profile_id=ev_profile_id, cc_profile_id=cc_profile_id)
    b.qp.modify(QpState.INIT)
    for me, peer in ((a, b), (b, a)):
        info = peer.info()
        me.qp.modify(QpState.RTR, dest_qp_num=info["qpn"], rq_psn=info["psn"], dgid=info["gid"])  # type: ignore[arg-type]
    for me in (a, b):
        me.qp.modify(QpState.RTS, sq_psn=me.info()["psn"])  # type: ignore[arg-type]


def poll_until(qp_or_cq: object, count: int, agents: Agents) -> list:
    """Poll a CQ until ``count`` completions came."""
    cq = qp_or_cq.send_cq if isinstance(qp_or_cq, QP) else qp_or_cq
    out: list = []
    while len(out) < count:
        out += cq.poll(count - len(out))  # type: ignore[attr-defined]
        if len(out) < count:
            agents.pump()
    return out
