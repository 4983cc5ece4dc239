"""A RoCE transfer's setup from its options: the profile's settings and QP count, the verbs
options, ``--qps`` and the NIC's line rate over them, and unknown profiles refused with the
choices."""

from __future__ import annotations

import pytest

from agent.io.errors import UsageError
from agent.io.transport import (
    MRC,
    ROCE,
    RoceSetup,
    check_transport_options,
    roce_config_for,
    roce_setup_for,
)
from agent.roce import DcqcnParams, RoceConfig
from wire.dscp import DscpMap


def test_without_a_profile_a_roce_transfer_runs_perftests_settings_on_one_qp():
    setup = roce_setup_for(DscpMap())
    assert setup == RoceSetup(RoceConfig(), qps=1, profile="perftest")


def test_a_profile_brings_its_settings_and_its_qp_count():
    setup = roce_setup_for(DscpMap(), profile="nccl")
    assert (setup.config.timeout, setup.config.retry_cnt, setup.qps) == (20, 7, 2)
    assert setup.profile == "nccl" and not setup.config.selective_repeat
    adaptive = roce_setup_for(DscpMap(), profile="adaptive").config
    assert adaptive.selective_repeat and adaptive.adaptive_retransmission


def test_the_verbs_options_and_qps_override_the_profiles_values():
    dscp = DscpMap().replace({"roce_data": 30})
    setup = roce_setup_for(dscp, profile="nccl", timeout=12, retry_cnt=2, qps=16, pmtu=4096)
    assert (setup.config.timeout, setup.config.retry_cnt, setup.qps) == (12, 2, 16)
    assert (setup.config.pmtu, setup.config.dscp.roce_data) == (4096, 30)
    assert roce_config_for(dscp, profile="adaptive", timeout=16).selective_repeat


def test_an_unknown_profile_or_qp_count_is_refused_naming_the_option():
    with pytest.raises(UsageError, match=r"--roce-profile: unknown RoCE profile 'cx7'.*nccl"):
        roce_setup_for(DscpMap(), profile="cx7")
    with pytest.raises(UsageError, match="--qps must be in 1-64"):
        roce_setup_for(DscpMap(), qps=0)


def test_roce_options_without_the_roce_transport_are_refused():
    with pytest.raises(UsageError, match="--roce-profile, --qps configure RoCE QPs"):
        check_transport_options(MRC, roce_profile="nccl", qps=4)
    check_transport_options(ROCE, roce_profile="nccl", qps=4)


def test_a_line_rate_scales_the_qps_dcqcn_and_none_keeps_ten_gigabit():
    assert roce_setup_for(DscpMap(), profile="nccl").config.dcqcn == DcqcnParams()
    setup = roce_setup_for(DscpMap(), profile="nccl", line_rate=4e5)
    # bits/s in, bytes/s inside; nccl's two QPs share the port
    assert setup.config.dcqcn == DcqcnParams.scaled_to(5e4, 2)
    assert (setup.config.timeout, setup.qps) == (20, 2)  # the profile's settings stay


@pytest.mark.parametrize("qps", [1, 4, 16])
def test_a_transfer_striped_over_more_qps_never_sends_faster_than_its_port(qps):
    setup = roce_setup_for(DscpMap(), profile="adaptive", qps=qps, line_rate=4.4e5)
    assert setup.qps == qps
    assert setup.config.dcqcn.line_rate * qps == pytest.approx(4.4e5 / 8)


@pytest.mark.parametrize("line_rate", [0.0, -4e5, 5e4, float("nan")])
def test_a_line_rate_not_positive_or_below_100_kbits_is_refused_naming_the_option(line_rate):
    with pytest.raises(UsageError, match=r"--roce-line-rate: .*100000-1\.6e\+12 bit/s"):
        roce_setup_for(DscpMap(), line_rate=line_rate)


def test_a_line_rate_without_the_roce_transport_is_refused():
    with pytest.raises(UsageError, match="--roce-line-rate configure RoCE QPs"):
        check_transport_options(MRC, roce_line_rate=4e5)
    check_transport_options(ROCE, roce_line_rate=4e5)
