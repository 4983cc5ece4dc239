"""The controller's configuration: a YAML file, command-line overrides, and defaults.

Everything has a default, so ``mrc-controller run leaf-spine`` needs no file. The file (all
keys optional)::

    target: bmv2                 # bmv2 (P4Runtime + Thrift), linux (kernel switches, netlink)
                                 # or tofino (P4Runtime on Tofino: Stratum or the SDE); the
                                 # registered targets (controller.targets) are the choices
    tofino:                      # the tofino target only (docs/tofino.md)
      program: build/tna         # p4c-barefoot's output directory (or its .conf file)
      device_config: stratum     # stratum (stratum_bfrt) or bf_p4rt (bf_switchd --p4rt-server)
      p4info: p4src/build/tna/mrc.p4info.txtpb
      cells_per_packet: 19       # queue cells per intent packet in ECN/trim thresholds
    netns_prefix: ""             # linux: switch s1 lives in namespace <prefix>-s1 ('' : s1)
    election_id: 10              # P4Runtime arbitration; the highest live id is primary
    primary_lock: null           # linux: a lock file shared with a backup controller; only its
                                 # holder writes (netlink has no arbitration)
    peer_socket: null            # the other controller's status socket: while backup, take
                                 # its down links (probe targets: a backup sends no probes)
    grpc_host: 127.0.0.1         # where the switches' gRPC and Thrift servers listen
    switch_hosts: {s1: 10.0.0.1} # per-switch override of grpc_host
    tls:                         # gRPC over TLS (paths relative to the file)
      ca_cert: certs/ca.pem
      cert: certs/controller.pem # client certificate and key (mutual TLS), optional
      key: certs/controller.key
      target_name_override: ""   # name the switch certificate is checked against
    pipeline: {p4info: p4src/build/mrc.p4info.txtpb, json: p4src/build/mrc.json}
    discovery: true              # link discovery: LLDP on bmv2, carrier on linux (false: links
                                 # are as the topology says)
    probe_interval_ms: 10        # default: the topology's settings.lldp.interval_ms
    miss_limit: 3                # default: the topology's settings.lldp.miss_limit
    probe_host_ports: true       # probe host-facing ports too (finds miswired links)
    queues: true                 # queue depth and rate (Thrift on bmv2, tbf on linux; tofino: none)
    routing: reactive            # static | reactive | converge[:SECONDS] (docs/routing.md)
    path_mode: ecmp              # ecmp | structured | srv6: how an EV picks its path (the
                                 # exact modes' tables need a P4 target: docs/routing.md)
    max_batch: 1000              # updates per P4Runtime write request
    status_socket: /tmp/mrc-controller.sock
    event_log: null              # a file for the JSON-lines event log; null: stdout

A wrong key or value is a :class:`ConfigError` naming the file and the key, raised before the
controller touches any switch. The file is read within the bounds of
:mod:`topologies.bounded_yaml` (1 MiB, 32 levels, 250,000 values with aliases expanded); past
one, or any other failure reading it, is a ConfigError too (with the line where one is known).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any

import yaml

from controller.intent.policy import RoutingPolicy
from controller.southbound import p4_program
from controller.southbound.grpc_settings import TlsConfig
from controller.southbound.tofino.device_config import DeviceConfigFormat
from controller.southbound.tofino.target import TofinoConfig
from controller.southbound.writer import DEFAULT_MAX_BATCH
from controller.targets import DEFAULT_TARGET, target_names
from topologies import bounded_yaml
from topologies.paths import PathMode

#: What a namespace name may be made of (``ip netns`` refuses '/', and names are files).
_NETNS_PREFIX = re.compile(r"[A-Za-z0-9_.-]*")
DEFAULT_STATUS_SOCKET = Path("/tmp/mrc-controller.sock")
MAX_ELECTION_ID = (1 << 128) - 1


class ConfigError(ValueError):
    """The configuration is invalid; the message names the source and the key."""


@dataclass(frozen=True)
class ControllerConfig:
    """Every setting of a controller run (see the module docs for their meaning)."""

    #: What kind of switches the controller drives: a name of ``controller.targets``.
    target: str = DEFAULT_TARGET
    netns_prefix: str = ""
    election_id: int = 10
    primary_lock: Path | None = None
    peer_socket: Path | None = None
    grpc_host: str = "127.0.0.1"
    switch_hosts: dict[str, str] = field(default_factory=dict)
    tls: TlsConfig | None = None
    tofino: TofinoConfig = field(default_factory=TofinoConfig)
    p4info: Path = p4_program.P4INFO_PATH
    p4blob: Path = p4_program.P4BLOB_PATH
    discovery: bool = True
    probe_interval_ms: int | None = None
    miss_limit: int | None = None
    probe_host_ports: bool = True
    queues: bool = True
    routing: RoutingPolicy = field(default_factory=RoutingPolicy)
    path_mode: PathMode = PathMode.ECMP
    max_batch: int = DEFAULT_MAX_BATCH
    status_socket: Path = DEFAULT_STATUS_SOCKET
    event_log: Path | None = None

    def host_of(self, switch: str) -> str:
        """Where ``switch``'s servers listen."""
        return self.switch_hosts.get(switch, self.grpc_host)

    def with_overrides(self, **overrides: Any) -> ControllerConfig:
        """A copy with the given settings replaced; None values are ignored (flag not given)."""
        known = {f.name for f in fields(self)}
        unknown = set(overrides) - known
        if unknown:
            raise ConfigError(f"unknown settings: {', '.join(sorted(unknown))}")
        changes = {key: value for key, value in overrides.items() if value is not None}
        if "target" in changes:
            changes["target"] = parse_target(changes["target"], "command line")
        if "routing" in changes:
            changes["routing"] = parse_routing(changes["routing"], "command line")
        if "path_mode" in changes:
            changes["path_mode"] = parse_path_mode(changes["path_mode"], "command line")
        config = replace(self, **changes)
        config.validate("command line")
        return config

    def validate(self, source: str) -> None:
        """Raise ConfigError for values out of range."""
        if not 1 <= self.election_id <= MAX_ELECTION_ID:
            raise ConfigError(f"{source}: election_id must be 1..2^128-1, not {self.election_id}")
        if self.probe_interval_ms is not None and self.probe_interval_ms < 1:
            raise ConfigError(f"{source}: probe_interval_ms must be at least 1")
        if self.miss_limit is not None and self.miss_limit < 1:
            raise ConfigError(f"{source}: miss_limit must be at least 1")
        if self.max_batch < 1:
            raise ConfigError(f"{source}: max_batch must be at least 1")
        if self.tofino.cells_per_packet < 1:
            raise ConfigError(f"{source}: tofino: cells_per_packet must be at least 1")
        if not _NETNS_PREFIX.fullmatch(self.netns_prefix):
            raise ConfigError(
                f"{source}: netns_prefix may hold only letters, digits, '_', '.' and '-', "
                f"not {self.netns_prefix!r}"
            )


