"""Small topology files shared by the topology tests."""

from __future__ import annotations

#: Two leaves, one spine, one host per leaf: the smallest routed fabric.
SMALL_FABRIC = """\
name: small
switches:
  - {name: l1, role: leaf, device_id: 1}
  - {name: l2, role: leaf, device_id: 2}
  - {name: s1, role: spine, device_id: 3}
hosts:
  - name: h1
    nics:
      - {switch: l1, port: 1}
  - name: h2
    nics:
      - {switch: l2, port: 1}
links:
  - {a: "l1:2", b: "s1:1"}
  - {a: "l2:2", b: "s1:2"}
"""
