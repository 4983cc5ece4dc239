"""Congestion controllers by name: each is declared once, and every choice list, check and
factory reads this registry (as aioquic chooses its congestion control).

A controller is a :class:`CongestionControlSpec`: its name (``--cc``,
``MrcConfig.congestion_control``), how to build it from a configuration, the name the host
API's CC profiles give it, and how a profile's parameters change the configuration. The
built-in ones (NSCC, DCQCN, a fixed window) are registered by ``agent.core.cc.builtin`` when the
``agent.core`` package loads; a new one is a module that calls
:func:`register_congestion_control` (docs/extending.md). The registry sits beside the
configuration, not in ``agent.core.cc``, because the configuration checks names against it
and the controllers import the configuration.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

#: The core's configuration (``MrcConfig``) and a controller (``CongestionControl``): type
#: parameters here, since the configuration imports this module and the controllers import
#: the configuration (``agent.core.cc`` gives the typed factory).
Config = TypeVar("Config")
Controller = TypeVar("Controller")


class CcParameterError(ValueError):
    """A CC profile parameter is refused; ``parameter`` names it. ``unsupported``: the name is
    known (OCP has it) but this controller has no such parameter."""

    def __init__(self, message: str, parameter: str, unsupported: bool = False) -> None:
        super().__init__(message)
        self.parameter = parameter
        self.unsupported = unsupported


@dataclass(frozen=True)
class CongestionControlSpec(Generic[Config, Controller]):
    """One congestion controller, as the registry knows it."""

    #: ``--cc`` and ``MrcConfig.congestion_control``.
    name: str
    #: One line for choice lists and docs.
    summary: str
    create: Callable[[Config], Controller]
    #: The algorithm name of the host API's CC profiles (OCP's where OCP names it).
    api_algorithm: str
    #: A CC profile's parameters applied to a configuration; ``CcParameterError`` or
    #: ``ValueError`` for a bad one.
    from_profile: Callable[[Config, Mapping[str, float]], Config]


_SPECS: dict[str, CongestionControlSpec[Any, Any]] = {}
_BUILTIN: set[str] = set()


def register_congestion_control(
    spec: CongestionControlSpec[Any, Any], *, builtin: bool = False
) -> CongestionControlSpec[Any, Any]:
    """Add a controller; a second one under a taken name or API algorithm is refused.
    ``builtin``: one of ``agent.core.cc.builtin``'s, which cannot be unregistered."""
    for other in _SPECS.values():
        if spec.name == other.name or spec.api_algorithm == other.api_algorithm:
            raise ValueError(f"congestion control {spec.name!r} ({spec.api_algorithm}) is taken")
    _SPECS[spec.name] = spec
    if builtin:
        _BUILTIN.add(spec.name)
    return spec


def unregister_congestion_control(name: str) -> None:
    """Remove a controller (a test's dummy one, say); the built-in ones stay (``MrcConfig``'s
    default is one of them)."""
    if name not in _BUILTIN:
        _SPECS.pop(name, None)


def congestion_control_names() -> tuple[str, ...]:
    """Every registered name, the default (``nscc``) first."""
    return tuple(_SPECS)


def congestion_control_spec(name: str) -> CongestionControlSpec[Any, Any]:
    """The controller called ``name``; ``ValueError`` naming the choices otherwise."""
    spec = _SPECS.get(name)
    if spec is None:
        raise ValueError(
            f"unknown congestion control {name!r}: choose {', '.join(congestion_control_names())}"
        )
    return spec


def spec_for_api_algorithm(algorithm: str) -> CongestionControlSpec[Any, Any] | None:
    """The controller a host API CC profile's algorithm names, or None."""
    return next((s for s in _SPECS.values() if s.api_algorithm == algorithm), None)


def api_algorithms() -> tuple[str, ...]:
    return tuple(spec.api_algorithm for spec in _SPECS.values())