def load_config(path: Path | None) -> ControllerConfig:
    """The configuration in ``path`` (defaults for what it leaves out); defaults when None."""
    if path is None:
        return ControllerConfig()
    source = str(path)
    document = _read_document(path, source)
    if document is None:
        document = {}
    if not isinstance(document, dict):
        raise ConfigError(f"{source}: expected a mapping of settings at the top")
    try:
        config = _parse(document, source, path.parent)
    except ConfigError:
        raise
    except Exception as error:  # a value no check foresaw: still a wrong file, not a crash
        raise ConfigError(f"{source}: cannot use the settings: {error!r}") from None
    config.validate(source)
    return config


def _read_document(path: Path, source: str) -> Any:
    """The YAML document in ``path``, bounded; ConfigError for whatever keeps it from loading."""
    try:
        text = bounded_yaml.read_text(path)
        return bounded_yaml.load(text)
    except OSError as error:
        raise ConfigError(f"{source}: cannot read: {error}") from None
    except bounded_yaml.YamlRejected as error:
        where = "" if error.line is None else f" line {error.line}:"
        raise ConfigError(f"{source}:{where} {error.reason}") from None
    except yaml.YAMLError as error:
        raise ConfigError(f"{source}: not valid YAML: {error}") from None


def parse_target(value: object, source: str) -> str:
    """``value`` as a registered target's name, or a ConfigError listing the valid ones."""
    valid = target_names()
    if isinstance(value, str) and value in valid:
        return value
    raise ConfigError(f"{source}: target must be one of {', '.join(valid)}, not {value!r}")


