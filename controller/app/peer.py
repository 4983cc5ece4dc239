"""Link state from the fabric's other controller, for a backup that cannot watch links itself.

On the P4Runtime targets links are watched by LLDP probes, and only the primary may send
and take packets: a backup sees no link go down. So that its intent stays what the primary
programs (and a takeover writes nothing where nothing changed), a backup subscribes to the
other controller's status socket (``--peer-socket``) and takes its down links, from each
``link_down``/``link_up`` event as it comes and from each periodic status as a resync. The
fabric takes them only while it is primary on no switch (``FabricController.peer_down_links``);
once primary, its own probes decide. A peer that is gone (killed, not started yet) is asked
again every :data:`RETRY_S`.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from controller.app.fabric import FabricController
from controller.app.status_socket import StatusUnavailable, open_subscription
from topologies.model import LinkId

#: Seconds between the peer's statuses (a resync; each link event comes at once anyway).
STATUS_PERIOD_S = 2.0
RETRY_S = 0.5


async def follow_peer(fabric: FabricController, socket: Path) -> None:
    """Keep ``fabric``'s down links those of the controller on ``socket`` (see the module
    docs) until cancelled."""
    links = {str(link.id): link.id for link in fabric.topology.all_links}
    while True:
        down: set[LinkId] = set(fabric.down_links())
        try:
            async for message in open_subscription(socket, STATUS_PERIOD_S):
                if fold_message(message, links, down):
                    fabric.peer_down_links(frozenset(down))
        except (StatusUnavailable, OSError):
            pass
        await asyncio.sleep(RETRY_S)


def fold_message(message: dict[str, Any], links: dict[str, LinkId], down: set[LinkId]) -> bool:
    """Fold one subscription message into ``down``; whether it said anything of links."""
    kind = message.get("kind")
    if kind == "event":
        event = message.get("event") or {}
        link = links.get(str(event.get("link")))
        if link is None or event.get("event") not in ("link_down", "link_up"):
            return False
        if event["event"] == "link_down":
            down.add(link)
        else:
            down.discard(link)
        return True
    if kind == "status":
        status = message.get("status") or {}
        named = status.get("down_links")
        if not isinstance(named, list):
            return False
        down.clear()
        down.update(links[name] for name in named if name in links)
        return True
    return False
