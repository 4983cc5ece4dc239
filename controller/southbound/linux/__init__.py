"""The linux southbound: switches that forward in the Linux kernel, one network namespace each.

Programs kernel routes, neighbours, qdiscs and sysctls over netlink (pyroute2) and learns link
state from netlink link events; pyroute2 stays inside this package. ``target`` declares the
target: its check, southbound and capabilities.
"""
