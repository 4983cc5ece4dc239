"""Random loss on fabric links: an nftables ruleset for the patch panel's bridges.

Every switch-to-switch link is a two-port bridge in the patch-panel namespace (see
``patch_panel``), so one ``bridge``-family table there sees every frame crossing the fabric,
on either target, without touching a switch. Its ``forward`` chain holds one rule per link
direction: frames entering the bridge from one switch's panel end (``iifname``: the kernel
here has no ``meta ibrname``, and the panel end names the direction as well as the link) that
carry UDP to port 4791 (RoCEv2 and MRC, data and acknowledgements alike) are dropped when a
random number (``numgen random``) falls below the rate. Each rule counts what it matched and
what it dropped, so a run reports the loss it got, not only the rate it asked for.

LLDP (EtherType 0x88cc) is accepted by the first rule, ahead of any drop and counted: the
controller's link discovery must see every probe, or it takes a lossy link for a cut one. The
side channel (TCP) and anything else that is not UDP 4791 is never dropped either.

Everything here builds text (with ``hostenv.nft_loss``, the benches' loss rules' builder too)
and parses JSON; the panel runs it (``PatchPanel.set_loss``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from hostenv.nft_loss import (
    check_name,
    drop_rule,
    loss_threshold,
    remove_table,
    replace_table,
    rule_counters,
)
from testbed.mininet.wiring import PatchWiring

#: The patch panel's nftables table holding the loss rules (bridge family).
LOSS_TABLE = "mrc_fabric_loss"
#: RoCEv2's UDP destination port: every MRC and RoCE packet, never the side channel.
ROCE_UDP_PORT = 4791
#: LLDP's EtherType: accepted before any drop rule (the controller's discovery runs on it).
LLDP_ETHERTYPE = 0x88CC
#: The comment of the rule that accepts and counts LLDP.
LLDP_COMMENT = "lldp"


@dataclass(frozen=True)
class LossCounters:
    """What one link direction's rule saw: UDP 4791 frames that entered (``matched``) and
    those it dropped."""

    matched: int
    dropped: int


def render_loss_ruleset(rate: float, directions: Mapping[str, str]) -> str:
    """An ``nft -f`` script that replaces the loss table with ``rate`` on every direction.

    ``directions`` maps each panel end (the ``iifname`` its frames enter the bridge by) to
    the direction's name (``"l1:3->s1"``), written as the rule's comment. The script first
    creates and deletes the table, so it applies to a panel with or without one, in one
    transaction. Rate 0 keeps the rules (counting, dropping nothing).
    """
    loss_threshold(rate)  # refuses a rate that is no probability, also with no direction
    rules = [f'ether type {LLDP_ETHERTYPE:#06x} counter accept comment "{LLDP_COMMENT}"']
    for ifname, name in sorted(directions.items(), key=lambda item: item[1]):
        check_name(ifname)
        match = f'iifname "{ifname}" udp dport {ROCE_UDP_PORT}'
        rules.append(drop_rule(match, rate, name, count_matched=True))
    return replace_table("bridge", LOSS_TABLE, "forward", "filter", rules)


def loss_directions(patches: Iterable[PatchWiring]) -> dict[str, str]:
    """Each panel end of ``patches`` -> the direction its frames travel (``"l1:3->s1"``:
    entering from l1's port 3, leaving toward s1), the names the bottleneck records use."""
    directions = {}
    for patch in patches:
        for end, far in ((patch.ends[0], patch.ends[1]), (patch.ends[1], patch.ends[0])):
            directions[end.panel_ifname] = f"{end.switch}:{end.port}->{far.switch}"
    return directions


def render_loss_removal() -> str:
    """An ``nft -f`` script that removes the loss table if there is one."""
    return remove_table("bridge", LOSS_TABLE)


def parse_loss_counters(nft_json: str) -> tuple[dict[str, LossCounters], int]:
    """Each direction's counters and the LLDP frames accepted, from ``nft -j list table
    bridge mrc_fabric_loss``: (direction name -> counters, LLDP frames)."""
    directions: dict[str, LossCounters] = {}
    lldp = 0
    for comment, counters in rule_counters(nft_json).items():
        if comment == LLDP_COMMENT and counters:
            lldp += counters[0]
        elif len(counters) == 2:
            directions[comment] = LossCounters(matched=counters[0], dropped=counters[1])
    return directions, lldp
