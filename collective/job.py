"""The job launcher: N ranks, one per context on its host's agent, connected through a
rendezvous and driven to the end of their iterations.

The launcher runs every rank of the job in one thread of one process (``run_job``): a rank
only posts work requests and reads completions (its host's agent moves the bytes), so one
thread waiting on every context's socket keeps up with sixteen ranks, where sixteen Python
processes would take the CPU the agents need. Each rank still has its own context on its
own host's agent, its own QPs and region, and meets the others only through the rendezvous
and the network. ``python -m collective`` runs the same job from a shell.

Transports, as for a transfer (``mrc-agent send --transport``): ``mrc`` sprays over the
agent's EV profile 0 (its ``--evs``); ``single`` is MRC on one EV, an AUTO EV profile with
``ev_count`` 1 that the job installs on each agent through the controller API (as OCP's
node controller would; it needs a privileged context) and reuses when present. ``roce``
makes RC QPs (``QpType.RC``): the agent's RoCEv2 baseline, one path per QP, run as the job's
RoCE profile says (``collective.roce``: perftest's by default, go-back-N with a 67 ms timer
and one QP to each peer, so a QP whose path died fails within about half a second and the
job with it; NCCL's waits 4.3 s a retry over two QPs to each peer).

A job fails as a whole, as an NCCL communicator aborts: the first rank whose completion
comes back in error stops every rank, and so does a job in which nothing moves for
``stall_timeout_s`` (NCCL's watchdog); the failure records when (seconds after the start)
and why, with what each rank was waiting for.
"""

from __future__ import annotations

import contextlib
import select
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.api import ApiError, Context, Controller, EvMode, NotSupported, ProfileState
from agent.io.transport import Transport, transport_named
from collective.plans import Collective, check_size, check_slices, make_plan
from collective.rank import DEFAULT_SEGMENT_BYTES, DEFAULT_SLICES, Rank, RankWire
from collective.rendezvous import FileRendezvous
from collective.report import Failure, JobResult, iteration_record
from collective.roce import RoceSettings

#: EV profiles a job installs for a transport of a fixed EV count N: AUTO with N EVs, at this id
#: plus N (``single``'s one EV: 0x51).
FIXED_EV_PROFILE_BASE = 0x50
#: Largest fixed EV count a job can install a profile for (profile ids stay below 0x100).
MAX_FIXED_EVS = 0xFF - FIXED_EV_PROFILE_BASE
#: Longest wait between two looks at the ranks when nothing arrives (a compute phase ends).
MAX_WAIT_S = 0.05


class JobError(RuntimeError):
    """The job could not be set up (bad parameters, an agent refusing); nothing ran."""


@dataclass(frozen=True)
class JobSpec:
    """What to run: the collective, its size in bytes, iterations and transport (for RoCE,
    its profile, QPs to each peer and verbs timeout: ``collective.roce``)."""

    collective: Collective
    size: int
    iterations: int = 10
    transport: str = "mrc"
    #: Seconds of "compute" before every iteration (a training step's forward and backward).
    compute_s: float = 0.0
    segment_bytes: int = DEFAULT_SEGMENT_BYTES
    #: Slices each ring step is cut into, pipelined (``collective.pipeline``); 1: lockstep.
    slices: int = DEFAULT_SLICES
    #: The job fails when no rank progresses for this long.
    stall_timeout_s: float = 30.0
    #: A RoCE transport's profile (None: the default), QPs to each peer (None: the
    #: profile's) and verbs timeout (None: the profile's); an MRC transport takes none.
    roce_profile: str | None = None
    roce_qps: int | None = None
    roce_timeout: int | None = None

    def roce(self) -> RoceSettings | None:
        """How the job runs RoCE (None for an MRC transport); JobError for settings that do
        not go with the transport or are out of range."""
        try:
            transport = transport_named(self.transport)
            given = (self.roce_profile, self.roce_qps, self.roce_timeout)
            if not transport.is_roce:
                if any(value is not None for value in given):
                    raise ValueError(
                        f"transport {transport.name} takes no RoCE profile, QPs or timeout"
                    )
                return None
            return RoceSettings.resolve(*given)
        except ValueError as exc:
            raise JobError(str(exc)) from None

    def check(self, ranks: int) -> None:
        """JobError for parameters that cannot run on ``ranks`` ranks."""
        try:
            check_size(self.size, ranks)
            check_slices(self.size, ranks, self.slices)
        except ValueError as exc:
            raise JobError(str(exc)) from None
        try:
            transport = transport_named(self.transport)
        except ValueError as exc:
            raise JobError(str(exc)) from None
        self.roce()
        if transport.evs is not None and transport.evs > MAX_FIXED_EVS:
            raise JobError(f"transport {transport.name}: at most {MAX_FIXED_EVS} fixed EVs")
        if self.iterations < 1 or self.compute_s < 0 or self.stall_timeout_s <= 0:
            raise JobError("iterations >= 1, compute_s >= 0 and stall_timeout_s > 0 needed")
        if self.segment_bytes < 1:
            raise JobError("segment_bytes must be positive")


