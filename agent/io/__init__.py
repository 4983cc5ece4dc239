"""The agent's runtime over real sockets: everything the sans-IO core must not do.

``runtime.AgentRuntime`` drives ``agent.core`` with a selectors loop (``reactor``) over a
``datagram_io.DatagramIO``: in production UDP 4791 in (``udp_receiver``: DSCP/ECN and header
destination with every datagram) and raw IP out (``raw_sender``: headers built here, so every
packet carries its EV as source port / flow label, its DSCP and ECN). ``endpoints`` keeps one
core endpoint per configuration behind the one port.

Around it: the TCP side channel that sets connections up (``side_channel`` messages,
``inbound`` server, ``outbound`` client with ``file_transfer`` and ``perf_transfer``), the
Unix control socket for local clients (``control_protocol``, ``control_server``,
``control_client``), both framed as JSON lines (``json_lines``, fields checked by ``fields``);
``--out-dir`` writing (``out_dir``); statistics as JSON (``stats_json``); user settings
(``addresses``, ``config_overrides``); Linux socket constants (``linux``); and the errors with
their exit codes (``errors``).
"""
