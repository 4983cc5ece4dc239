"""Probe whether the running kernel can route SRv6 uSID carriers itself (seg6local routes).

The linux target could render the SRv6 path mode with the kernel's own SRv6: a seg6local
``End`` route with the NEXT-C-SID flavour per switch (Linux 6.1 and later), on a dummy
interface (a route via ``lo`` would be a reject route). Kernels built without
``CONFIG_IPV6_SEG6_LWTUNNEL`` refuse every seg6 and seg6local route ("lwt encapsulation type
not supported"), kernels without ``CONFIG_DUMMY`` the interface, and kernels before 6.1 keep
the route but silently drop its flavour. The probe makes the route in a throw-away namespace
and reads it back; it needs root, and changes nothing on the host.
"""

from __future__ import annotations

import functools
import subprocess
import uuid

#: The route the probe adds: a uSID locator handled by End with the NEXT-C-SID flavour (on
#: ``lo`` first, where the kernel keeps it as a reject route: that tells whether seg6local
#: exists at all; then on a dummy interface, as the linux southbound writes it).
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
)


@functools.cache
def seg6local_missing() -> str | None:
    """None when the kernel takes a NEXT-C-SID seg6local route on a dummy interface and keeps
    its flavour; otherwise why not, in a clause. PermissionError without root; OSError if
    ``ip`` hangs. An answer is kept for the process (the kernel's build does not change under
    it): an experiment asks once per bring-up, and again before the first."""
    netns = f"mrc6-{uuid.uuid4().hex[:8]}"
    if _ip("netns", "add", netns) is not None:
        raise PermissionError("cannot create a network namespace (are you root?)")
    try:
        lo = _ip("-n", netns, "link", "set", "lo", "up")
        if lo is not None:
            raise OSError(f"probing seg6local routes: cannot bring lo up ({lo})")
        route = _ip("-n", netns, "-6", "route", "add", *PROBE_ROUTE, "dev", "lo")
        if route is not None:
            return (
                f"this kernel takes no seg6local NEXT-C-SID route ({route}; it needs "
                "CONFIG_IPV6_SEG6_LWTUNNEL and Linux 6.1 or later)"
            )
        dummy = _ip("-n", netns, "link", "add", "probe0", "up", "type", "dummy")
        if dummy is not None:
            return (
                f"this kernel makes no dummy interface for seg6local routes ({dummy}; CONFIG_DUMMY)"
            )
        on_dummy = _ip("-n", netns, "-6", "route", "replace", *PROBE_ROUTE, "dev", "probe0")
        if on_dummy is not None:
            return f"this kernel takes no seg6local route on a dummy interface ({on_dummy})"
        shown = _ip_output("-n", netns, "-6", "route", "show", PROBE_ROUTE[0])
        if "next-csid" not in shown:
            # A kernel before 6.1 keeps the route as classic End, without the flavour.
            return (
                "this kernel drops the NEXT-C-SID flavour of seg6local End routes (it needs "
                "Linux 6.1 or later)"
            )
        return None
    finally:
        _ip("netns", "del", netns)


def _ip(*arguments: str) -> str | None:
    """Run ``ip ...``: None if it worked, else what it said."""
    done = _run_ip(arguments)
    if done.returncode == 0:
        return None
    return done.stderr.strip().removeprefix("Error: ").rstrip(".") or f"exit {done.returncode}"


def _ip_output(*arguments: str) -> str:
    """What ``ip ...`` printed ('' if it failed)."""
    done = _run_ip(arguments)
    return done.stdout if done.returncode == 0 else ""


def _run_ip(arguments: tuple[str, ...]) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(
            ["ip", *arguments], capture_output=True, text=True, timeout=10, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise OSError(f"probing seg6local routes: {exc}") from None
