"""A LAN of network namespaces standing for machines: a bridge in a namespace of its own and,
per machine, a namespace with one address on it (10.77.0.0/24). Nothing of it is in the root
namespace; :meth:`Lan.close` deletes every namespace it made (their veths go with them).

The names start with ``mrcd`` and four hex digits, never a testbed run's ``mn...`` prefix, so
no testbed sweep takes them for a run's."""

from __future__ import annotations

import secrets
import subprocess
from dataclasses import dataclass, field

SUBNET = "10.77.0"


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=30)


@dataclass
class Lan:
    """The namespaces made so far, by machine name, with each machine's address."""

    prefix: str = field(default_factory=lambda: f"mrcd{secrets.token_hex(2)}")
    namespaces: list[str] = field(default_factory=list)
    addresses: dict[str, str] = field(default_factory=dict)

    def open(self) -> None:
        bridge = self._namespace("lan")
        _ip("-n", bridge, "link", "add", "br0", "type", "bridge")
        _ip("-n", bridge, "link", "set", "br0", "up")

    def machine(self, name: str) -> str:
        """A machine's namespace on the LAN (made on first use); its name."""
        if name in self.addresses:
            return f"{self.prefix}-{name}"
        index = len(self.addresses) + 1
        namespace = self._namespace(name)
        bridge_end, machine_end = f"{self.prefix}b{index}", f"{self.prefix}m{index}"
        lan = f"{self.prefix}-lan"
        _ip("-n", lan, "link", "add", bridge_end, "type", "veth", "peer", "name", machine_end)
        _ip("-n", lan, "link", "set", machine_end, "netns", namespace)
        _ip("-n", lan, "link", "set", bridge_end, "master", "br0", "up")
        address = f"{SUBNET}.{index}"
        _ip("-n", namespace, "addr", "add", f"{address}/24", "dev", machine_end)
        _ip("-n", namespace, "link", "set", machine_end, "up")
        self.addresses[name] = address
        return namespace

    def close(self) -> None:
        for namespace in reversed(self.namespaces):
            subprocess.run(["ip", "netns", "del", namespace], capture_output=True, check=False)
        self.namespaces.clear()

    def _namespace(self, name: str) -> str:
        namespace = f"{self.prefix}-{name}"
        _ip("netns", "add", namespace)
        self.namespaces.append(namespace)
        _ip("-n", namespace, "link", "set", "lo", "up")
        return namespace
