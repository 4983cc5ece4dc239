"""The device config is packed byte for byte as each Tofino P4Runtime server reads it.

Stratum's format is checked twice: against bytes assembled here by the protobuf wire format
rules, and against Stratum's own ``bf.proto`` message compiled by ``protoc`` (where installed).
The SDE's is decoded field by field in the order bf-drivers 9.13.4 reads it
(``_pi_update_device_start`` in its ``src/pi/pi_imp.c``): each blob after its length as a
little-endian 32-bit integer; program name, binary, context.json, pipeline name, and bfrt.json
when that name is not empty.
"""

from __future__ import annotations

import json
import shutil
import struct
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from controller.southbound.tofino.device_config import (
    DeviceConfigError,
    DeviceConfigFormat,
    PipelineProfile,
    TofinoProgram,
    pack_bf_p4rt,
    pack_device_config,
    pack_stratum,
    read_program,
)
from tests.unit.controller.southbound.tofino.compiler_output import (
    PROGRAM,
    write_compiler_output,
    write_output_dir,
)

#: Stratum's stratum/hal/lib/barefoot/bf.proto, the message as upstream declares it (its unused
#: p4info import left out).
BF_PROTO = """\
syntax = "proto3";
package stratum.hal.barefoot;
message BfPipelineConfig {
  message Profile {
    string profile_name = 1;
    bytes context = 2;
    bytes binary = 3;
    repeated uint32 pipe_scope = 4;
  }
  string p4_name = 1;
  bytes bfruntime_info = 2;
  repeated Profile profiles = 3;
}
"""


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2) whose tag and length fit one byte each."""
    assert number < 16 and len(payload) < 128
    return bytes([number << 3 | 2, len(payload)]) + payload


def test_stratum_packing_is_the_bf_pipeline_config_wire_encoding() -> None:
    profile = PROGRAM.profiles[0]
    expected_profile = (
        _field(1, b"pipe")
        + _field(2, profile.context)
        + _field(3, profile.binary)
        + _field(4, bytes([0, 1, 2, 3]))  # proto3 packs repeated uint32: one varint each
    )
    expected = _field(1, b"mrc_tna") + _field(2, PROGRAM.bfrt_info) + _field(3, expected_profile)
    assert pack_stratum(PROGRAM) == expected
    assert pack_device_config(PROGRAM, DeviceConfigFormat.STRATUM) == expected


def _read_as_bf_drivers(blob: bytes) -> dict[str, bytes]:
    """The fields ``_pi_update_device_start`` takes from ``blob``, in its reading order; it
    reads the pipeline-name length whatever came before, so a short blob fails here too."""
    fields: dict[str, bytes] = {}
    offset = 0

    def chunk(what: str) -> None:
        nonlocal offset
        assert len(blob) >= offset + 4, f"{what}: its length lies past the blob's end"
        (size,) = struct.unpack_from("<I", blob, offset)
        assert len(blob) >= offset + 4 + size, f"{what}: {size} bytes past the blob's end"
        fields[what] = blob[offset + 4 : offset + 4 + size]
        offset += 4 + size

    for what in ("program name", "binary", "context.json", "pipeline name"):
        chunk(what)
    for name in ("program name", "pipeline name"):
        assert len(fields[name]) <= 100, f"{name}: bf-drivers refuses names past 100 bytes"
    if fields["pipeline name"]:
        chunk("bfrt.json")
    assert offset == len(blob), f"{len(blob) - offset} bytes after the last field"
    return fields


def test_sde_packing_is_read_by_bf_drivers_as_name_binary_context_pipeline_and_bfrt() -> None:
    profile = PROGRAM.profiles[0]
    packed = pack_bf_p4rt(PROGRAM)
    assert _read_as_bf_drivers(packed) == {
        "program name": b"mrc_tna",
        "binary": profile.binary,
        "context.json": profile.context,
        "pipeline name": b"pipe",
        "bfrt.json": PROGRAM.bfrt_info,
    }
    assert packed.startswith(b"\x07\x00\x00\x00mrc_tna\x04\x00\x00\x00\x00\x01\xfe\xff")
    assert pack_device_config(PROGRAM, DeviceConfigFormat.BF_P4RT) == packed


def test_sde_packing_refuses_names_bf_drivers_cannot_hold() -> None:
    long_pipe = replace(PROGRAM, profiles=(replace(PROGRAM.profiles[0], name="p" * 101),))
    with pytest.raises(DeviceConfigError, match="pipeline name of 1 to 100 bytes, not 101"):
        pack_bf_p4rt(long_pipe)
    with pytest.raises(DeviceConfigError, match="program name of 1 to 100 bytes, not 101"):
        pack_bf_p4rt(replace(PROGRAM, name="n" * 101))


def _stratum_message_class(tmp_path: Path) -> Any:
    protoc = shutil.which("protoc")
    if protoc is None:
        pytest.skip("protoc is not installed")
    (tmp_path / "bf.proto").write_text(BF_PROTO)
    subprocess.run(
        [protoc, f"-I{tmp_path}", f"--descriptor_set_out={tmp_path / 'bf.pb'}", "bf.proto"],
        check=True,
        timeout=60,
    )
    files = descriptor_pb2.FileDescriptorSet.FromString((tmp_path / "bf.pb").read_bytes())
    pool = descriptor_pool.DescriptorPool()
    for file in files.file:
        pool.Add(file)
    found = pool.FindMessageTypeByName("stratum.hal.barefoot.BfPipelineConfig")
    return message_factory.GetMessageClass(found)


def test_stratum_packing_parses_as_upstreams_message_and_reserializes_identically(
    tmp_path: Path,
) -> None:
    message_class = _stratum_message_class(tmp_path)
    two_profiles = TofinoProgram(
        "mrc_tna",
        PROGRAM.bfrt_info * 100,  # lengths past one byte: multi-byte varints
        (PROGRAM.profiles[0], PipelineProfile("pipe_b", b"{}" * 300, b"\x11" * 70000, (300,))),
    )
    packed = pack_stratum(two_profiles)
    message = message_class.FromString(packed)
    assert message.p4_name == "mrc_tna"
    assert message.bfruntime_info == two_profiles.bfrt_info
    assert [
        (p.profile_name, p.context, p.binary, tuple(p.pipe_scope)) for p in message.profiles
    ] == [(p.name, p.context, p.binary, p.pipe_scope) for p in two_profiles.profiles]
    assert message.SerializeToString(deterministic=True) == packed


def test_the_sde_packing_takes_one_profile_only() -> None:
    two = TofinoProgram("p", b"", (PROGRAM.profiles[0], PROGRAM.profiles[0]))
    with pytest.raises(DeviceConfigError, match="one pipeline profile, not 2"):
        pack_bf_p4rt(two)


def test_the_compilers_conf_file_names_every_part(tmp_path: Path) -> None:
    assert read_program(write_compiler_output(tmp_path)) == PROGRAM


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda conf: conf.pop("p4_devices"), "not a p4c-barefoot .conf file"),
        (
            lambda conf: conf["p4_devices"][0]["p4_programs"][0].update({"bfrt-config": "x.json"}),
            "cannot read",
        ),
        (
            lambda conf: conf["p4_devices"][0]["p4_programs"][0]["p4_pipelines"][0].update(
                {"pipe_scope": [0, "one"]}
            ),
            "pipe_scope must be a list of pipe numbers",
        ),
        (
            lambda conf: conf["p4_devices"][0]["p4_programs"][0].update({"p4_pipelines": []}),
            "no pipeline profile",
        ),
        (lambda conf: conf["p4_devices"].append({}), "one device with one program"),
    ],
)
def test_a_broken_conf_is_a_clear_error(tmp_path: Path, change: Any, message: str) -> None:
    path = write_compiler_output(tmp_path)
    conf = json.loads(path.read_text())
    change(conf)
    path.write_text(json.dumps(conf))
    with pytest.raises(DeviceConfigError, match=message):
        read_program(path)


def test_a_conf_that_is_not_json_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "x.conf"
    path.write_text("{not json")
    with pytest.raises(DeviceConfigError, match=r"x\.conf: not JSON"):
        read_program(path)


@pytest.mark.parametrize("binary", ["tofino.bin", "tofino2.bin"])
def test_an_output_directory_without_a_conf_is_read_through_its_manifest(
    tmp_path: Path, binary: str
) -> None:
    program = read_program(write_output_dir(tmp_path, binary))
    whole_chip = replace(PROGRAM.profiles[0], pipe_scope=())  # every pipe
    assert program == replace(PROGRAM, profiles=(whole_chip,))


def test_an_output_directory_without_the_assemblers_binary_is_a_clear_error(
    tmp_path: Path,
) -> None:
    directory = write_output_dir(tmp_path)
    (directory / "pipe" / "tofino.bin").unlink()
    with pytest.raises(DeviceConfigError, match=r"expected one of tofino\.bin"):
        read_program(directory)
