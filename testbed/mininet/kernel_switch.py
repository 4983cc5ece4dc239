"""A Mininet switch node that forwards in the Linux kernel (the ``linux`` target).

The switch is a network namespace of its own, attached as ``<prefix>-<switch>`` like a host's,
so that ``ip netns exec``, pyroute2's ``NetNS(<name>)`` (the controller's netlink southbound)
and the prefix sweep all find it. Port N is the interface ``swpN`` in that namespace, with the
MAC the topology gives that port (the same one a host's static gateway neighbour points at on
BMv2). The node only brings its ports up (offloads off, IPv6 on: the kernel forwards IPv6 only
on interfaces with IPv6 enabled); every piece of forwarding state (sysctls, routes, next-hop
groups, neighbours, qdiscs) is the controller's to write, so a run without a controller
forwards nothing, exactly as an unprogrammed BMv2 does.

No process runs in the namespace but Mininet's shell, so there is nothing to kill: a restart
has no faithful meaning here (:meth:`KernelSwitch.restart` says so). Queue limits are a
``tbf`` on the port, the same rendering the controller's linux southbound uses
(``hostenv.tbf``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from mininet.node import Switch

from hostenv.tbf import tbf_parameters
from testbed.mininet.host_config import offloads_off, sysctl
from testbed.mininet.system import CommandFailed, attach_netns, run_all_in, run_in


class NotApplicable(RuntimeError):
    """An operation that the linux target has no faithful meaning for."""


class KernelSwitch(Switch):  # type: ignore[misc]  # Mininet has no type hints
    """A switch in its own named namespace whose ports are ``swpN``."""

    def __init__(self, name: str, netns: str, ports: dict[int, str], **params: Any) -> None:
        params["inNamespace"] = True
        # The dpid is Mininet bookkeeping only (no OpenFlow here); the name need not hold a digit.
        super().__init__(name, dpid=params.pop("dpid", "1"), **params)
        # Mininet's Switch sets this only for root-namespace switches; its CLI reads it.
        self.controlIntf = None
        self.netns = netns
        self.port_names = dict(ports)
        try:
            attach_netns(netns, self.pid)
        except BaseException:
            # Unnamed, the namespace would escape the prefix sweep: end its shell now.
            self.terminate()
            raise

    # -- Mininet's switch interface --------------------------------------------------------
    def start(self, controllers: Sequence[Any]) -> None:
        """Bring every port up (Mininet calls this once the links exist)."""
        commands = [
            ("ip", "link", "set", "dev", "lo", "up"),
            sysctl("net.ipv6.conf.all.disable_ipv6", 0),
            sysctl("net.ipv6.conf.default.disable_ipv6", 0),
        ]
        for ifname in self.port_names.values():
            commands += [
                sysctl(f"net.ipv6.conf.{ifname}.disable_ipv6", 0),
                offloads_off(ifname),
                ("ip", "link", "set", "dev", ifname, "up"),
            ]
        run_all_in(self.netns, commands)

    # -- operations ------------------------------------------------------------------------
    def port_status(self) -> dict[int, bool]:
        """Each port's carrier (True: up), as the kernel in the switch's namespace sees it:
        what the controller's netlink link events report."""
        return parse_carrier(
            run_in(self.netns, ["ip", "-j", "link", "show"]), self._ports_by_name()
        )

    def set_queue(self, port: int, rate_pps: int, depth: int) -> None:
        """Limit the port's egress to ``rate_pps`` full MRC frames per second with a queue of
        ``depth`` of them (a ``tbf``); rate 0 removes the shaper.

        Without a shaper a veth never queues (it hands each frame to its peer at once), so
        there is no queue for a depth to bound: rate 0 restores the kernel's default qdisc,
        as the controller renders an unlimited port.
        """
        ifname = self.port_names[port]
        if rate_pps == 0:
            try:
                run_in(self.netns, ["tc", "qdisc", "del", "dev", ifname, "root"])
            except CommandFailed as error:
                # Deleting the default qdisc is refused: the port had no shaper to remove.
                if "Cannot delete qdisc with handle of zero" not in str(error):
                    raise
            return
        shaper = tbf_parameters(rate_pps, depth)
        run_in(
            self.netns, ["tc", "qdisc", "replace", "dev", ifname, "root", *shaper.tc_arguments()]
        )

    def restart(self, timeout: float | None = None) -> int:
        """Refused: see the module's docstring."""
        raise NotApplicable(
            f"{self.name}: restart does not apply to the linux target: a kernel switch has no "
            "switch process to kill and start again, and wiping its namespace's state would "
            "test a controller resync, not a switch reboot"
        )

    def summary_line(self) -> str:
        """One line for :meth:`TestbedNetwork.summary`."""
        ports = ", ".join(f"{port}@{ifname}" for port, ifname in self.port_names.items())
        return f"kernel switch, netns {self.netns}  ports {ports}"

    def _ports_by_name(self) -> dict[str, int]:
        return {ifname: port for port, ifname in self.port_names.items()}


def parse_carrier(ip_json: str, ports: dict[str, int]) -> dict[int, bool]:
    """Port number to carrier up, from ``ip -j link show`` of the switch's namespace; only
    the interfaces named in ``ports`` (ifname to port number) are reported.

    Carrier is the ``LOWER_UP`` flag: an interface that is administratively up but whose
    peer is down (a cut) lacks it, and so does one that is down itself.
    """
    found = {}
    for link in json.loads(ip_json or "[]"):
        port = ports.get(link.get("ifname", ""))
        if port is not None:
            found[port] = "LOWER_UP" in link.get("flags", [])
    return found
