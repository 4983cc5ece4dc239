"""Random loss on the veth lab's data path: netem on the sender's end where the kernel has
sch_netem, otherwise an nftables drop rule (``hostenv.nft_loss``) in the receiving namespace.

The nftables rule drops UDP only, so the TCP side channel and iperf3's control connection are
spared; it sits in a raw-priority prerouting chain, which works on kernels without sch_netem,
and counts what it dropped.
"""

from __future__ import annotations

import subprocess

from hostenv.netns import run
from hostenv.nft_loss import drop_rule, remove_table, replace_table, rule_counters
from hostenv.qdiscs import probe_qdiscs
from tools.veth_lab import VethPair

#: nftables table the loss rule lives in (one per namespace, removed with it).
LOSS_TABLE = "mrc_bench_loss"
#: The loss rule's comment, by which its counter is read back.
LOSS_COMMENT = "udp loss"


def add_random_loss(netns: str, percent: float) -> None:
    """Drop ``percent`` % of the UDP packets entering ``netns``, at random."""
    if not 0 < percent <= 100:
        raise ValueError(f"loss must be in (0, 100] percent, got {percent}")
    rule = drop_rule("meta l4proto udp", percent / 100, LOSS_COMMENT)
    proc = _nft(netns, replace_table("inet", LOSS_TABLE, "prerouting", "raw", [rule]))
    if proc.returncode != 0:
        raise RuntimeError(f"nft could not add the loss rule in {netns}: {proc.stderr.strip()}")


def remove_random_loss(netns: str) -> None:
    """Remove the loss rule of ``add_random_loss`` (no error if there is none)."""
    _nft(netns, remove_table("inet", LOSS_TABLE))


def random_loss_drops(netns: str) -> int:
    """Packets the loss rule has dropped so far (0 when there is none)."""
    listing = run(["nft", "-j", "list", "table", "inet", LOSS_TABLE], check=False, netns=netns)
    counters = rule_counters(listing).get(LOSS_COMMENT, [])
    return counters[-1] if counters else 0


def loss_method() -> str:
    """ "netem" where the kernel has sch_netem, else "nftables"."""
    try:
        return "netem" if probe_qdiscs().get("netem") else "nftables"
    except (PermissionError, OSError):
        return "nftables"


def apply_loss(pair: VethPair, percent: float, method: str) -> None:
    """Lose ``percent`` % of the data packets from tx to rx."""
    if method == "netem":
        run(
            ["tc", "qdisc", "replace", "dev", pair.tx_if, "root", "netem", "loss", f"{percent}%"],
            netns=pair.tx_ns,
        )
    else:
        add_random_loss(pair.rx_ns, percent)


def clear_loss(pair: VethPair, method: str) -> None:
    """Undo ``apply_loss``."""
    if method == "netem":
        run(["tc", "qdisc", "del", "dev", pair.tx_if, "root"], check=False, netns=pair.tx_ns)
    else:
        remove_random_loss(pair.rx_ns)


def _nft(netns: str, script: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["ip", "netns", "exec", netns, "nft", "-f", "-"],
        input=script,
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
