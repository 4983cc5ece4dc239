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

Everything here builds text and parses JSON; the panel runs it (``PatchPanel.set_loss``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from testbed.mininet.wiring import PatchWiring

#: The patch panel's nftables table holding the loss rules (bridge family).
LOSS_TABLE = "mrc_fabric_loss"
#: RoCEv2's UDP destination port: every MRC and RoCE packet, never the side channel.
ROCE_UDP_PORT = 4791
#: LLDP's EtherType: accepted before any drop rule (the controller's discovery runs on it).
LLDP_ETHERTYPE = 0x88CC
#: ``numgen random mod`` this; a rate is a threshold below it (a resolution of 1e-6).
RANDOM_SPAN = 1_000_000
#: The comment of the rule that accepts and counts LLDP.
LLDP_COMMENT = "lldp"


@dataclass(frozen=True)
class LossCounters:
    """What one link direction's rule saw: UDP 4791 frames that entered (``matched``) and
    those it dropped."""

    matched: int
    dropped: int


def loss_threshold(rate: float) -> int:
    """``rate`` (a probability, 0 to 1) as the ``numgen`` threshold; ValueError outside."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"a loss rate is a probability between 0 and 1, got {rate}")
    return round(rate * RANDOM_SPAN)


def render_loss_ruleset(rate: float, directions: Mapping[str, str]) -> str:
    """An ``nft -f`` script that replaces the loss table with ``rate`` on every direction.

    ``directions`` maps each panel end (the ``iifname`` its frames enter the bridge by) to
    the direction's name (``"l1:3->s1"``), written as the rule's comment. The script first
    creates and deletes the table, so it applies to a panel with or without one, in one
    transaction. Rate 0 keeps the rules (counting, dropping nothing).
    """
    threshold = loss_threshold(rate)
    lines = [
        f"add table bridge {LOSS_TABLE}",
        f"delete table bridge {LOSS_TABLE}",
        f"table bridge {LOSS_TABLE} {{",
        "  chain forward {",
        "    type filter hook forward priority filter; policy accept;",
        f'    ether type {LLDP_ETHERTYPE:#06x} counter accept comment "{LLDP_COMMENT}"',
    ]
    for ifname, name in sorted(directions.items(), key=lambda item: item[1]):
        _check_name(ifname)
        _check_name(name)
        lines.append(
            f'    iifname "{ifname}" udp dport {ROCE_UDP_PORT} counter '
            f"numgen random mod {RANDOM_SPAN} < {threshold} counter drop "
            f'comment "{name}"'
        )
    lines += ["  }", "}"]
    return "\n".join(lines) + "\n"


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
    return f"add table bridge {LOSS_TABLE}\ndelete table bridge {LOSS_TABLE}\n"


def parse_loss_counters(nft_json: str) -> tuple[dict[str, LossCounters], int]:
    """Each direction's counters and the LLDP frames accepted, from ``nft -j list table
    bridge mrc_fabric_loss``: (direction name -> counters, LLDP frames)."""
    document: dict[str, Any] = json.loads(nft_json or "{}")
    directions: dict[str, LossCounters] = {}
    lldp = 0
    for item in document.get("nftables", []):
        rule = item.get("rule") if isinstance(item, dict) else None
        if not isinstance(rule, dict):
            continue
        counters = [
            int(expr["counter"]["packets"])
            for expr in rule.get("expr", [])
            if isinstance(expr, dict) and isinstance(expr.get("counter"), dict)
        ]
        comment = rule.get("comment")
        if comment == LLDP_COMMENT and counters:
            lldp += counters[0]
        elif isinstance(comment, str) and len(counters) == 2:
            directions[comment] = LossCounters(matched=counters[0], dropped=counters[1])
    return directions, lldp


def _check_name(text: str) -> None:
    """Names go into the script between double quotes: nothing that could end them."""
    if not text or any(c in text for c in '"\\\n;{}') or not text.isprintable():
        raise ValueError(f"{text!r} cannot be written into an nftables rule")
