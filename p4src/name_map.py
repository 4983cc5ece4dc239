"""P4Runtime names per target: how mrc.p4's names (BMv2) read in the TNA program (Tofino).

The TNA program (``tna/mrc.p4``) keeps mrc.p4's ``@name`` wherever the object means the same, so
a controller writes the same intent to either target. This module lists the exceptions, as plain
data, once: objects that moved (trimming is decided in egress on Tofino, so its tables live in
``MrcEgress``) and objects the TNA program does not have, each with the reason. A name in
neither mapping is the same on both targets; tests/unit/p4src/test_tna_names.py checks that
against both P4Infos.
"""

from __future__ import annotations

#: mrc.p4 name -> TNA name, for objects that exist on both with the same meaning and parameters
#: but sit elsewhere in the pipeline.
TNA_RENAMED: dict[str, str] = {
    "MrcIngress.trim.trim_config": "MrcEgress.trim.trim_config",
    "MrcIngress.trim.set_trim_config": "MrcEgress.trim.set_trim_config",
    "MrcIngress.trim.trim_dscp": "MrcEgress.trim.trim_dscp",
    "MrcIngress.trim.set_trim_dscp": "MrcEgress.trim.set_trim_dscp",
    "MrcIngress.trim.trims": "MrcEgress.trim.trims",
}

#: mrc.p4 name -> why the TNA program has no such object.
TNA_ABSENT: dict[str, str] = {
    "port_occupancy": (
        "egress reads the queue depth itself (eg_intr_md.enq_qdepth): no register carries it"
    ),
}


def tna_name(bmv2_name: str) -> str | None:
    """The TNA program's name for one of mrc.p4's P4Runtime names, None if it has no such
    object (TNA_ABSENT says why)."""
    if bmv2_name in TNA_ABSENT:
        return None
    return TNA_RENAMED.get(bmv2_name, bmv2_name)
