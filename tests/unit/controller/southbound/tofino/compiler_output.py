"""A small stand-in for what p4c-barefoot writes for a program: the .conf file and the files
it names (bfrt.json, and per profile context.json and the binary)."""

from __future__ import annotations

import json
from pathlib import Path

from controller.southbound.tofino.device_config import PipelineProfile, TofinoProgram

PROGRAM = TofinoProgram(
    "mrc_tna",
    b'{"schema_version": "1.0.0"}',
    (PipelineProfile("pipe", b'{"program_name": "mrc_tna"}', b"\x00\x01\xfe\xff", (0, 1, 2, 3)),),
)


def write_compiler_output(root: Path) -> Path:
    """Write :data:`PROGRAM` under ``root`` as the compiler lays it out; returns the .conf.

    The binary is named by an absolute path and the rest relative to the .conf, as both
    occur."""
    profile = PROGRAM.profiles[0]
    (root / "pipe").mkdir(parents=True)
    (root / "bfrt.json").write_bytes(PROGRAM.bfrt_info)
    (root / "pipe" / "context.json").write_bytes(profile.context)
    (root / "pipe" / "tofino.bin").write_bytes(profile.binary)
    pipeline = {
        "p4_pipeline_name": "pipe",
        "context": "pipe/context.json",
        "config": str(root / "pipe" / "tofino.bin"),
        "pipe_scope": list(profile.pipe_scope),
    }
    program = {"program-name": "mrc_tna", "bfrt-config": "bfrt.json", "p4_pipelines": [pipeline]}
    conf = {
        "chip_list": [{"chip_family": "tofino", "instance": 0}],
        "p4_devices": [{"device-id": 0, "p4_programs": [program]}],
    }
    path = root / "mrc_tna.conf"
    path.write_text(json.dumps(conf))
    return path


def write_output_dir(root: Path, binary: str = "tofino.bin") -> Path:
    """Write :data:`PROGRAM` as the open-source driver leaves it (manifest.json, no .conf);
    returns the directory."""
    profile = PROGRAM.profiles[0]
    (root / "pipe").mkdir(parents=True)
    (root / "bfrt.json").write_bytes(PROGRAM.bfrt_info)
    (root / "pipe" / "context.json").write_bytes(profile.context)
    (root / "pipe" / binary).write_bytes(profile.binary)
    pipe = {"pipe_id": 0, "pipe_name": "pipe", "files": {"context": {"path": "pipe/context.json"}}}
    manifest = {"target": "tofino", "programs": [{"program_name": "mrc_tna.p4", "pipes": [pipe]}]}
    (root / "manifest.json").write_text(json.dumps(manifest))
    return root
