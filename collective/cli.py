"""The job's command line, shared by ``python -m collective`` and the testbed CLI's
``collective`` command: ``COLLECTIVE [--size 16M] [--iters 10] [--transport mrc|single|roce]
[--roce-profile perftest|nccl|adaptive] [--qps N] [--roce-timeout N] [--compute S]
[--segment 256K] [--slices N] [--stall-timeout S] [--json]``.

Progress is printed per iteration as it completes (nccl-tests' columns), then the job's
summary (``collective.report.text``), or with ``--json`` one JSON object of the summary.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from typing import Any

from agent.cli.common import parse_size, positive_float, positive_int
from agent.io.transport import transport_names
from agent.roce.profiles import DEFAULT_PROFILE, PROFILES, profile_names
from collective.job import JobSpec
from collective.plans import Collective, parse_collective, round_size
from collective.rank import DEFAULT_SEGMENT_BYTES, DEFAULT_SLICES
from collective.report import header, iteration_line, summarize, text

DEFAULT_SIZE = 16 << 20
DEFAULT_ITERATIONS = 10


def _collective(text: str) -> Collective:
    try:
        return parse_collective(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _non_negative(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 <= value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}")
    return value


def add_job_options(parser: argparse.ArgumentParser) -> None:
    """The collective and its options (not where the ranks run)."""
    parser.add_argument(
        "collective",
        type=_collective,
        help="allreduce, allgather, reducescatter or alltoall",
    )
    parser.add_argument(
        "--size",
        type=parse_size,
        default=DEFAULT_SIZE,
        help="bytes of the buffer (16M; rounded down to 4 x ranks)",
    )
    parser.add_argument("--iters", type=positive_int, default=DEFAULT_ITERATIONS)
    parser.add_argument("--transport", choices=transport_names(), default="mrc")
    parser.add_argument(
        "--roce-profile",
        choices=profile_names(),
        help="with --transport roce, the RoCE its QPs run: "
        + "; ".join(f"{name}: {profile.summary}" for name, profile in PROFILES.items())
        + f" (default {DEFAULT_PROFILE})",
    )
    parser.add_argument(
        "--qps",
        type=positive_int,
        metavar="N",
        help="with --transport roce, RC QPs each rank opens to each peer, its WRITEs "
        "round-robin over them (default: the profile's, perftest 1, nccl 2)",
    )
    parser.add_argument(
        "--roce-timeout",
        type=int,
        metavar="N",
        help="with --transport roce, the QPs' local ACK timeout, 4.096 us x 2^N (default: "
        "the profile's)",
    )
    parser.add_argument(
        "--compute", type=_non_negative, default=0.0, help="seconds of compute per iteration"
    )
    parser.add_argument(
        "--segment", type=parse_size, default=DEFAULT_SEGMENT_BYTES, help="largest WRITE"
    )
    parser.add_argument(
        "--slices",
        type=positive_int,
        default=DEFAULT_SLICES,
        metavar="N",
        help="cut each ring step into N slices that flow while the previous one is reduced "
        f"(NCCL's pipelining; 1: steps in lockstep; default {DEFAULT_SLICES})",
    )
    parser.add_argument(
        "--stall-timeout",
        type=positive_float,
        default=30.0,
        help="the job fails when nothing moves for this long",
    )
    parser.add_argument("--json", action="store_true", help="print the summary as JSON")


def job_spec(args: argparse.Namespace, ranks: int) -> tuple[JobSpec, str | None]:
    """The spec the options ask for on ``ranks`` ranks, and a note when the size was
    rounded to equal float32 chunks."""
    size = round_size(args.size, ranks)
    note = None if size == args.size else f"size rounded to {size} bytes ({ranks} equal chunks)"
    spec = JobSpec(
        args.collective,
        size,
        iterations=args.iters,
        transport=args.transport,
        compute_s=args.compute,
        segment_bytes=args.segment,
        slices=args.slices,
        stall_timeout_s=args.stall_timeout,
        roce_profile=args.roce_profile,
        roce_qps=args.qps,
        roce_timeout=args.roce_timeout,
    )
    return spec, note


class Progress:
    """Prints each iteration as it completes (the header before the first)."""

    def __init__(self, write: Callable[[str], None], quiet: bool = False) -> None:
        self.write = write
        self.quiet = quiet
        self._header = False

    def __call__(self, record: dict[str, Any]) -> None:
        if self.quiet:
            return
        if not self._header:
            self.write(header())
            self._header = True
        self.write(iteration_line(record))


def final_report(summary: dict[str, Any], as_json: bool) -> str:
    """The job's summary as text lines or one JSON object."""
    if as_json:
        return json.dumps(summary, indent=2)
    return "\n".join(text(summary))


__all__ = ["Progress", "add_job_options", "final_report", "job_spec", "summarize"]
