"""Controller configuration: defaults without a file, every key read from YAML, and a clear
error naming the file and key for anything wrong."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.app.config import ConfigError, ControllerConfig, load_config
from controller.southbound import p4_program
from controller.southbound.grpc_settings import TlsConfig


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "controller.yaml"
    path.write_text(text)
    return path


def test_no_file_means_every_default():
    config = load_config(None)
    assert config == ControllerConfig()
    assert config.election_id == 10 and config.discovery and config.queues
    assert config.p4info == p4_program.P4INFO_PATH


def test_an_empty_file_means_every_default(tmp_path):
    assert load_config(_write(tmp_path, "")) == ControllerConfig()


def test_every_key_is_read_and_relative_paths_follow_the_file(tmp_path):
    path = _write(
        tmp_path,
        """
election_id: 20
primary_lock: run/ctl.lock
grpc_host: 10.9.0.1
switch_hosts: {s1: 10.9.0.2}
tls: {ca_cert: certs/ca.pem, cert: certs/c.pem, key: certs/c.key, target_name_override: sw}
pipeline: {p4info: build/x.p4info.txtpb, json: /abs/x.json}
discovery: false
probe_interval_ms: 20
miss_limit: 4
probe_host_ports: false
queues: false
max_batch: 50
status_socket: run/ctl.sock
event_log: logs/events.jsonl
""",
    )
    config = load_config(path)
    assert config.election_id == 20
    assert config.primary_lock == tmp_path / "run/ctl.lock"
    assert ControllerConfig().primary_lock is None, "alone, a controller needs no lock"
    assert config.host_of("s1") == "10.9.0.2" and config.host_of("s2") == "10.9.0.1"
    assert config.tls == TlsConfig(
        tmp_path / "certs/ca.pem", tmp_path / "certs/c.pem", tmp_path / "certs/c.key", "sw"
    )
    assert config.p4info == tmp_path / "build/x.p4info.txtpb"
    assert config.p4blob == Path("/abs/x.json")
    assert (config.discovery, config.probe_host_ports, config.queues) == (False, False, False)
    assert (config.probe_interval_ms, config.miss_limit, config.max_batch) == (20, 4, 50)
    assert config.status_socket == tmp_path / "run/ctl.sock"
    assert config.event_log == tmp_path / "logs/events.jsonl"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("electon_id: 3", "unknown keys: electon_id"),
        ("election_id: many", "election_id must be an integer"),
        ("election_id: 0", r"election_id must be 1\.\.2\^128-1"),
        ("election_id: true", "election_id must be an integer"),
        ("discovery: yes please", "discovery must be true or false"),
        ("probe_interval_ms: 0", "probe_interval_ms must be at least 1"),
        ("max_batch: 0", "max_batch must be at least 1"),
        ("switch_hosts: [a, b]", "switch_hosts must be a mapping"),
        ("tls: {cert: a.pem, key: a.key}", "tls needs ca_cert"),
        ("tls: {ca_cert: ca.pem, cert: a.pem}", "both cert and key"),
        ("tls: {ca_cert: ca.pem, password: x}", "tls: unknown keys: password"),
        ("pipeline: {p4info: a, bin: b}", "pipeline takes only"),
        ("- a list", "expected a mapping"),
        ("election_id: [1", "not valid YAML"),
    ],
)
def test_a_bad_file_names_itself_and_the_key(tmp_path, text, message):
    path = _write(tmp_path, text)
    with pytest.raises(ConfigError, match=message) as caught:
        load_config(path)
    assert str(path) in str(caught.value)


def test_a_missing_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        load_config(tmp_path / "absent.yaml")


def test_command_line_overrides_replace_only_what_was_given():
    config = ControllerConfig().with_overrides(election_id=30, grpc_host=None, discovery=False)
    assert config.election_id == 30 and config.grpc_host == "127.0.0.1"
    assert not config.discovery


def test_a_bad_override_is_refused():
    with pytest.raises(ConfigError, match="election_id"):
        ControllerConfig().with_overrides(election_id=-1)
    with pytest.raises(ConfigError, match="unknown settings: colour"):
        ControllerConfig().with_overrides(colour="red")


def test_tls_paths_reach_the_grpc_channel_credentials(tmp_path):
    from controller.app.runtime import build_southbound
    from topologies import load_topology

    config = ControllerConfig(
        tls=TlsConfig(tmp_path / "ca.pem", tmp_path / "c.pem", tmp_path / "c.key", "switch-ca")
    )
    southbound = build_southbound(load_topology("leaf-spine"), config)
    credentials = southbound._options.credentials
    assert credentials is not None
    assert (credentials.cacert, credentials.cert, credentials.private_key) == (
        tmp_path / "ca.pem",
        tmp_path / "c.pem",
        tmp_path / "c.key",
    )
    assert credentials.target_name_override == "switch-ca"
    assert (
        build_southbound(load_topology("leaf-spine"), ControllerConfig())._options.credentials
        is None
    )
