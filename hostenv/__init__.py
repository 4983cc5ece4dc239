"""The host the testbed runs on: throw-away network namespaces and veths, which kernel
features (qdiscs) exist, where the P4 tools are, and what the kernel is told or asked (a port's
``tbf``, random-loss nftables rules, each core's time in /proc/stat). The lowest layer beside
``topologies``: the agent, the controller, the testbed runtime and the tools all use it; it
imports none of them."""
