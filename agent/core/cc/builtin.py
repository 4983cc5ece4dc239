"""The built-in congestion controllers registered under their names: ``nscc`` (MRC's default,
UET's NSCC), ``dcqcn`` (RoCE's usual, rate-based) and ``fixed`` (no control, a baseline)."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from agent.core.cc.base import CongestionControl
from agent.core.cc.dcqcn import DcqcnRate
from agent.core.cc.fixed import FixedWindow
from agent.core.cc.nscc import Nscc
from agent.core.cc_registry import (
    CcParameterError,
    CongestionControlSpec,
    register_congestion_control,
)
from agent.core.config import DcqcnConfig, MrcConfig

#: OCP's ``mrc_ctl_cc_nscc_cfg`` field -> (NsccConfig field, or MrcConfig's max_window; a
#: float scale converts OCP's unit to seconds).
_NSCC_FIELDS = {
    "target_delay": ("target_queue_delay", 1e-9),
    "gamma": ("decrease_gain", 1.0),
    "eta": ("proportional_gain", 1.0),
    "fi": ("fair_increase_bytes", 1),
    "max_cwnd": ("max_window", 1),
}
#: NSCC parameters OCP names that this NSCC does not have: accepted only as 0 (unset).
_NSCC_ABSENT = (
    "disable_qa",
    "adjust_bytes_threshold",
    "adjust_period_threshold",
    "base_rtt",
    "fi_scale",
    "max_md_jump",
    "qa_gate",
    "qa_threshold",
)


def _nscc(config: MrcConfig) -> Nscc:
    return Nscc(config.nscc, config.initial_window, config.min_window, config.max_window)


def _nscc_profile(base: MrcConfig, params: Mapping[str, float]) -> MrcConfig:
    nscc: dict[str, float | int] = {}
    top: dict[str, float | int] = {}
    for key, value in params.items():
        if key in _NSCC_ABSENT:
            if value:
                raise CcParameterError(
                    "this NSCC has no such parameter (0 leaves it unset)", key, unsupported=True
                )
            continue
        if key not in _NSCC_FIELDS:
            raise CcParameterError("unknown NSCC parameter", key)
        target, scale = _NSCC_FIELDS[key]
        converted = value * scale if isinstance(scale, float) else int(value)
        (top if target == "max_window" else nscc)[target] = converted
    return dataclasses.replace(
        base,
        congestion_control="nscc",
        nscc=dataclasses.replace(base.nscc, **nscc) if nscc else base.nscc,  # type: ignore[arg-type]
        **top,  # type: ignore[arg-type]
    )


def _dcqcn_profile(base: MrcConfig, params: Mapping[str, float]) -> MrcConfig:
    known = {f.name for f in dataclasses.fields(DcqcnConfig)}
    for key in params:
        if key not in known:
            raise CcParameterError("unknown DCQCN parameter", key)
    return dataclasses.replace(
        base,
        congestion_control="dcqcn",
        dcqcn=dataclasses.replace(base.dcqcn, **params),  # type: ignore[arg-type]
    )


def _fixed_profile(base: MrcConfig, params: Mapping[str, float]) -> MrcConfig:
    unknown = set(params) - {"window"}
    if unknown:
        raise CcParameterError("the fixed window takes 'window' only", sorted(unknown)[0])
    window = int(params.get("window", base.initial_window))
    return dataclasses.replace(
        base,
        congestion_control="fixed",
        initial_window=window,
        max_window=max(window, base.max_window),
        min_window=min(base.min_window, window),
    )


_BUILTIN: tuple[CongestionControlSpec[MrcConfig, CongestionControl], ...] = (
    CongestionControlSpec(
        "nscc", "NSCC (UET): window by ECN and delay against a target; MRC's default",
        _nscc, "uet-1.0-nscc", _nscc_profile,
    ),
    CongestionControlSpec(
        "dcqcn", "DCQCN-like rate control on ECN (RoCE's usual), for comparison",
        lambda config: DcqcnRate(config.dcqcn, config.max_window), "testbed-dcqcn",
        _dcqcn_profile,
    ),
    CongestionControlSpec(
        "fixed", "a fixed window, no control: a baseline",
        lambda config: FixedWindow(config.initial_window), "testbed-fixed-window",
        _fixed_profile,
    ),
)  # fmt: skip
for _spec in _BUILTIN:
    register_congestion_control(_spec, builtin=True)
