"""Targets by name: each kind of switch the controller drives is declared once, in its own
southbound package (:class:`~controller.southbound.target.ControllerTarget`), and every choice
list, check and capability question reads this registry: ``mrc-controller run --target``, the
configuration's ``target:``, the testbed's targets (``testbed.mininet.switch_target``), the
experiments' target facts and ``make doctor``.

The built-in ones are ``bmv2`` (the default), ``linux`` and ``tofino``; a new one is a package
of its own under ``controller/southbound`` declaring a ``ControllerTarget``, listed in
:data:`BUILTIN_TARGETS` (or registered with :func:`register_target`).
"""

from __future__ import annotations

from typing import Any

from controller.southbound.bmv2 import BMV2
from controller.southbound.linux.target import LINUX
from controller.southbound.target import ControllerTarget
from controller.southbound.tofino.target import TOFINO

#: In the order choice lists give them; the first is the default.
BUILTIN_TARGETS: tuple[ControllerTarget[Any], ...] = (BMV2, LINUX, TOFINO)
#: What the controller drives unless told otherwise.
DEFAULT_TARGET = BUILTIN_TARGETS[0].name

_TARGETS: dict[str, ControllerTarget[Any]] = {}


def register_target(target: ControllerTarget[Any]) -> ControllerTarget[Any]:
    """Add a target to every choice list and check; a taken name is refused."""
    if target.name in _TARGETS:
        raise ValueError(f"target {target.name!r} is registered already")
    _TARGETS[target.name] = target
    return target


def unregister_target(name: str) -> None:
    """Remove a target (a test's dummy one, say); the built-in ones stay."""
    if name not in {target.name for target in BUILTIN_TARGETS}:
        _TARGETS.pop(name, None)


def target_names() -> tuple[str, ...]:
    """Every registered target, the default first."""
    return tuple(_TARGETS)


def controller_target(name: str) -> ControllerTarget[Any]:
    """The target called ``name``; ``ValueError`` naming the choices otherwise."""
    target = _TARGETS.get(name)
    if target is None:
        raise ValueError(f"unknown target {name!r}: choose {', '.join(_TARGETS)}")
    return target


for _target in BUILTIN_TARGETS:
    register_target(_target)
