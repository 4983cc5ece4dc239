"""Bring a topology file up in Mininet, with one BMv2 (``simple_switch_grpc``) per switch
(target ``bmv2``) or one kernel-forwarding namespace per switch (target ``linux``).

    from topologies import load_topology
    from testbed.mininet import running_network

    with running_network(load_topology("leaf-spine"), target="linux") as net:
        net.cut("l1", "s1")
        net.restore("l1", "s1")

From a shell: ``python -m testbed.mininet up leaf-spine [--target linux]`` (Ctrl-C tears
down) and ``python -m testbed.mininet clean`` (removes what killed runs left behind).

Modules: ``naming`` (run prefix and every name derived from it), ``switch_kind`` (how Mininet
runs a switch: a BMv2 process or a kernel namespace), ``switch_target`` (the targets a run can
bring up, each with its kind and needs: the testbed's side of ``controller.targets``),
``wiring`` (the plan of veths, patches and names, checked before anything is created),
``preflight`` (what a switch kind needs from the machine), ``host_config`` (the commands that
configure a host NIC), ``bmv2_switch``,
``kernel_switch``, ``testbed_host`` and ``patch_panel`` (the Mininet nodes), ``network``
(bring-up, operations, teardown), ``runs`` and ``cleanup`` (the run registry and the prefix
sweep), ``cli``.

The Mininet-dependent names are imported on first use, so the planning modules (naming,
switch_kind, switch_target, wiring, preflight, host_config) work where Mininet is
not installed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testbed.mininet.network import (
        BringUpError,
        NotApplicable,
        TestbedNetwork,
        running_network,
    )

__all__ = ["BringUpError", "NotApplicable", "TestbedNetwork", "running_network"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from testbed.mininet import network

        return getattr(network, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
