"""The page's sources on their own: a poll copies the testbed's cut links and jobs into the
page's state, and an agent that cannot be reached, or refuses, is shown unavailable with the
reason while the others are still read."""

from __future__ import annotations

import asyncio
import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from testbed.live.sources import AgentPoller
from testbed.live.state import LiveState
from topologies import load_topology


@pytest.fixture
def short_dir() -> Iterator[Path]:
    # Unix socket paths must stay short: pytest's tmp_path can be too long.
    directory = Path(tempfile.mkdtemp(prefix="live-", dir="/tmp"))
    yield directory
    shutil.rmtree(directory, ignore_errors=True)


async def _agent(path: Path, reply: dict) -> asyncio.AbstractServer:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(json.dumps(reply).encode() + b"\n")
        await writer.drain()
        writer.close()

    return await asyncio.start_unix_server(answer, str(path))


def test_a_poll_reads_every_agent_and_names_those_that_do_not_answer(short_dir):
    state = LiveState(load_topology("leaf-spine"), can_restart=False)
    sockets = {host: short_dir / f"{host}.sock" for host in ("h1", "h2", "h3", "h4")}
    poller = AgentPoller(
        state,
        sockets,
        cut_links=lambda: frozenset({"l1:3<->s1:1"}),
        jobs=lambda: [{"id": 1}],
        controllers=lambda: {"primary": "dead", "backup": "primary"},
    )

    async def body() -> None:
        answering = await _agent(sockets["h1"], {"ok": True, "result": {"planes": ["10.0.1.1"]}})
        refusing = await _agent(sockets["h2"], {"ok": False, "error": "busy"})
        try:
            await poller.poll()
        finally:
            answering.close()
            refusing.close()

    asyncio.run(body())
    assert state.agents["h1"] == {"ok": True, "error": None, "planes": ["10.0.1.1"]}
    assert state.agents["h2"] == {"ok": False, "error": "the agent refused: busy"}
    controllers = state.update_json()["controller"]["controllers"]
    assert controllers == {"primary": "dead", "backup": "primary"}
    assert state.agents["h3"] == {"ok": False, "error": "[Errno 2] No such file or directory"}
    assert state.cut == {"l1:3<->s1:1"} and state.jobs == [{"id": 1}]
