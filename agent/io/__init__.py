"""The agent's runtime over real sockets: everything the sans-IO core must not do.

``runtime.AgentRuntime`` drives ``agent.core`` with a selectors loop: UDP 4791 in
(``udp_receiver``, with DSCP/ECN and destination address), raw IP out (``raw_sender``, headers
built here so every packet carries its EV, DSCP and ECN). Around it: the TCP side channel that
sets connections up (``side_channel`` messages, ``inbound`` server, ``outbound`` client with
``file_transfer`` and ``perf_transfer``), the Unix control socket for local clients
(``control_protocol``, ``control_server``, ``control_client``), ``--out-dir`` writing
(``out_dir``), several endpoints behind one port (``endpoints``), and the errors with their
exit codes (``errors``).
"""
