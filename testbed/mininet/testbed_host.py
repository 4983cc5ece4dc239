"""A Mininet host whose NICs are configured from the topology, not from Mininet's defaults.

Mininet gives a host one address on its first interface and relies on ARP; here a host has
one NIC per topology NIC (several for multi-plane), IPv4 and IPv6 on each, and static
neighbour entries instead of ARP/ND (see ``host_config``). The host's namespace is named
(``ip netns``) so that commands run through ``ip netns exec`` with real exit codes, and so that
cleanup finds it after a crash. Mininet's ``config()`` hook is where the NICs are configured,
so ``Mininet.build()`` and ``start()`` keep working and never apply Mininet's own addressing.
"""

from __future__ import annotations

import json
from typing import Any

from mininet.node import Host

from testbed.mininet.host_config import (
    host_sysctls,
    nic_bring_up,
    nic_down,
    nic_prepare,
    nic_source_rules,
)
from testbed.mininet.system import attach_netns, run_all_in, run_in
from testbed.mininet.wiring import HostNicWiring


class TestbedHost(Host):  # type: ignore[misc]  # Mininet has no type hints
    """A host in its own named namespace, with the topology's NICs."""

    __test__ = False  # not a pytest test class, despite the name

    def __init__(self, name: str, netns: str, nics: tuple[HostNicWiring, ...], **params: Any):
        params["inNamespace"] = True
        super().__init__(name, **params)
        self.netns = netns
        self.nic_wirings = nics
        try:
            attach_netns(netns, self.pid)
        except BaseException:
            # Unnamed, the namespace would escape the prefix sweep: end its shell now.
            self.terminate()
            raise

    def config(self, **params: Any) -> dict[str, Any]:
        """Configure every NIC (Mininet's build step calls this; ``ip``/``mac`` are ignored)."""
        run_all_in(self.netns, [("ip", "link", "set", "dev", "lo", "up"), *host_sysctls()])
        for wiring in self.nic_wirings:
            run_all_in(self.netns, nic_prepare(wiring))
            run_all_in(self.netns, nic_bring_up(wiring))
            run_all_in(self.netns, nic_source_rules(wiring))
        return {}

    def nic_wiring(self, nic_name: str) -> HostNicWiring:
        """The wiring of one of this host's NICs."""
        for wiring in self.nic_wirings:
            if wiring.nic.name == nic_name:
                return wiring
        raise KeyError(f"{self.name} has no NIC {nic_name!r}")

    def cut_nic(self, nic_name: str) -> None:
        """Take the NIC down from the host side; the switch's end only loses carrier."""
        run_all_in(self.netns, nic_down(self.nic_wiring(nic_name)))

    def restore_nic(self, nic_name: str) -> None:
        """Bring the NIC back up with its addresses, neighbours and routes."""
        run_all_in(self.netns, nic_bring_up(self.nic_wiring(nic_name)))

    def tx_packets(self) -> dict[str, int]:
        """Packets each NIC has sent (the kernel's counters), by NIC name."""
        return parse_tx_packets(
            run_in(self.netns, ["ip", "-j", "-s", "link", "show"]),
            [wiring.nic.name for wiring in self.nic_wirings],
        )

    def IP(self, intf: Any = None) -> str | None:
        """The first NIC's IPv4 address (what Mininet's CLI substitutes for the host's name)."""
        return str(self.nic_wirings[0].nic.ipv4.ip) if self.nic_wirings else None


def parse_tx_packets(ip_json: str, nics: list[str]) -> dict[str, int]:
    """NIC name -> packets sent, from ``ip -j -s link show``; only the NICs in ``nics``."""
    found = {}
    for link in json.loads(ip_json or "[]"):
        name = link.get("ifname")
        if name in nics:
            found[name] = int(link.get("stats64", {}).get("tx", {}).get("packets", 0))
    return found
