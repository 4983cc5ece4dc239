"""The controller's configuration file under hostile content: an oversized file, deep nesting,
an alias bomb, binary garbage, a path no machine can expand; each is a ConfigError naming the
file (and the line where one is known), never another exception, and quickly."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from controller.app.config import ConfigError, ControllerConfig, load_config
from topologies.bounded_yaml import MAX_BYTES, MAX_DEPTH


def _write(tmp_path: Path, content: str | bytes) -> Path:
    path = tmp_path / "controller.yaml"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    return path


def test_an_oversized_file_is_refused_naming_the_limit_and_its_size(tmp_path):
    path = _write(tmp_path, "election_id: 20\n" + "#" * MAX_BYTES + "\n")
    size = path.stat().st_size
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert str(caught.value) == (
        f"{path}: a file may hold at most {MAX_BYTES} bytes; this one is {size} bytes"
    )


def test_deep_nesting_is_refused_at_its_line(tmp_path):
    path = _write(tmp_path, "switch_hosts:\n  s1: " + "[" * 100_000 + "]" * 100_000 + "\n")
    with pytest.raises(ConfigError, match=f"line 2: nested deeper than {MAX_DEPTH} levels"):
        load_config(path)


@pytest.mark.timeout(60)  # a hang guard only: expanded, the aliases would be 10**9 values
def test_a_billion_laughs_is_refused_at_the_line_where_it_passes_the_limit(tmp_path):
    lines = ["a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    lines += [
        f"{name}: &{name} [{', '.join([f'*{previous}'] * 10)}]"
        for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
    ]
    path = _write(tmp_path, "\n".join(lines) + "\n")
    # Refused at line 6, at 250000 values: counting stopped there, nothing beyond was expanded.
    with pytest.raises(ConfigError, match="line 6: more than 250000 values once aliases"):
        load_config(path)


def test_a_recursive_alias_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="line 1: recursive YAML alias"):
        load_config(_write(tmp_path, "switch_hosts: &x {<<: *x}\n"))


def test_binary_garbage_is_refused_at_its_line(tmp_path):
    with pytest.raises(ConfigError, match=r"line 2: not UTF-8 text"):
        load_config(_write(tmp_path, b"election_id: 20\n\x89PNG\r\n\x1a\n\xff\x00"))
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(_write(tmp_path, "election_id: 20\n\x00\x01\n"))


def test_a_home_directory_of_an_unknown_user_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="status_socket must be a path whose ~user exists"):
        load_config(_write(tmp_path, "status_socket: ~no-such-user-here/ctl.sock\n"))


def test_anchors_and_merge_keys_within_the_limits_still_work(tmp_path):
    path = _write(tmp_path, "switch_hosts: &hosts {s1: 10.0.0.1}\ngrpc_host: 10.0.0.9\ntls: null\n")
    assert load_config(path).switch_hosts == {"s1": "10.0.0.1"}


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.binary(max_size=300) | st.text(max_size=300).map(str.encode))
def test_any_file_content_is_a_configuration_or_a_config_error(tmp_path, content):
    try:
        config = load_config(_write(tmp_path, content))
    except ConfigError:
        return
    assert isinstance(config, ControllerConfig)
