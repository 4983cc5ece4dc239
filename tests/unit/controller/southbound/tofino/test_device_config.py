"""The device config is packed byte for byte as each Tofino P4Runtime server reads it.

Stratum's format is checked twice: against bytes assembled here by the protobuf wire format
rules, and against Stratum's own ``bf.proto`` message compiled by ``protoc`` (where installed).
The SDE's is checked against its definition: three little-endian 32-bit lengths, each before
its blob, in the order name, binary, context.
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


def test_sde_packing_is_three_little_endian_length_prefixed_blobs() -> None:
    profile = PROGRAM.profiles[0]
    expected = (
        b"\x07\x00\x00\x00mrc_tna"
        + b"\x04\x00\x00\x00\x00\x01\xfe\xff"
        + struct.pack("<I", len(profile.context))
        + profile.context
    )
    assert pack_bf_p4rt(PROGRAM) == expected
    assert pack_device_config(PROGRAM, DeviceConfigFormat.BF_P4RT) == expected


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
