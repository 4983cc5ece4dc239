"""Probe whether the running kernel can route SRv6 uSID carriers itself (seg6local routes).

The linux target could render the SRv6 path mode with the kernel's own SRv6: a seg6local
``End`` route with the NEXT-C-SID flavour per switch (Linux 6.1 and later). Kernels built
without ``CONFIG_IPV6_SEG6_LWTUNNEL`` refuse every seg6 and seg6local route ("lwt
encapsulation type not supported"). The probe adds one such route in a throw-away namespace;
it needs root, and changes nothing on the host.
"""

from __future__ import annotations

import subprocess
import uuid

#: The route the probe adds: a uSID locator handled by End with the NEXT-C-SID flavour.
PROBE_ROUTE = (
    "fcbb:bb00:1::/48",
    "encap",
    "seg6local",
    "action",
    "End",
    "flavors",
    "next-csid",
    "lblen",
    "32",
    "nflen",
    "16",
    "dev",
    "lo",
)


def seg6local_missing() -> str | None:
    """None when the kernel takes a NEXT-C-SID seg6local route; otherwise why not, in a
    clause. PermissionError without root; OSError if ``ip`` hangs."""
    netns = f"mrc6-{uuid.uuid4().hex[:8]}"
    made = subprocess.run(["ip", "netns", "add", netns], capture_output=True, check=False)
    if made.returncode != 0:
        raise PermissionError("cannot create a network namespace (are you root?)")
    try:
        subprocess.run(["ip", "-n", netns, "link", "set", "lo", "up"], check=False, timeout=10)
        try:
            added = subprocess.run(
                ["ip", "-n", netns, "-6", "route", "add", *PROBE_ROUTE],
                capture_output=True,
                text=True,
                timeout=10,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise OSError(f"probing seg6local routes: {exc}") from None
        if added.returncode == 0:
            return None
        said = added.stderr.strip().removeprefix("Error: ").rstrip(".")
        return (
            f"this kernel takes no seg6local NEXT-C-SID route ({said}; it needs "
            "CONFIG_IPV6_SEG6_LWTUNNEL and Linux 6.1 or later)"
        )
    finally:
        subprocess.run(["ip", "netns", "del", netns], capture_output=True, check=False)
