"""What a CC profile means to the agent's core: the registry's controller for the profile's
algorithm applies its parameters (OCP's ``mrc_ctl_cc_nscc_cfg`` names for NSCC); a bad one is
refused with an error naming it."""

from __future__ import annotations

from typing import Any

from agent.api.errors import InvalidArgument, NotSupported
from agent.core.cc_registry import CcParameterError, api_algorithms, spec_for_api_algorithm
from agent.core.config import MrcConfig


def cc_algorithms() -> tuple[str, ...]:
    """CC algorithms the device offers: every registered controller's API name."""
    return api_algorithms()


def cc_config(base: MrcConfig, algorithm: str, config: dict[str, Any]) -> MrcConfig:
    """The core configuration a CC profile makes (``InvalidArgument`` names a bad key)."""
    if not isinstance(config, dict):
        raise InvalidArgument("must be an object of the algorithm's parameters", "cc_config")
    spec = spec_for_api_algorithm(algorithm)
    if spec is None:
        raise InvalidArgument(
            f"{algorithm!r} is not one of {', '.join(cc_algorithms())}", "algorithm"
        )
    for key, value in config.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InvalidArgument(f"must be a number >= 0, got {value!r}", f"cc_config.{key}")
    try:
        return spec.from_profile(base, config)
    except CcParameterError as exc:
        error = NotSupported if exc.unsupported else InvalidArgument
        raise error(str(exc), f"cc_config.{exc.parameter}") from None
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(str(exc), "cc_config") from None
