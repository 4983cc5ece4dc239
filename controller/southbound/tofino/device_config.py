"""The forwarding-pipeline device config of a Tofino program, packed as each server expects.

``p4c-barefoot`` writes, for a program, ``bfrt.json`` and per pipeline profile a
``context.json`` and the chip binary (``tofino.bin``), and lists them in a ``<program>.conf``
JSON file (``p4_devices[0].p4_programs[0]``: ``program-name``, ``bfrt-config``, and
``p4_pipelines[]`` with ``p4_pipeline_name``, ``context``, ``config`` and ``pipe_scope``).
The P4Runtime ``SetForwardingPipelineConfig`` carries them in ``p4_device_config``, packed
differently by the two servers a Tofino switch runs:

* Stratum (``stratum_bfrt``): a serialized ``stratum.hal.barefoot.BfPipelineConfig``
  (Stratum's ``stratum/hal/lib/barefoot/bf.proto``): ``p4_name = 1`` (string),
  ``bfruntime_info = 2`` (bytes: bfrt.json), ``profiles = 3``, each a ``Profile`` with
  ``profile_name = 1``, ``context = 2``, ``binary = 3`` and ``repeated uint32 pipe_scope = 4``.
  The message type is declared below from that definition and serialized by protobuf.
* The SDE's own server (``bf_switchd --p4rt-server``, PI's frontend on bf-drivers' PI
  implementation): blobs each after its length as a 32-bit little-endian integer, read in
  this order by ``_pi_update_device_start`` (bf-drivers 9.13.4, ``src/pi/pi_imp.c``): the
  program name, the binary, ``context.json``, the pipeline name, and, only when that name is
  not empty, ``bfrt.json``. The pipeline-name field is always read: a config without it makes
  the switch read past the buffer. Both names are refused past 100 bytes. One profile only.

Paths in the ``.conf`` file are taken relative to the file's directory when not absolute.
The open-source ``p4c-barefoot`` driver writes no ``.conf``: its output directory is read
instead, through its ``manifest.json`` (the program's name, each pipe's name and context), with
``bfrt.json`` at the top (``--bf-rt-schema``) and each pipe's binary beside its context
(``tofino.bin``, or ``tofino2.bin``/``tofino3.bin`` for later chips); such a program's
profiles cover every pipe (an empty ``pipe_scope``).
"""

from __future__ import annotations

import functools
import json
import struct
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

#: Largest blob the SDE packing can carry (its lengths are read as signed 32-bit integers).
MAX_BLOB = (1 << 31) - 1
#: bf-drivers copies the program and pipeline names into buffers of this many bytes (and a NUL).
BF_P4RT_MAX_NAME = 100
#: The ``.conf`` file is read whole; compiler configs are a few KiB.
MAX_CONF_BYTES = 1 << 20


class DeviceConfigFormat(StrEnum):
    """How ``p4_device_config`` is packed (the config file's ``tofino.device_config``)."""

    #: Stratum's ``BfPipelineConfig`` protobuf (``stratum_bfrt``).
    STRATUM = "stratum"
    #: The SDE's P4Runtime server (``bf_switchd --p4rt-server``): PI's length-prefixed blobs.
    BF_P4RT = "bf_p4rt"


class DeviceConfigError(ValueError):
    """The compiler output cannot be packed (missing file, malformed .conf, too many pipes)."""


@dataclass(frozen=True)
class PipelineProfile:
    """One pipeline profile of a compiled program: its context and binary, and its pipes."""

    name: str
    context: bytes
    binary: bytes
    pipe_scope: tuple[int, ...] = ()


@dataclass(frozen=True)
class TofinoProgram:
    """What ``p4c-barefoot`` produced for one program, read into memory."""

    name: str
    bfrt_info: bytes
    profiles: tuple[PipelineProfile, ...]


def pack_device_config(program: TofinoProgram, form: DeviceConfigFormat) -> bytes:
    """``p4_device_config`` for ``program`` in the packing ``form`` names."""
    if form is DeviceConfigFormat.STRATUM:
        return pack_stratum(program)
    return pack_bf_p4rt(program)


