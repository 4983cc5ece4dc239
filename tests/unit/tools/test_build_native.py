"""`make native` compiles exactly the modules agent/native.py names, each from its own source
file, and the manifest it writes names each module's extension where build_ext puts it."""

from __future__ import annotations

import importlib.machinery
from pathlib import Path

from agent.native import COMPILED_MODULES, GROUP_NAME
from tools.build_native import REPO, extension_name, module_source


def test_every_compiled_module_is_a_source_file_of_the_agent_and_not_a_package():
    for module in COMPILED_MODULES:
        source = REPO / module_source(module)
        assert source.is_file(), module
        assert source.name != "__init__.py", module
    assert len(set(COMPILED_MODULES)) == len(COMPILED_MODULES)


def test_the_per_packet_modules_are_compiled_and_the_ctypes_one_is_not():
    for module in ("agent.core.codec", "agent.core.receiver", "agent.io.udp_receiver"):
        assert module in COMPILED_MODULES
    assert "agent.io.mmsg" not in COMPILED_MODULES  # ctypes structures: mypyc cannot


def test_extension_paths_follow_the_module_path_and_this_interpreters_suffix():
    suffix = importlib.machinery.EXTENSION_SUFFIXES[0]
    assert module_source("agent.core.sender") == Path("agent/core/sender.py")
    assert extension_name("agent.core.sender") == Path("agent/core/sender" + suffix)
    assert extension_name(f"{GROUP_NAME}__mypyc") == Path(f"{GROUP_NAME}__mypyc{suffix}")
