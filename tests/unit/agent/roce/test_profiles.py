"""RoCE profiles: perftest's settings are today's defaults (the floor), NCCL's and a modern
NIC's are named with their values, and an unknown name is refused with the choices."""

from __future__ import annotations

import pytest

from agent.roce.config import RoceConfig
from agent.roce.profiles import (
    DEFAULT_PROFILE,
    PROFILES,
    RoceProfile,
    profile_named,
    profile_names,
)


def test_perftest_is_the_default_and_runs_the_baselines_defaults():
    assert DEFAULT_PROFILE == "perftest" == profile_names()[0]
    profile = profile_named("perftest")
    assert profile.config() == RoceConfig()
    assert (profile.timeout, profile.retry_cnt, profile.qps) == (14, 7, 1)
    assert not profile.selective_repeat and not profile.adaptive_retransmission


def test_nccl_waits_4_3_s_with_go_back_n_over_two_qps():
    profile = profile_named("nccl")
    config = profile.config()
    assert config.local_ack_timeout == pytest.approx(4.295, abs=1e-3)
    assert (config.retry_cnt, config.selective_repeat, config.adaptive_retransmission) == (
        7,
        False,
        False,
    )
    assert profile.qps == 2


def test_adaptive_is_nccls_settings_with_selective_repeat_and_the_adaptive_timer():
    config = profile_named("adaptive").config()
    assert config.selective_repeat and config.adaptive_retransmission
    assert config.timeout == profile_named("nccl").timeout
    assert config.min_rto == pytest.approx(1e-3)


def test_a_profile_changes_only_its_own_settings():
    base = RoceConfig(pmtu=4096, ack_every=4)
    config = profile_named("adaptive").config(base)
    assert (config.pmtu, config.ack_every) == (4096, 4)


def test_every_profile_names_its_source():
    assert set(PROFILES) == {"perftest", "nccl", "adaptive"}
    assert all(profile.source and profile.summary for profile in PROFILES.values())


def test_an_unknown_profile_is_refused_with_the_choices():
    with pytest.raises(ValueError, match="perftest, nccl, adaptive"):
        profile_named("mellanox")


def test_a_profile_is_checked_when_made():
    with pytest.raises(ValueError, match="at least one QP"):
        RoceProfile("x", "x", "x", 14, 7, False, False, 0)
