"""The running controller: configuration, link discovery, failover, status and the event log.

``runtime.run_controller`` assembles it; ``fabric.FabricController`` holds the logic; the other
modules are one concept each (``lldp`` frames, ``liveness`` state machine, ``programmer``
per-switch worker, ``failover`` timing, ``status`` / ``status_socket``, ``eventlog``, ``config``,
``clock``).
"""
