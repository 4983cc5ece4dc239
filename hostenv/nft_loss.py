"""Random packet loss as nftables rules: the one builder of the testbed's loss rules.

A loss rule drops the packets its match selects when a random number (``numgen random``)
falls below a threshold, and counts what it dropped (optionally, with a second counter ahead
of the draw, what it matched), so a run reports the loss it got, not only the rate it asked
for. A rule set is one table with one base chain, written so that ``nft -f`` replaces any
table of that name in one transaction. Two users: the patch panel's fabric loss
(``testbed.mininet.link_loss``, bridge family) and the benches' loss on a veth pair
(``tools.veth_loss``, inet family).

Everything here builds text and parses ``nft -j`` JSON; the caller runs ``nft`` where it
wants the rules.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

#: ``numgen random mod`` this; a rate is a threshold below it (a resolution of 1e-6).
RANDOM_SPAN = 1_000_000


def loss_threshold(rate: float) -> int:
    """``rate`` (a probability, 0 to 1) as the ``numgen`` threshold; ValueError outside."""
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"a loss rate is a probability between 0 and 1, got {rate}")
    return round(rate * RANDOM_SPAN)


def drop_rule(match: str, rate: float, comment: str, count_matched: bool = False) -> str:
    """One rule: the packets ``match`` selects are dropped with probability ``rate``, counted
    (and, with ``count_matched``, counted before the draw too), under ``comment``."""
    check_name(comment)
    matched = " counter" if count_matched else ""
    return (
        f"{match}{matched} numgen random mod {RANDOM_SPAN} < {loss_threshold(rate)} "
        f'counter drop comment "{comment}"'
    )


def replace_table(family: str, table: str, hook: str, priority: str, rules: Sequence[str]) -> str:
    """An ``nft -f`` script that replaces table ``family table`` with one chain, named after
    ``hook`` and accepting by default, holding ``rules`` in order. It first creates and deletes
    the table, so it applies with or without one there, in one transaction."""
    lines = [
        f"add table {family} {table}",
        f"delete table {family} {table}",
        f"table {family} {table} {{",
        f"  chain {hook} {{",
        f"    type filter hook {hook} priority {priority}; policy accept;",
        *(f"    {rule}" for rule in rules),
        "  }",
        "}",
    ]
    return "\n".join(lines) + "\n"


def remove_table(family: str, table: str) -> str:
    """An ``nft -f`` script that removes table ``family table`` if there is one."""
    return f"add table {family} {table}\ndelete table {family} {table}\n"


def rule_counters(nft_json: str) -> dict[str, list[int]]:
    """Each commented rule's counters (packets, in the rule's order) from ``nft -j list table``
    output; an empty text (no table) has none."""
    document: dict[str, Any] = json.loads(nft_json or "{}")
    counters: dict[str, list[int]] = {}
    for item in document.get("nftables", []):
        rule = item.get("rule") if isinstance(item, dict) else None
        if not isinstance(rule, dict) or not isinstance(rule.get("comment"), str):
            continue
        counters[rule["comment"]] = [
            int(expr["counter"]["packets"])
            for expr in rule.get("expr", [])
            if isinstance(expr, dict) and isinstance(expr.get("counter"), dict)
        ]
    return counters


def check_name(text: str) -> None:
    """Names go into a script between double quotes: nothing that could end them."""
    if not text or any(c in text for c in '"\\\n;{}') or not text.isprintable():
        raise ValueError(f"{text!r} cannot be written into an nftables rule")
