"""The host the testbed runs on: throw-away network namespaces and veths, which kernel
features (qdiscs) exist, and where the P4 tools are. The lowest layer beside ``topologies``:
the agent, the controller, the testbed runtime and the tools all use it; it imports none of
them."""
