"""The job's command line: the RoCE options and the slice count reach the job's spec as given
(the spec checks whether they go with the transport and the chunk)."""

from __future__ import annotations

import argparse

import pytest

from collective.cli import add_job_options, job_spec
from collective.rank import DEFAULT_SLICES


def _spec(*argv: str):
    parser = argparse.ArgumentParser()
    add_job_options(parser)
    spec, _note = job_spec(parser.parse_args(["allreduce", "--size", "4096", *argv]), 4)
    return spec


def test_roce_options_reach_the_job():
    spec = _spec(
        "--transport", "roce", "--roce-profile", "nccl", "--qps", "16", "--roce-timeout", "10"
    )
    assert (spec.transport, spec.roce_profile, spec.roce_qps, spec.roce_timeout) == (
        "roce",
        "nccl",
        16,
        10,
    )
    assert spec.roce() is not None and spec.roce().describe() == (
        "profile nccl, 16 QPs to each peer, timeout 10"
    )


def test_without_them_a_job_runs_mrc_with_no_roce_settings():
    spec = _spec()
    assert spec.transport == "mrc" and spec.roce() is None


def test_slices_reach_the_job_and_default_to_the_measured_count():
    assert _spec("--slices", "4").slices == 4
    assert _spec().slices == DEFAULT_SLICES


def test_a_slice_count_below_one_is_refused():
    with pytest.raises(SystemExit):
        _spec("--slices", "0")
