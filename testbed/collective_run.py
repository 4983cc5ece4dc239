"""Collective jobs on a running testbed: one rank per host, each on its host's agent.

The ranks connect to the agents' control sockets, which live in the run directory (the file
system every namespace shares), so the launcher drives every rank from the runner's own
process (``collective.job``); the data moves between the hosts' agents, over the fabric.
The rendezvous directory is kept in the run directory under the job's name, so a job that
went wrong leaves each rank's published record beside the agents' logs.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from collective.job import JobHooks, JobSpec, close_contexts, open_contexts, run_job
from collective.report import JobResult
from testbed.agents import HostAgents

_jobs = itertools.count(1)


def parse_hosts(text: str) -> list[str]:
    """``h1,h5,h9`` -> the hosts, in ring order; ValueError for a repeated or empty list."""
    hosts = [name.strip() for name in text.split(",") if name.strip()]
    if len(hosts) < 2:
        raise ValueError(f"a job needs at least two hosts, got {text!r}")
    if len(set(hosts)) != len(hosts):
        raise ValueError(f"a host is listed twice: {text}")
    return hosts


def run_collective(
    agents: HostAgents, hosts: Sequence[str], spec: JobSpec, hooks: JobHooks | None = None
) -> JobResult:
    """Run ``spec`` with rank r on ``hosts[r]``'s agent; the job's result (failed or not).
    ValueError for a host without an agent; collective.job.JobError for a job that could not
    be set up."""
    unknown = [host for host in hosts if host not in agents.agents]
    if unknown:
        raise ValueError(f"no agent runs on {unknown} (hosts: {', '.join(agents.agents)})")
    directory = agents.run_dir / f"collective-{next(_jobs)}"
    contexts = open_contexts([str(agents.socket_of(host)) for host in hosts])
    try:
        return run_job(spec, contexts, hosts=hosts, rendezvous_dir=directory, hooks=hooks)
    finally:
        close_contexts(contexts)
