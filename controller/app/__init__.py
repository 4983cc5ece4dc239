"""The running controller: configuration, link discovery, failover, status and the event log.

``runtime.run_controller`` assembles it; ``fabric.FabricController`` holds the logic; the other
modules are one concept each (``discovery`` settings, ``probing`` loop, ``lldp`` frames,
``liveness`` state machine, ``carrier`` watch, ``programmer`` per-switch worker, ``switch_view``,
``failover`` timing, ``status`` / ``status_socket``, ``eventlog``, ``config``, ``clock``).
"""