def pack_stratum(program: TofinoProgram) -> bytes:
    """A serialized ``BfPipelineConfig`` holding every profile."""
    message: Any = _bf_pipeline_config_class()()
    message.p4_name = program.name
    message.bfruntime_info = program.bfrt_info
    for profile in program.profiles:
        added = message.profiles.add()
        added.profile_name = profile.name
        added.context = profile.context
        added.binary = profile.binary
        added.pipe_scope.extend(profile.pipe_scope)
    return bytes(message.SerializeToString(deterministic=True))


def pack_bf_p4rt(program: TofinoProgram) -> bytes:
    """Name, binary, context, pipeline name and bfrt.json of the program's one profile, each
    length-prefixed, in the order bf-drivers' ``_pi_update_device_start`` reads them."""
    if len(program.profiles) != 1:
        raise DeviceConfigError(
            f"{program.name}: the SDE's P4Runtime server takes one pipeline profile, "
            f"not {len(program.profiles)} (use device_config: stratum, or compile one profile)"
        )
    profile = program.profiles[0]
    for name, what in ((program.name, "program name"), (profile.name, "pipeline name")):
        if not name or len(name.encode()) > BF_P4RT_MAX_NAME:
            raise DeviceConfigError(
                f"{program.name}: the SDE's P4Runtime server takes a {what} of 1 to "
                f"{BF_P4RT_MAX_NAME} bytes, not {len(name.encode())}"
            )
    return b"".join(
        _length_prefixed(blob, what)
        for blob, what in (
            (program.name.encode(), "program name"),
            (profile.binary, "binary"),
            (profile.context, "context.json"),
            (profile.name.encode(), "pipeline name"),
            (program.bfrt_info, "bfrt.json"),
        )
    )


#: Names of a pipe's binary, by chip generation.
BINARY_NAMES = ("tofino.bin", "tofino2.bin", "tofino3.bin")


def read_program(path: Path) -> TofinoProgram:
    """The program in a ``p4c-barefoot`` output directory, or described by a ``.conf`` file,
    with every file it names."""
    if path.is_dir():
        return _read_output_dir(path)
    return _read_conf(path)


def _read_json(path: Path) -> Any:
    try:
        raw = path.read_bytes()[: MAX_CONF_BYTES + 1]
    except OSError as error:
        raise DeviceConfigError(f"{path}: cannot read: {error}") from None
    if len(raw) > MAX_CONF_BYTES:
        raise DeviceConfigError(f"{path}: larger than {MAX_CONF_BYTES} bytes")
    try:
        return json.loads(raw)
    except ValueError as error:
        raise DeviceConfigError(f"{path}: not JSON: {error}") from None


def _read_output_dir(directory: Path) -> TofinoProgram:
    manifest_path = directory / "manifest.json"
    manifest = _read_json(manifest_path)
    try:
        entry = manifest["programs"][0]
        name = _text(entry["program_name"], "program_name").removesuffix(".p4")
        pipes = [
            (_text(pipe["pipe_name"], "pipe_name"), pipe["files"]["context"]["path"])
            for pipe in entry["pipes"]
        ]
    except DeviceConfigError:
        raise
    except (KeyError, IndexError, TypeError) as error:
        raise DeviceConfigError(
            f"{manifest_path}: not a p4c-barefoot manifest: {error!r}"
        ) from None
    profiles = []
    for pipe_name, context in pipes:
        context_path = directory / _text(context, "context path")
        binaries = [
            context_path.parent / b for b in BINARY_NAMES if (context_path.parent / b).is_file()
        ]
        if len(binaries) != 1:
            raise DeviceConfigError(
                f"{context_path.parent}: expected one of {', '.join(BINARY_NAMES)} "
                "(the assembler's output; p4c-barefoot writes it where bfas is installed)"
            )
        profiles.append(
            PipelineProfile(
                pipe_name,
                _read_file(context_path, manifest_path),
                _read_file(binaries[0], manifest_path),
            )
        )
    if not profiles:
        raise DeviceConfigError(f"{manifest_path}: the program has no pipe")
    return TofinoProgram(name, _read_file(directory / "bfrt.json", manifest_path), tuple(profiles))


