"""Which path modes kernel switches can carry, asked once by the controller, the testbed and
the experiments, so that all three refuse a mode with the same reason.

Kernel switches hash every EV (no structured EV tables), and carry SRv6 uSID carriers only where
the kernel takes seg6local End routes with the NEXT-C-SID flavour (docs/routing.md).
"""

from __future__ import annotations

from hostenv.seg6 import seg6local_missing
from topologies.paths import PathMode


def linux_path_mode_refusal(mode: PathMode | None) -> str | None:
    """Why the linux target cannot carry ``mode`` on this machine, or None where it can (None
    and ``ecmp`` always can). Probes the kernel for ``srv6`` (once per process)."""
    if mode is PathMode.STRUCTURED:
        return (
            "path mode structured needs a P4 target: kernel switches hash every EV, they have "
            "no structured EV tables"
        )
    if mode is PathMode.SRV6:
        try:
            missing = seg6local_missing()
        except OSError as error:  # PermissionError without root, or ip hanging
            return f"path mode srv6: cannot tell whether this kernel routes uSID carriers ({error})"
        if missing is not None:
            return (
                "path mode srv6 needs a P4 target here: the linux target renders it as the "
                f"kernel's seg6local routes, and {missing}"
            )
    return None
