"""``python -m collective COLLECTIVE --socket AGENT0 --socket AGENT1 ... [options]``: one job,
rank r on the agent behind the r-th control socket (see ``collective.cli`` for the options).

    sudo .venv/bin/python -m collective allreduce --socket /run/a.sock --socket /run/b.sock \\
        --size 1M --iters 5

Exit 0 when every iteration ran and every rank's result was exact; 1 when the job failed or
a result was wrong; 2 for bad arguments or a job that could not be set up; 4 when an agent
does not answer.
"""

from __future__ import annotations

import argparse
import sys

from agent.api import ApiError
from collective.cli import Progress, add_job_options, final_report, job_spec
from collective.job import JobError, JobHooks, close_contexts, open_contexts, run_job
from collective.report import summarize


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m collective", description=__doc__.split("\n")[0]
    )
    add_job_options(parser)
    parser.add_argument(
        "--socket",
        action="append",
        required=True,
        metavar="PATH",
        help="an agent's control socket, once per rank, in rank order",
    )
    args = parser.parse_args(argv)
    if len(args.socket) < 2:
        parser.error("a job needs at least two ranks (--socket twice or more)")
    spec, note = job_spec(args, len(args.socket))
    if note:
        print(note, file=sys.stderr)
    try:
        contexts = open_contexts(args.socket)
    except ApiError as exc:
        print(f"python -m collective: {exc}", file=sys.stderr)
        return 4
    try:
        progress = Progress(print, quiet=args.json)
        result = run_job(spec, contexts, hosts=args.socket, hooks=JobHooks(on_iteration=progress))
    except JobError as exc:
        print(f"python -m collective: {exc}", file=sys.stderr)
        return 2
    finally:
        close_contexts(contexts)
    summary = summarize(result)
    print(final_report(summary, args.json))
    return 0 if result.ok else 1


if __name__ == "__main__":
    sys.exit(main())
