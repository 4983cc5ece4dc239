"""The MRC host agent: the endpoint side of MRC (EV spraying, PSNs, SACK/NACK, EV health, NSCC).

``wire`` holds the wire format (constants and scapy layers), ``agent.core`` the sans-IO
protocol core, ``agent.roce`` the RoCEv2 RC baseline MRC is compared with (sans-IO too),
``agent.sim`` a deterministic in-process network, ``agent.io`` the socket runtime and
``agent.cli`` the command-line tools.
"""

from agent.native import install as _install_native

# Before any other agent module loads: the mypyc-compiled modules when fresh (see agent.native).
_install_native()