@dataclass
class JobHooks:
    """What a caller hears while the job runs (all called from the job's thread)."""

    #: Once every rank's QPs are connected: rank r's QP numbers on its host's agent (the
    #: numbers the agent's ``status`` lists its connections by).
    on_connected: Callable[[list[list[int]]], None] | None = None
    #: Once every rank is connected and the clock starts (its ``time.monotonic()``).
    on_start: Callable[[float], None] | None = None
    #: Each iteration once every rank finished it (``collective.report.iteration_record``).
    on_iteration: Callable[[dict[str, Any]], None] | None = None
    #: Set from another thread to stop the job (it fails with ``stop_reason``).
    stop: threading.Event = field(default_factory=threading.Event)
    stop_reason: str = "stopped by the launcher"


def ev_profile_for(ctx: Context, transport: Transport) -> int:
    """The EV profile a QP of ``transport`` names on ``ctx``'s agent: the default one, or for
    a transport of a fixed EV count (``single``: one) a profile with that many EVs, installed
    when the agent lacks it."""
    if transport.evs is None:
        return 0
    count = transport.evs
    profile = FIXED_EV_PROFILE_BASE + count
    evs = f"{count} EV{'s' if count > 1 else ''}"
    if not ctx.privileged:
        raise JobError(
            f"transport {transport.name} needs an EV profile with {evs}, which only the "
            "agent's controller may install (run as root or as the agent's user)"
        )
    controller = Controller(ctx)
    attrs, _ = controller.query_ev_profile(profile)
    state = attrs.get("cur_profile_state")
    if state == ProfileState.ONLINE.name:
        if attrs.get("ev_mode") == EvMode.AUTO.name and attrs.get("ev_count") == count:
            return profile
        raise JobError(
            f"EV profile {profile:#x} on this agent is in use with other settings ({attrs}); "
            f"transport {transport.name} needs it AUTO with {evs}"
        )
    if state != ProfileState.INIT.name:
        controller.modify_ev_profile(profile, profile_state=ProfileState.INIT)
    controller.modify_ev_profile(
        profile, profile_state=ProfileState.OFFLINE, ev_mode=EvMode.AUTO, ev_count=count
    )
    controller.modify_ev_profile(profile, profile_state=ProfileState.ONLINE)
    return profile


def socket_wait(contexts: Sequence[Context]) -> Callable[[float], None]:
    """Wait until any context's agent says something, at most the given seconds."""
    sockets = [ctx.link.sock for ctx in contexts]

    def wait(timeout: float) -> None:
        select.select(sockets, [], [], timeout)

    return wait


