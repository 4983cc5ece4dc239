"""``mrc-agent serve --path-mode``: what each way of picking paths changes in the agent.

* ``ecmp`` (default): nothing; connections draw random EVs and the fabric hashes them.
* ``structured``: each connection's EVs name the exact paths to its peer
  (``agent.io.structured_evs``); the fabric reads the EV's fields.
* ``srv6``: the same EVs, and every datagram leaves in the SRv6 carrier of its EV's path
  (``agent.io.srv6_sender``); the agent runs over IPv6.

Both exact modes need the fabric's topology (``--topology``), the one file the controller
programs the switches from, so agents and switches agree on every path.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agent.io.datagram_io import DatagramIO, SocketDatagramIO
from agent.io.errors import UsageError
from agent.io.srv6_carriers import Srv6Carriers
from agent.io.srv6_sender import Srv6Sender
from agent.io.structured_evs import StructuredEvs
from topologies import load_topology

#: The modes ``--path-mode`` takes (``topologies.paths.PathMode``'s values).
PATH_MODES = ("ecmp", "structured", "srv6")

EvChooser = Callable[[Sequence[bytes], int], tuple[tuple[int, int], ...] | None]


@dataclass(frozen=True)
class PathModeSetup:
    """What the runtime is built with: its EV chooser (None: random EVs) and its network
    (None: the default sockets)."""

    choose_evs: EvChooser | None = None
    datagram_io: DatagramIO | None = None


def path_mode_setup(mode: str, topology_ref: str | None, planes: Sequence[bytes]) -> PathModeSetup:
    """The setup of ``mode`` for an agent on ``planes``; UsageError when the topology is
    missing, unreadable, or does not hold this host's addresses, or (SRv6) a plane is IPv4.
    Opens the SRv6 mode's sockets (PermissionDeniedError, PortInUseError as the runtime's)."""
    if mode not in PATH_MODES:
        raise UsageError(f"--path-mode {mode!r}: one of {', '.join(PATH_MODES)}")
    if mode == "ecmp":
        if topology_ref is not None:
            raise UsageError("--topology is for --path-mode structured or srv6 only")
        return PathModeSetup()
    if topology_ref is None:
        raise UsageError(f"--path-mode {mode} needs --topology (the fabric's paths)")
    if mode == "srv6" and any(len(plane) != 16 for plane in planes):
        raise UsageError("--path-mode srv6 runs over IPv6: give IPv6 plane addresses")
    try:
        topology = load_topology(topology_ref)
        chooser = StructuredEvs(topology, planes, secrets.randbits(64))
        carriers = Srv6Carriers(topology) if mode == "srv6" else None
        if carriers is not None:
            carriers.check_local(planes)
    except ValueError as error:  # TopologyError, PathError: a file or fabric it cannot use
        raise UsageError(f"--path-mode {mode}: {error}") from None
    if carriers is None:
        return PathModeSetup(chooser.evs_for)
    return PathModeSetup(chooser.evs_for, SocketDatagramIO(ipv6=True, sender=Srv6Sender(carriers)))
