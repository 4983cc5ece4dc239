"""A job's RoCE settings: the profile's QP count unless the job gives one, the default profile
when it names none, and the words a report gives them."""

from __future__ import annotations

import pytest

from collective.roce import RoceSettings


def test_a_job_naming_nothing_runs_the_default_profile_on_its_qp_count():
    assert RoceSettings.resolve(None, None, None) == RoceSettings("perftest", 1)
    assert RoceSettings.resolve("nccl", None, None) == RoceSettings("nccl", 2)
    assert RoceSettings.resolve("adaptive", 16, 10) == RoceSettings("adaptive", 16, 10)


def test_settings_out_of_range_are_refused():
    with pytest.raises(ValueError, match="unknown RoCE profile"):
        RoceSettings.resolve("ib", None, None)
    with pytest.raises(ValueError, match="QPs to each peer"):
        RoceSettings.resolve("nccl", 65, None)
    with pytest.raises(ValueError, match="verbs timeout"):
        RoceSettings.resolve("nccl", None, -1)


def test_settings_in_words():
    assert RoceSettings("perftest", 1).describe() == "profile perftest, 1 QP to each peer"
    assert RoceSettings("nccl", 4, 10).describe() == "profile nccl, 4 QPs to each peer, timeout 10"
