"""Names of everything a Mininet run creates, all derived from one short run prefix.

Every run gets a prefix such as ``mn3fa2`` (``mn`` and four hex digits). Each name the run puts
into a shared space starts with ``<prefix>-``: the named network namespaces (``ip netns``), the
switch-side veth ends in the root namespace (BMv2 binds to those, so they must be unique on the
machine), and therefore the BMv2 command lines. A crashed run is then found and removed by its
prefix alone, like ``mn -c`` does for Mininet's own names, without touching anything else
(PTF and benchmark runs use ``mrc...`` names and are never matched).

Names inside a run's private namespaces (a host's NICs, the patch panel's ports, a kernel
switch's ``swpN`` ports) need no prefix.
Linux limits interface names to 15 characters: root-namespace names use the readable
``<prefix>-<switch>-<port>`` when it fits and ``<prefix>-<switch position>-<port>`` otherwise
(a node name starts with a letter, so the two forms never collide).
"""

from __future__ import annotations

import re
import secrets

#: Longest interface name Linux accepts (IFNAMSIZ 16, with the terminating NUL).
MAX_IFNAME_LEN = 15
RUN_PREFIX_PATTERN = re.compile(r"^mn[0-9a-f]{4}$")
#: A name (namespace, interface) that belongs to some Mininet run of this project.
RUN_NAME_PATTERN = re.compile(r"^(mn[0-9a-f]{4})-")
#: Suffix of the run's patch-panel namespace; a hyphen, so that no node name can produce it.
PATCH_PANEL_SUFFIX = "patch-panel"
#: Name of the patch panel node in Mininet (``patch-panel ip link`` works in the Mininet CLI).
PATCH_PANEL_NODE = "patch-panel"


class NamingError(ValueError):
    """A name the run needs cannot be formed (too long for Linux, or a malformed prefix)."""


def random_run_prefix() -> str:
    """A fresh prefix; the caller checks that nothing on the machine uses it yet."""
    return f"mn{secrets.token_hex(2)}"


def check_run_prefix(prefix: str) -> str:
    """``prefix`` itself if it has the run-prefix form, else NamingError."""
    if not RUN_PREFIX_PATTERN.match(prefix):
        raise NamingError(f"{prefix!r} is not a run prefix (expected 'mn' and 4 hex digits)")
    return prefix


def run_of(name: str) -> str | None:
    """The run prefix a namespace or interface name belongs to, or None for foreign names."""
    match = RUN_NAME_PATTERN.match(name)
    return match.group(1) if match else None


def host_netns(prefix: str, host: str) -> str:
    """Named network namespace of a host (``ip netns exec <it> ...`` runs inside the host)."""
    return f"{prefix}-{host}"


def switch_netns(prefix: str, switch: str) -> str:
    """Named network namespace of a kernel (``linux`` target) switch, named like a host's: the
    controller's netlink southbound reaches it by this name, and the prefix sweep removes it."""
    return f"{prefix}-{switch}"


def kernel_switch_port(port: int) -> str:
    """Interface of ``port`` inside a kernel switch's namespace, Cumulus style (``swp3``)."""
    name = f"swp{port}"
    if len(name) > MAX_IFNAME_LEN:
        raise NamingError(f"switch port name {name!r} is longer than {MAX_IFNAME_LEN}")
    return name


def patch_panel_netns(prefix: str) -> str:
    """Named network namespace that holds every switch-to-switch patch point of the run."""
    return f"{prefix}-{PATCH_PANEL_SUFFIX}"


def switch_ifname(prefix: str, switch: str, switch_position: int, port: int) -> str:
    """Root-namespace interface BMv2 binds as ``port`` of ``switch`` (its 1-based position)."""
    readable = f"{prefix}-{switch}-{port}"
    if len(readable) <= MAX_IFNAME_LEN:
        return readable
    compact = f"{prefix}-{switch_position}-{port}"
    if len(compact) > MAX_IFNAME_LEN:
        raise NamingError(
            f"no interface name of at most {MAX_IFNAME_LEN} characters for {switch} port {port}"
        )
    return compact


def patch_ifname(node: str, port: int) -> str:
    """Patch-panel end of the veth from ``node``'s ``port`` (private to the panel namespace)."""
    name = f"{node}-{port}"
    if len(name) > MAX_IFNAME_LEN:
        raise NamingError(f"patch interface name {name!r} is longer than {MAX_IFNAME_LEN}")
    return name


def bridge_name(index: int) -> str:
    """The bridge joining the two patch ends of the ``index``-th switch-to-switch link."""
    return f"br{index}"