def run_job(
    spec: JobSpec,
    contexts: Sequence[Context],
    *,
    hosts: Sequence[str] = (),
    rendezvous_dir: Path | None = None,
    hooks: JobHooks | None = None,
    wait: Callable[[float], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
) -> JobResult:
    """Run ``spec`` with rank r on ``contexts[r]`` (its host's agent) to the end; the
    result, failed or not. JobError (before anything ran) for what cannot be set up."""
    hooks = hooks or JobHooks()
    ranks = len(contexts)
    spec.check(ranks)
    transport = transport_named(spec.transport)
    roce = spec.roce()
    wait = wait or socket_wait(contexts)
    members: list[Rank] = []
    try:
        for index, ctx in enumerate(contexts):
            members.append(
                Rank(
                    make_plan(spec.collective, index, ranks, spec.size),
                    ctx,
                    iterations=spec.iterations,
                    compute_s=spec.compute_s,
                    ev_profile_id=ev_profile_for(ctx, transport),
                    roce=roce,
                    segment_bytes=spec.segment_bytes,
                    slices=spec.slices,
                    clock=clock,
                )
            )
        with (
            contextlib.nullcontext(rendezvous_dir)
            if rendezvous_dir is not None
            else tempfile.TemporaryDirectory(prefix="mrc-collective-") as where
        ):
            rendezvous = FileRendezvous(Path(where), ranks)
            for member in members:
                rendezvous.publish("wire", member.rank, member.setup().to_json())
            wires = [RankWire.from_json(record) for record in rendezvous.gather("wire")]
            for member in members:
                member.connect(wires)
                rendezvous.publish("ready", member.rank, {"rank": member.rank})
            rendezvous.gather("ready")
    except NotSupported as exc:
        raise JobError(f"transport {spec.transport}: {exc}") from None
    except (ApiError, ValueError, TimeoutError) as exc:
        raise JobError(f"setting the job up failed: {exc}") from None
    if hooks.on_connected is not None:
        hooks.on_connected([sorted(m.qp_numbers) for m in members])
    return _drive(spec, members, list(hosts), hooks, wait, clock, roce)


def _drive(
    spec: JobSpec,
    members: list[Rank],
    hosts: list[str],
    hooks: JobHooks,
    wait: Callable[[float], None],
    clock: Callable[[], float],
    roce: RoceSettings | None,
) -> JobResult:
    """Run the connected ranks until all are done or the job fails."""
    started = clock()
    result = JobResult(
        spec.collective,
        len(members),
        spec.size,
        spec.iterations,
        spec.transport,
        spec.compute_s,
        started,
        [member.records for member in members],
        hosts=hosts,
        roce=roce,
        slices=spec.slices,
    )
    if hooks.on_start is not None:
        hooks.on_start(started)
    for member in members:
        member.start()
    last_move = started
    reported = 0
    while True:
        moved = False
        for member in members:
            moved |= member.progress()
        now = clock()
        if moved:
            last_move = now
        while reported < result.completed_iterations:
            if hooks.on_iteration is not None:
                hooks.on_iteration(iteration_record(result, reported))
            reported += 1
        failed = next((m for m in members if m.failure is not None), None)
        if failed is not None:
            assert failed.failure is not None
            at, reason = failed.failure
            result.failure = Failure(at - started, failed.rank, f"rank {failed.rank}: {reason}")
            break
        if all(m.finished for m in members):
            break
        if hooks.stop.is_set():
            result.failure = Failure(now - started, None, hooks.stop_reason)
            break
        if now - last_move > spec.stall_timeout_s:
            waiting = "; ".join(m.waiting_for() for m in members if not m.finished)
            result.failure = Failure(
                now - started, None, f"no progress for {spec.stall_timeout_s:g} s: {waiting}"
            )
            break
        if not moved:
            wait(MAX_WAIT_S)
    for member in members:
        member.abort("the job stopped")
    if result.failure is None:
        verdicts = [member.verify() for member in members]
        result.verified = [verdict.describe() for verdict in verdicts]
        result.wrong_ranks = [verdict.rank for verdict in verdicts if not verdict.ok]
        result.wrong_elements = sum(verdict.wrong for verdict in verdicts)
    return result


def open_contexts(sockets: Sequence[str]) -> list[Context]:
    """A context on each agent (its control socket); all closed again if one fails."""
    opened: list[Context] = []
    try:
        for path in sockets:
            opened.append(Context.open(path))
    except BaseException:
        for ctx in opened:
            ctx.close()
        raise
    return opened


def close_contexts(contexts: Sequence[Context]) -> None:
    """Close every context (the agents release the QPs and regions)."""
    for ctx in contexts:
        with contextlib.suppress(ApiError, OSError):
            ctx.close()