def _read_conf(conf_path: Path) -> TofinoProgram:
    conf = _read_json(conf_path)
    try:
        devices = conf["p4_devices"]
        if len(devices) != 1 or len(devices[0]["p4_programs"]) != 1:
            raise DeviceConfigError(f"{conf_path}: expected one device with one program")
        entry = devices[0]["p4_programs"][0]
        name = _text(entry["program-name"], "program-name")
        bfrt = _read(conf_path, entry["bfrt-config"])
        profiles = tuple(
            PipelineProfile(
                _text(pipeline["p4_pipeline_name"], "p4_pipeline_name"),
                _read(conf_path, pipeline["context"]),
                _read(conf_path, pipeline["config"]),
                _pipes(pipeline.get("pipe_scope", [])),
            )
            for pipeline in entry["p4_pipelines"]
        )
    except DeviceConfigError:
        raise
    except (ValueError, KeyError, IndexError, TypeError) as error:
        raise DeviceConfigError(f"{conf_path}: not a p4c-barefoot .conf file: {error!r}") from None
    if not profiles:
        raise DeviceConfigError(f"{conf_path}: the program has no pipeline profile")
    return TofinoProgram(name, bfrt, profiles)


def _length_prefixed(blob: bytes, what: str) -> bytes:
    if len(blob) > MAX_BLOB:
        raise DeviceConfigError(f"{what} of {len(blob)} bytes exceeds the format's 2 GiB")
    return struct.pack("<I", len(blob)) + blob


def _text(value: object, key: str) -> str:
    if not isinstance(value, str) or not value:
        raise DeviceConfigError(f"{key} must be a non-empty string, not {value!r}")
    return value


def _pipes(value: object) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(
        isinstance(pipe, int) and not isinstance(pipe, bool) and 0 <= pipe < 1 << 32
        for pipe in value
    ):
        raise DeviceConfigError(f"pipe_scope must be a list of pipe numbers, not {value!r}")
    return tuple(value)


def _read(conf_path: Path, value: object) -> bytes:
    path = Path(_text(value, "file path"))
    return _read_file(path if path.is_absolute() else conf_path.parent / path, conf_path)


def _read_file(path: Path, source: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as error:
        raise DeviceConfigError(f"{source}: cannot read {path}: {error}") from None


@functools.cache
def _bf_pipeline_config_class() -> type:
    """The ``BfPipelineConfig`` message class, declared as Stratum's bf.proto declares it."""
    pool = descriptor_pool.DescriptorPool()
    pool.Add(bf_proto_file())
    return message_factory.GetMessageClass(pool.FindMessageTypeByName(BF_PIPELINE_CONFIG))


#: The full name of Stratum's message (package ``stratum.hal.barefoot``).
BF_PIPELINE_CONFIG = "stratum.hal.barefoot.BfPipelineConfig"

_F = descriptor_pb2.FieldDescriptorProto
#: (message, [(field name, number, type, repeated)]) as in bf.proto.
_BF_PROTO: Sequence[tuple[str, Sequence[tuple[str, int, int, bool]]]] = (
    (
        "BfPipelineConfig",
        (
            ("p4_name", 1, _F.TYPE_STRING, False),
            ("bfruntime_info", 2, _F.TYPE_BYTES, False),
            ("profiles", 3, _F.TYPE_MESSAGE, True),
        ),
    ),
    (
        "BfPipelineConfig.Profile",
        (
            ("profile_name", 1, _F.TYPE_STRING, False),
            ("context", 2, _F.TYPE_BYTES, False),
            ("binary", 3, _F.TYPE_BYTES, False),
            ("pipe_scope", 4, _F.TYPE_UINT32, True),
        ),
    ),
)


def bf_proto_file() -> descriptor_pb2.FileDescriptorProto:
    """bf.proto's two messages as a descriptor (proto3: repeated scalars are packed)."""
    file = descriptor_pb2.FileDescriptorProto(
        name="mrc/stratum_bf.proto", package="stratum.hal.barefoot", syntax="proto3"
    )
    outer = file.message_type.add(name="BfPipelineConfig")
    inner = outer.nested_type.add(name="Profile")
    targets = {"BfPipelineConfig": outer, "BfPipelineConfig.Profile": inner}
    for message_name, fields in _BF_PROTO:
        message = targets[message_name]
        for name, number, kind, repeated in fields:
            field = message.field.add(
                name=name,
                number=number,
                type=kind,
                label=_F.LABEL_REPEATED if repeated else _F.LABEL_OPTIONAL,
            )
            if kind == _F.TYPE_MESSAGE:
                field.type_name = ".stratum.hal.barefoot.BfPipelineConfig.Profile"
    return file
