"""The patch panel: one namespace where every switch-to-switch link is patched through a bridge.

A direct veth between two BMv2 switches cannot be cut safely: setting either end down freezes
the BMv2 bound to it (behavioral-model issue 1215), and Mininet's ``link s1 s2 down`` sets both.
Each switch's veth therefore ends here, the two panel ends of a link joined by a bridge; a cut
sets the panel ends down, so both switches see only carrier loss and their ``watch_port``s react.

Each bridge is a plain two-port hub: no STP (ports forward at once), no learning (a frame a
controller sends with any source MAC never teaches it to drop the next one), no multicast
snooping, and LLDP forwarded (``group_fwd_mask``: bridges drop 01:80:c2:00:00:0e by default,
and the controller's link discovery runs on LLDP). IPv6 is off in the panel, so the kernel adds
no chatter of its own to the links.

Random loss on the links (``set_loss``) is an nftables table in the panel's namespace, one
rule per link direction (``link_loss``): the bridges are the one place every fabric frame
crosses on either target.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from typing import Any

from mininet.node import Node

from testbed.mininet.host_config import offloads_off, sysctl
from testbed.mininet.link_loss import (
    LOSS_TABLE,
    LossCounters,
    loss_directions,
    parse_loss_counters,
    render_loss_removal,
    render_loss_ruleset,
)
from testbed.mininet.system import attach_netns, run_all_in, run_in
from testbed.mininet.wiring import PatchWiring

#: Bit 14 of the group forwarding mask: 01:80:c2:00:00:0e, the LLDP destination.
LLDP_GROUP_FWD_MASK = 1 << 14


class PatchPanel(Node):  # type: ignore[misc]  # Mininet has no type hints
    """The namespace holding every patched link's bridge."""

    def __init__(self, name: str, netns: str, **params: Any) -> None:
        super().__init__(name, inNamespace=True, **params)
        self.netns = netns
        try:
            attach_netns(netns, self.pid)
        except BaseException:
            # Unnamed, the namespace would escape the prefix sweep: end its shell now.
            self.terminate()
            raise
        # Interfaces made from now on inherit "default": no IPv6 on any panel port.
        run_all_in(
            netns,
            [
                ("ip", "link", "set", "dev", "lo", "up"),
                sysctl("net.ipv6.conf.all.disable_ipv6", 1),
                sysctl("net.ipv6.conf.default.disable_ipv6", 1),
            ],
        )

    def join(self, patch: PatchWiring) -> None:
        """Bridge the two panel ends of a link and bring the link up."""
        commands = [
            (
                "ip",
                "link",
                "add",
                "name",
                patch.bridge,
                "type",
                "bridge",
                "stp_state",
                "0",
                "mcast_snooping",
                "0",
                "group_fwd_mask",
                str(LLDP_GROUP_FWD_MASK),
            ),
            ("ip", "link", "set", "dev", patch.bridge, "up"),
        ]
        for end in patch.ends:
            commands += [
                offloads_off(end.panel_ifname),
                ("ip", "link", "set", "dev", end.panel_ifname, "master", patch.bridge),
                (
                    *("ip", "link", "set", "dev", end.panel_ifname),
                    *("type", "bridge_slave", "learning", "off"),
                ),
            ]
        run_all_in(self.netns, commands)
        self.restore(patch)

    def cut(self, patch: PatchWiring) -> None:
        """Set both panel ends down: each switch's own end reads carrier loss."""
        run_all_in(
            self.netns,
            [("ip", "link", "set", "dev", end.panel_ifname, "down") for end in patch.ends],
        )

    def restore(self, patch: PatchWiring) -> None:
        """Bring both panel ends up again: carrier returns on both switches."""
        run_all_in(
            self.netns,
            [("ip", "link", "set", "dev", end.panel_ifname, "up") for end in patch.ends],
        )

    def set_loss(self, rate: float, patches: Iterable[PatchWiring]) -> None:
        """Drop UDP 4791 frames crossing ``patches`` at ``rate`` (a probability) in each
        direction, LLDP never; replaces any earlier setting and its counters. Rate 0 keeps
        counting and drops nothing (``clear_loss`` removes the rules)."""
        self._apply(render_loss_ruleset(rate, loss_directions(patches)))

    def clear_loss(self) -> None:
        """Remove the loss rules (nothing is dropped or counted); fine when there are none."""
        self._apply(render_loss_removal())

    def loss_counters(self) -> tuple[dict[str, LossCounters], int]:
        """Per link direction what the loss rules matched and dropped since ``set_loss``, and
        the LLDP frames they let through; ({}, 0) without loss rules."""
        tables = run_in(self.netns, ["nft", "-j", "list", "tables", "bridge"])
        if LOSS_TABLE not in tables:
            return {}, 0
        return parse_loss_counters(
            run_in(self.netns, ["nft", "-j", "list", "table", "bridge", LOSS_TABLE])
        )

    def _apply(self, script: str) -> None:
        with tempfile.NamedTemporaryFile("w", prefix="mrc-loss-", suffix=".nft") as file:
            file.write(script)
            file.flush()
            run_in(self.netns, ["nft", "-f", file.name])