def parse_routing(value: object, source: str) -> RoutingPolicy:
    """``value`` (a policy, or its text: ``static``, ``reactive``, ``converge[:SECONDS]``) as a
    :class:`RoutingPolicy`, or a ConfigError saying what is valid."""
    if isinstance(value, RoutingPolicy):
        return value
    if not isinstance(value, str):
        raise ConfigError(
            f"{source}: routing must be static, reactive or converge[:SECONDS], not {value!r}"
        )
    try:
        return RoutingPolicy.parse(value)
    except ValueError as error:
        raise ConfigError(f"{source}: {error}") from None


def parse_path_mode(value: object, source: str) -> PathMode:
    """``value`` as a :class:`PathMode`, or a ConfigError listing the valid ones."""
    valid = [mode.value for mode in PathMode]
    if isinstance(value, str) and value in valid:
        return PathMode(value)
    raise ConfigError(f"{source}: path_mode must be one of {', '.join(valid)}, not {value!r}")


_TOP_KEYS = {
    "target",
    "netns_prefix",
    "election_id",
    "primary_lock",
    "peer_socket",
    "grpc_host",
    "switch_hosts",
    "tls",
    "tofino",
    "pipeline",
    "discovery",
    "probe_interval_ms",
    "miss_limit",
    "probe_host_ports",
    "queues",
    "routing",
    "path_mode",
    "max_batch",
    "status_socket",
    "event_log",
}


def _parse(document: dict[str, Any], source: str, base: Path) -> ControllerConfig:
    unknown = set(document) - _TOP_KEYS
    if unknown:
        raise ConfigError(f"{source}: unknown keys: {', '.join(sorted(map(str, unknown)))}")
    default = ControllerConfig()
    values: dict[str, Any] = {}
    reader = _Reader(document, source, base)
    values["target"] = parse_target(document.get("target", default.target), source)
    values["netns_prefix"] = reader.text("netns_prefix", default.netns_prefix)
    values["election_id"] = reader.integer("election_id", default.election_id)
    values["primary_lock"] = reader.path("primary_lock")
    values["peer_socket"] = reader.path("peer_socket")
    values["grpc_host"] = reader.text("grpc_host", default.grpc_host)
    values["switch_hosts"] = reader.text_map("switch_hosts")
    values["discovery"] = reader.boolean("discovery", default.discovery)
    values["probe_interval_ms"] = reader.optional_integer("probe_interval_ms")
    values["miss_limit"] = reader.optional_integer("miss_limit")
    values["probe_host_ports"] = reader.boolean("probe_host_ports", default.probe_host_ports)
    values["queues"] = reader.boolean("queues", default.queues)
    values["routing"] = parse_routing(document.get("routing", str(default.routing)), source)
    values["path_mode"] = parse_path_mode(document.get("path_mode", default.path_mode), source)
    values["max_batch"] = reader.integer("max_batch", default.max_batch)
    values["status_socket"] = reader.path("status_socket") or default.status_socket
    values["event_log"] = reader.path("event_log")
    values["tls"] = _parse_tls(document.get("tls"), source, base)
    values["tofino"] = _parse_tofino(document.get("tofino"), source, base)
    pipeline = document.get("pipeline")
    if pipeline is not None:
        if not isinstance(pipeline, dict) or set(pipeline) - {"p4info", "json"}:
            raise ConfigError(f"{source}: pipeline takes only the keys p4info and json")
        pipe = _Reader(pipeline, f"{source}: pipeline", base)
        values["p4info"] = pipe.path("p4info") or default.p4info
        values["p4blob"] = pipe.path("json") or default.p4blob
    return ControllerConfig(**values)


