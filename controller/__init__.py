"""The MRC testbed's control plane.

``controller.intent`` computes, from a topology and the set of links that are down, what every
switch should hold, as plain data; the P4Runtime southbound (separate, asyncio/finsy) diffs that
against the switches and writes the difference.
"""
