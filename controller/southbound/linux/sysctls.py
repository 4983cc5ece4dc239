"""The kernel settings that make a namespace forward like the fabric's switches.

* forwarding on, for IPv4 and IPv6;
* ``fib_multipath_hash_policy=1`` for both: the multipath hash covers the L4 ports, so the EV
  an MRC packet carries in its UDP source port picks its path, as BMv2's selector does;
* ``ignore_routes_with_linkdown=1`` on all, default and every port: a next hop whose port has
  lost carrier is skipped at once, the kernel's stand-in for ``watch_port``, before the
  controller has even heard of the cut;
* reverse-path filtering off (a multipath fabric receives a flow on a port that is not the
  one it would route back through) and ICMP redirects neither sent nor accepted (a switch
  that forwards out of the port a packet came in on must not teach hosts shortcuts).
  IPv6 has no switch to stop sending redirects; it only sends them for packets routed back
  out of their arrival port, which the fabric's routes never do.

Sysctls are not netlink: they are written with ``sysctl`` run inside the namespace.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

SYSCTL_TIMEOUT_S = 10.0


class SysctlError(OSError):
    """The namespace's settings could not be written."""


def forwarding_sysctls(interfaces: Sequence[str]) -> dict[str, str]:
    """Every setting, by sysctl key, for a namespace whose ports are ``interfaces``."""
    scopes = ("all", "default", *interfaces)
    settings = {
        "net.ipv4.ip_forward": "1",
        "net.ipv6.conf.all.forwarding": "1",
        "net.ipv4.fib_multipath_hash_policy": "1",
        "net.ipv6.fib_multipath_hash_policy": "1",
    }
    for scope in scopes:
        settings[f"net.ipv4.conf.{scope}.ignore_routes_with_linkdown"] = "1"
        settings[f"net.ipv6.conf.{scope}.ignore_routes_with_linkdown"] = "1"
        settings[f"net.ipv4.conf.{scope}.rp_filter"] = "0"
        settings[f"net.ipv4.conf.{scope}.send_redirects"] = "0"
        settings[f"net.ipv4.conf.{scope}.accept_redirects"] = "0"
        settings[f"net.ipv6.conf.{scope}.accept_redirects"] = "0"
    return settings


async def apply_sysctls(namespace: str, settings: dict[str, str]) -> None:
    """Write ``settings`` inside ``namespace`` with one ``sysctl`` process; raises
    :class:`SysctlError` naming what failed."""
    arguments = [f"{key}={value}" for key, value in settings.items()]
    process = await asyncio.create_subprocess_exec(
        "ip",
        "netns",
        "exec",
        namespace,
        "sysctl",
        "-q",
        "-w",
        *arguments,
        stdout=asyncio.subprocess.DEVNULL,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        _, stderr = await asyncio.wait_for(process.communicate(), SYSCTL_TIMEOUT_S)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise SysctlError(f"{namespace}: sysctl took over {SYSCTL_TIMEOUT_S} s") from None
    if process.returncode != 0:
        raise SysctlError(
            f"{namespace}: sysctl failed ({process.returncode}): {stderr.decode().strip()}"
        )
