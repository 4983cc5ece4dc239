"""Random loss as nftables rules: a rate is a threshold on a random number in millionths; a
rule drops what its match selects at that rate and counts it; a rule set replaces its table in
one transaction; counters are read back per rule comment; nothing that could end a quoted
name gets into a script."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from hostenv.nft_loss import (
    check_name,
    drop_rule,
    loss_threshold,
    remove_table,
    replace_table,
    rule_counters,
)


def test_a_rate_is_a_threshold_on_a_random_number_in_millionths() -> None:
    assert loss_threshold(0.0) == 0
    assert loss_threshold(0.001) == 1000
    assert loss_threshold(0.05) == 50_000
    assert loss_threshold(1.0) == 1_000_000
    for bad in (-0.01, 1.5):
        with pytest.raises(ValueError, match="probability between 0 and 1"):
            loss_threshold(bad)


def test_a_rule_drops_what_its_match_selects_and_counts_the_drops() -> None:
    assert drop_rule("meta l4proto udp", 0.01, "udp") == (
        'meta l4proto udp numgen random mod 1000000 < 10000 counter drop comment "udp"'
    )


def test_a_rule_may_count_what_it_matched_before_the_draw() -> None:
    rule = drop_rule('iifname "a" udp dport 4791', 0.5, "a->b", count_matched=True)
    assert rule == (
        'iifname "a" udp dport 4791 counter numgen random mod 1000000 < 500000 counter drop '
        'comment "a->b"'
    )


def test_a_rule_set_replaces_its_table_with_one_accepting_chain() -> None:
    script = replace_table("inet", "t", "prerouting", "raw", ["rule one", "rule two"])
    assert script == (
        "add table inet t\n"
        "delete table inet t\n"
        "table inet t {\n"
        "  chain prerouting {\n"
        "    type filter hook prerouting priority raw; policy accept;\n"
        "    rule one\n"
        "    rule two\n"
        "  }\n"
        "}\n"
    )
    assert remove_table("inet", "t") == "add table inet t\ndelete table inet t\n"


def test_counters_are_read_per_rule_comment_in_rule_order() -> None:
    listing = """{"nftables": [
      {"metainfo": {"version": "1.0.6"}},
      {"rule": {"comment": "udp", "expr": [
          {"match": {}}, {"counter": {"packets": 1000, "bytes": 0}},
          {"counter": {"packets": 11, "bytes": 0}}, {"drop": null}]}},
      {"rule": {"expr": [{"counter": {"packets": 5, "bytes": 0}}]}},
      {"rule": {"comment": "lldp", "expr": [{"counter": {"packets": 42, "bytes": 0}}]}}
    ]}"""
    assert rule_counters(listing) == {"udp": [1000, 11], "lldp": [42]}
    assert rule_counters("") == {}


def test_a_name_that_could_break_out_of_the_rule_is_refused() -> None:
    for bad in ('l1"-3', "l1-3;", "", "a\nb", "a{b"):
        with pytest.raises(ValueError, match="cannot be written"):
            check_name(bad)
        with pytest.raises(ValueError, match="cannot be written"):
            drop_rule("meta l4proto udp", 0.1, bad)
    check_name("l1:3->s1")


@pytest.mark.skipif(shutil.which("nft") is None, reason="nft (nftables) is not installed")
def test_the_kernels_nftables_accepts_the_rules() -> None:
    """``nft -c`` parses and checks the scripts against the kernel without applying them."""
    rule = drop_rule("meta l4proto udp", 0.01, "udp")
    for script in (
        replace_table("inet", "mrc_test_loss", "prerouting", "raw", [rule]),
        remove_table("inet", "mrc_test_loss"),
    ):
        proc = subprocess.run(
            ["nft", "-c", "-f", "-"], input=script, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0 and "Operation not permitted" in proc.stderr:
            pytest.skip("nft -c needs CAP_NET_ADMIN (run as root)")
        assert proc.returncode == 0, proc.stderr
