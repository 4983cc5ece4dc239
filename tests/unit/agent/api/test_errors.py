"""The host API's errors cross the control socket as the agent found them: the errno's class,
the field, the reason, and what a failed call still produced."""

from __future__ import annotations

import errno

from agent.api.errors import AgentGone, ApiError, InvalidArgument, TimedOut, from_json


def test_an_error_comes_back_as_its_errno_class_naming_the_field():
    sent = InvalidArgument("must be an integer", "ev_count")
    back = from_json(sent.to_json())
    assert type(back) is InvalidArgument and back.errno == errno.EINVAL
    assert (back.field, back.reason) == ("ev_count", "must be an integer")


def test_what_a_failed_call_produced_crosses_with_it():
    partial = {"responses": [{"req_id": 1, "port": 1, "rtt": 900, "adj_svc_time": 0}],
               "timed_out": [2]}  # fmt: skip
    back = from_json(TimedOut("1 of 2 EV probes unanswered", "rsp_timeout", partial).to_json())
    assert type(back) is TimedOut and back.partial == partial


def test_an_error_without_a_partial_result_sends_none():
    assert set(InvalidArgument("x", "y").to_json()) == {"errno", "message", "field"}
    assert from_json(InvalidArgument("x").to_json()).partial == {}


def test_a_malformed_report_is_the_agent_gone_or_a_plain_error():
    assert type(from_json("nonsense")) is AgentGone
    assert type(from_json({"errno": "EWHAT", "message": 3})) is ApiError
