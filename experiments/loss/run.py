"""One loss run: a transfer while every fabric link drops at the mode's rate; its record
(with the loss the rules applied) and its time series."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping
from dataclasses import dataclass, field

from experiments.documents import PerfResult, PerfSample
from experiments.fabric_loss import FabricLoss, fabric_loss
from experiments.json_form import FLAT
from experiments.loss.modes import LossMode, Params, rate_text
from experiments.metrics import failed_transfer, transfer_metrics
from experiments.progress import event
from experiments.records import AgentFailure, Transfer
from experiments.timeline import RunClock, Series, flow_series, longest_stall
from experiments.transports import evs_used, requested_evs, transfer_options
from testbed.agents import TransferFailed, TransferSpec
from testbed.session import Testbed


@dataclass(frozen=True)
class LossRun:
    """One run's record: its mode, the routing policy asked for (None: the controller's
    default), the transfer, the loss the rules applied, and what makes the run not the
    experiment it claims to be (``problems``)."""

    mode: LossMode = field(metadata=FLAT)
    routing: str | None
    evs: int | None
    transfers: Mapping[str, Transfer]
    loss: FabricLoss
    problems: tuple[str, ...]


#: A run's time series: its one transfer's.
LossSeries = dict[str, Series]


def run_mode(
    testbed: Testbed, params: Params, mode: LossMode, seed: int
) -> tuple[LossRun, LossSeries]:
    """One transfer at the mode's loss rate; its record (with the loss the rules applied)
    and its time series."""
    del seed  # each run draws fresh EVs and fresh random drops; the seed labels it
    clock = RunClock()
    samples: list[PerfSample] = []

    def on_sample(sample: PerfSample) -> None:
        clock.observe(0, sample)
        samples.append(sample)

    spec = TransferSpec(
        params.source,
        params.destination,
        duration_s=params.duration_s,
        evs=requested_evs(mode.transport, params.mrc_evs),
        message_size=params.message_size,
        interval_s=params.bin_s,
        **transfer_options(mode.transport),
    )
    name = f"{params.source}->{params.destination}"
    testbed.set_fabric_loss(mode.loss_rate_percent / 100)
    rate = rate_text(mode.loss_rate_percent)
    event("fabric links drop UDP 4791 at %s %%; %s for %g s", rate, name, params.duration_s)
    launched = time.monotonic()
    try:
        result: PerfResult | TransferFailed = testbed.transfer(spec, on_sample)
    except TransferFailed as failure:
        result = failure
    finally:
        directions, lldp = testbed.fabric_loss_counters()
        testbed.clear_fabric_loss()
    points = flow_series(samples, 0.0)
    if isinstance(result, TransferFailed):
        transfer = failed_transfer(
            AgentFailure(
                error=str(result),
                failed_at_s=clock.failed_at(result.at, launched),
                error_code=result.code,
                bytes_confirmed=int(samples[-1]["total_bytes"]) if samples else 0,
            )
        )
    else:
        transfer = transfer_metrics(result)
    transfer = dataclasses.replace(
        transfer, longest_stall_s=longest_stall(points, transfer.failed_at_s)
    )
    loss = fabric_loss(directions, lldp, per_direction=True)
    event("loss off: %d of %d frames dropped", loss.frames_dropped, loss.frames_seen)
    problems = []
    if not directions:
        problems.append("the loss rules were not in place (no counters read)")
    elif loss.frames_seen == 0:
        problems.append("no UDP 4791 frame crossed a fabric link")
    record = LossRun(
        mode=mode,
        routing=params.routing or None,
        evs=evs_used(mode.transport, params.mrc_evs),
        transfers={name: transfer},
        loss=loss,
        problems=tuple(problems),
    )
    return record, {name: points}
