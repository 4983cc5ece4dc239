"""Loss on the veth lab: the nftables rule drops UDP entering the receiving namespace at the
rate asked, and its drop counter is what the benches report (the rule's application needs
root: ``make bench-agent`` and the e2e tests)."""

from __future__ import annotations

import json

import pytest

from tools import veth_loss
from tools.veth_loss import LOSS_COMMENT, add_random_loss, random_loss_drops


@pytest.mark.parametrize("percent", [0.0, -1.0, 100.5])
def test_a_loss_that_is_no_percentage_is_refused(percent):
    with pytest.raises(ValueError, match=r"\(0, 100\] percent"):
        add_random_loss("nowhere", percent)


def test_the_rule_drops_udp_only_at_the_rate_asked_in_a_raw_prerouting_chain(monkeypatch):
    scripts: list[tuple[str, str]] = []

    class Done:
        returncode = 0
        stderr = ""

    def nft(netns: str, script: str) -> Done:
        scripts.append((netns, script))
        return Done()

    monkeypatch.setattr(veth_loss, "_nft", nft)
    add_random_loss("rx", 1.0)
    ((netns, script),) = scripts
    assert netns == "rx"
    assert "type filter hook prerouting priority raw; policy accept;" in script
    assert (
        f'meta l4proto udp numgen random mod 1000000 < 10000 counter drop comment "{LOSS_COMMENT}"'
        in script
    )


def test_the_drops_are_the_rules_counter_and_none_without_a_rule(monkeypatch):
    rule = {"comment": LOSS_COMMENT, "expr": [{"counter": {"packets": 42}}, {"drop": None}]}
    listing = json.dumps({"nftables": [{"rule": rule}]})
    monkeypatch.setattr(veth_loss, "run", lambda *args, **kwargs: listing)
    assert random_loss_drops("rx") == 42
    monkeypatch.setattr(veth_loss, "run", lambda *args, **kwargs: "")
    assert random_loss_drops("rx") == 0