def _parse_tofino(section: object, source: str, base: Path) -> TofinoConfig:
    if section is None:
        return TofinoConfig()
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: tofino must be a mapping")
    unknown = set(section) - {"program", "device_config", "p4info", "cells_per_packet"}
    if unknown:
        raise ConfigError(f"{source}: tofino: unknown keys: {', '.join(sorted(map(str, unknown)))}")
    reader = _Reader(section, f"{source}: tofino", base)
    default = TofinoConfig()
    form = section.get("device_config", default.device_config.value)
    valid = [choice.value for choice in DeviceConfigFormat]
    if form not in valid:
        raise ConfigError(
            f"{source}: tofino: device_config must be one of {', '.join(valid)}, not {form!r}"
        )
    return TofinoConfig(
        program=reader.path("program"),
        device_config=DeviceConfigFormat(form),
        p4info=reader.path("p4info") or default.p4info,
        cells_per_packet=reader.integer("cells_per_packet", default.cells_per_packet),
    )


def _parse_tls(section: object, source: str, base: Path) -> TlsConfig | None:
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ConfigError(f"{source}: tls must be a mapping")
    unknown = set(section) - {"ca_cert", "cert", "key", "target_name_override"}
    if unknown:
        raise ConfigError(f"{source}: tls: unknown keys: {', '.join(sorted(map(str, unknown)))}")
    reader = _Reader(section, f"{source}: tls", base)
    ca_cert = reader.path("ca_cert")
    if ca_cert is None:
        raise ConfigError(f"{source}: tls needs ca_cert")
    cert, key = reader.path("cert"), reader.path("key")
    if (cert is None) != (key is None):
        raise ConfigError(f"{source}: tls needs both cert and key, or neither")
    return TlsConfig(ca_cert, cert, key, reader.text("target_name_override", ""))


@dataclass(frozen=True)
class _Reader:
    """Typed access to one mapping of the file, with errors naming the key."""

    data: dict[str, Any]
    source: str
    base: Path

    def _fail(self, key: str, expected: str) -> ConfigError:
        return ConfigError(f"{self.source}: {key} must be {expected}, not {self.data[key]!r}")

    def integer(self, key: str, default: int) -> int:
        value = self.optional_integer(key)
        return default if value is None else value

    def optional_integer(self, key: str) -> int | None:
        value = self.data.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(key, "an integer")
        return value

    def boolean(self, key: str, default: bool) -> bool:
        value = self.data.get(key, default)
        if not isinstance(value, bool):
            raise self._fail(key, "true or false")
        return value

    def text(self, key: str, default: str) -> str:
        value = self.data.get(key, default)
        if not isinstance(value, str):
            raise self._fail(key, "a string")
        return value

    def text_map(self, key: str) -> dict[str, str]:
        value = self.data.get(key) or {}
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in value.items()
        ):
            raise self._fail(key, "a mapping of switch names to hosts")
        return dict(value)

    def path(self, key: str) -> Path | None:
        value = self.data.get(key)
        if value is None:
            return None
        if not isinstance(value, str) or not value or "\0" in value:
            raise self._fail(key, "a path")
        try:
            path = Path(value).expanduser()
        except RuntimeError:  # '~someone' for a user this machine does not know
            raise self._fail(key, "a path whose ~user exists") from None
        return path if path.is_absolute() else self.base / path
