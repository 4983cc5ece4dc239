"""The MRC switch program (``mrc.p4``, ``l3_baseline.p4`` and ``include/``; its Tofino version in
``tna/``) and its compiled artifacts (``build/``: BMv2 JSON and P4Info; ``build/tna/``: the TNA
P4Info, BF-RT schema and resource summary; made by ``make build``), found as package data."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

#: The P4 sources and their includes.
SOURCE_DIR = Path(str(files(__name__)))
#: What ``make build`` writes and the controller pushes to switches.
BUILD_DIR = SOURCE_DIR / "build"
#: What ``make build`` writes for Tofino (p4c-barefoot), committed like BUILD_DIR.
TNA_BUILD_DIR = BUILD_DIR / "tna"


def artifact(name: str) -> Path:
    """``build/<name>`` (``mrc.json``, ``mrc.p4info.txtpb``, ``l3_baseline.json`` ...)."""
    return BUILD_DIR / name
