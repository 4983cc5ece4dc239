"""What a CC profile means to the agent's core: OCP's algorithm names and configuration keys
(``mrc_ctl_cc_nscc_cfg``'s for NSCC) turned into an ``MrcConfig``, each bad key refused with
an error naming it."""

from __future__ import annotations

import dataclasses
from typing import Any, Final

from agent.api.errors import InvalidArgument, NotSupported
from agent.core.config import DcqcnConfig, MrcConfig

#: CC algorithms the device offers: UET's NSCC under its OCP name, and the testbed's own two.
CC_ALGORITHMS: Final = {
    "uet-1.0-nscc": "nscc",
    "testbed-dcqcn": "dcqcn",
    "testbed-fixed-window": "fixed",
}
_NSCC_FIELDS: Final = {
    # OCP's mrc_ctl_cc_nscc_cfg field -> (NsccConfig field, or MrcConfig's max_window;
    # a float scale converts OCP's unit to seconds)
    "target_delay": ("target_queue_delay", 1e-9),
    "gamma": ("decrease_gain", 1.0),
    "eta": ("proportional_gain", 1.0),
    "fi": ("fair_increase_bytes", 1),
    "max_cwnd": ("max_window", 1),
}
#: NSCC parameters OCP names that this NSCC does not have: accepted only as 0 (unset).
_NSCC_ABSENT: Final = (
    "disable_qa",
    "adjust_bytes_threshold",
    "adjust_period_threshold",
    "base_rtt",
    "fi_scale",
    "max_md_jump",
    "qa_gate",
    "qa_threshold",
)


def cc_config(base: MrcConfig, algorithm: str, config: dict[str, Any]) -> MrcConfig:
    """The core configuration a CC profile makes (``InvalidArgument`` names a bad key)."""
    if not isinstance(config, dict):
        raise InvalidArgument("must be an object of the algorithm's parameters", "cc_config")
    name = CC_ALGORITHMS[algorithm]
    for key, value in config.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or value < 0:
            raise InvalidArgument(f"must be a number >= 0, got {value!r}", f"cc_config.{key}")
    try:
        if name == "nscc":
            nscc: dict[str, Any] = {}
            top: dict[str, Any] = {}
            for key, value in config.items():
                if key in _NSCC_ABSENT:
                    if value:
                        raise NotSupported(
                            "this NSCC has no such parameter (0 leaves it unset)",
                            f"cc_config.{key}",
                        )
                    continue
                if key not in _NSCC_FIELDS:
                    raise InvalidArgument("unknown NSCC parameter", f"cc_config.{key}")
                target, scale = _NSCC_FIELDS[key]
                converted = value * scale if isinstance(scale, float) else int(value)
                (top if target == "max_window" else nscc)[target] = converted
            return dataclasses.replace(
                base,
                congestion_control="nscc",
                nscc=dataclasses.replace(base.nscc, **nscc) if nscc else base.nscc,
                **top,
            )
        if name == "dcqcn":
            known = {f.name for f in dataclasses.fields(DcqcnConfig)}
            for key in config:
                if key not in known:
                    raise InvalidArgument("unknown DCQCN parameter", f"cc_config.{key}")
            return dataclasses.replace(
                base,
                congestion_control="dcqcn",
                dcqcn=dataclasses.replace(base.dcqcn, **config),
            )
        unknown = set(config) - {"window"}
        if unknown:
            raise InvalidArgument(
                "the fixed window takes 'window' only", f"cc_config.{sorted(unknown)[0]}"
            )
        window = int(config.get("window", base.initial_window))
        return dataclasses.replace(
            base,
            congestion_control="fixed",
            initial_window=window,
            max_window=max(window, base.max_window),
            min_window=min(base.min_window, window),
        )
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(str(exc), "cc_config") from None
