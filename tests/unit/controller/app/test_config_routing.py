"""The routing policy in the controller's configuration: ``routing:`` in the file,
``--routing`` on the command line (which wins), reactive when neither says."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.app.config import ConfigError, ControllerConfig, load_config
from controller.cli import main
from controller.intent import RoutingMode, RoutingPolicy


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "controller.yaml"
    path.write_text(text)
    return path


def test_the_default_is_reactive():
    assert load_config(None).routing == RoutingPolicy(RoutingMode.REACTIVE)


@pytest.mark.parametrize(
    ("text", "policy"),
    [("static", "static"), ("converge", "converge:3"), ("'converge:1.5'", "converge:1.5")],
)
def test_the_file_sets_the_policy(tmp_path, text, policy):
    assert str(load_config(_write(tmp_path, f"routing: {text}\n")).routing) == policy


@pytest.mark.parametrize("text", ["ospf", "3", "[static]", "'converge:-2'"])
def test_a_bad_policy_in_the_file_names_the_file(tmp_path, text):
    path = _write(tmp_path, f"routing: {text}\n")
    with pytest.raises(ConfigError, match=f"{path}: .*routing|{path}: converge"):
        load_config(path)


def test_the_command_line_wins_over_the_file(tmp_path):
    config = load_config(_write(tmp_path, "routing: static\n"))
    assert config.with_overrides(routing=None).routing.mode is RoutingMode.STATIC
    assert config.with_overrides(routing="converge:2").routing == RoutingPolicy(
        RoutingMode.CONVERGE, 2.0
    )
    with pytest.raises(ConfigError, match="command line: routing must be"):
        ControllerConfig().with_overrides(routing="eigrp")


def test_a_bad_policy_on_the_command_line_exits_2_before_touching_a_switch(capsys):
    assert main(["run", "leaf-spine", "--routing", "static:9"]) == 2
    assert "routing static takes no argument" in capsys.readouterr().err
