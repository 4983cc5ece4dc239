"""spray's contenders: one MRC QP over 256 EVs, one path, and RoCE striped over 1, 4 and 16
QPs (``roce:adaptive:16qp``), each mode's label read back into the transfers it runs; the
summary holds MRC / single and, for aggregate goodput and link-load balance, the strongest
RoCE contender with MRC's ratio to it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from experiments import spray
from experiments.bottleneck import LINK_BOUND, RunBottleneck
from experiments.counters import MEMBER_COUNTERS
from experiments.experiment import parse_params
from experiments.json_form import to_json
from experiments.records import Failure, Run
from experiments.registry import EXPERIMENTS
from experiments.spray import SprayRun, link_balance
from experiments.stats import spread_problems
from hostenv.tbf import FRAME_BYTES
from testbed.agents import TransferFailed, TransferSpec
from tests.unit.experiments.run_records import cpu, measured, run_verdict, transfer
from topologies import load_topology

EXPERIMENT = EXPERIMENTS["spray"]


def modes(**settings: str) -> tuple[str, ...]:
    return EXPERIMENT.modes_of(parse_params(EXPERIMENT, settings))


# -- modes -------------------------------------------------------------------------------------


def test_by_default_mrc_meets_one_path_and_adaptive_roce_on_1_4_and_16_qps() -> None:
    assert modes() == (
        "mrc",
        "single",
        "roce:adaptive:1qp",
        "roce:adaptive:4qp",
        "roce:adaptive:16qp",
    )
    assert [EXPERIMENT.may_fail(mode) for mode in modes()] == [False, False, True, True, True]


def test_a_bare_roce_is_every_profile_asked_for_at_every_qp_count() -> None:
    assert modes(transports="mrc,roce", roce_profiles="nccl,perftest", roce_qps="2,16") == (
        "mrc",
        "roce:nccl:2qp",
        "roce:nccl:16qp",
        "roce:perftest:2qp",
        "roce:perftest:16qp",
    )
    # a contender named in full runs as named
    assert modes(transports="roce:nccl:8qp,mrc") == ("roce:nccl:8qp", "mrc")


@pytest.mark.parametrize(
    ("settings", "refusal"),
    [
        ({"roce_qps": "1,0"}, r"'0' is no QP count in 1\.\.256"),
        ({"roce_qps": "4,4"}, "a QP count is listed twice"),
        ({"roce_qps": ""}, "no QP count given"),
        ({"roce_profiles": "ib"}, "unknown RoCE profile ib"),
        ({"transports": "roce,roce:adaptive:4qp"}, "listed twice: roce:adaptive:4qp"),
        ({"transports": "mrc:4qp"}, "mrc takes no RoCE profile"),
    ],
)
def test_modes_it_cannot_run_are_refused_before_anything_starts(
    settings: dict[str, str], refusal: str
) -> None:
    with pytest.raises(ValueError, match=refusal):
        parse_params(EXPERIMENT, settings)


class _Testbed:
    """What run_mode asks of a testbed: its topology, counters, and the transfers (which
    fail here: the specs are what is looked at)."""

    def __init__(self) -> None:
        self.topology = load_topology("leaf-spine-4x4")
        self.specs: list[TransferSpec] = []

    def status(self) -> dict[str, Any]:
        return {"counters": {}}

    def transfer_all(self, specs: list[TransferSpec]) -> list[TransferFailed]:
        self.specs = specs
        return [TransferFailed("not run", "transfer_failed") for _ in specs]


@pytest.mark.parametrize(
    ("mode", "expected"),
    [
        ("mrc", {"transport": "mrc", "evs": 256, "roce_line_rate": None}),
        ("single", {"transport": "single", "evs": None, "roce_line_rate": None}),
        (
            "roce:adaptive:16qp",
            {
                "transport": "roce",
                "evs": None,
                "roce_profile": "adaptive",
                "roce_qps": 16,
                "roce_line_rate": 50.0 * FRAME_BYTES * 8,
            },
        ),
        (
            "roce:nccl:1qp",
            {
                "transport": "roce",
                "evs": None,
                "roce_profile": "nccl",
                "roce_qps": 1,
                "roce_line_rate": 50.0 * FRAME_BYTES * 8,
            },
        ),
    ],
)
def test_each_mode_runs_every_flow_as_its_label_says_roce_on_a_nic_at_one_links_rate(
    mode: str, expected: dict[str, Any]
) -> None:
    testbed = _Testbed()
    params = parse_params(EXPERIMENT, {"flows": "4"})
    record, _ = spray.run_mode(testbed, params, mode, 0)  # type: ignore[arg-type]
    assert len(testbed.specs) == 4 and len(record.transfers) == 4
    for spec in testbed.specs:
        assert {name: getattr(spec, name) for name in expected} == expected
        assert spec.total_bytes == 1 << 20 and spec.message_size == 16384
    assert record.evs == {"mrc": 256, "single": 1}.get(mode)


# -- the summary -------------------------------------------------------------------------------


def _run(goodput: float, sequence: int, most: int, fewest: int) -> Run[SprayRun]:
    record = SprayRun(
        transfers={},
        evs=None,
        aggregate_goodput_bps=goodput,
        link_packets={},
        link_counters=(MEMBER_COUNTERS,),
        link_packets_max=most,
        link_packets_min=fewest,
        links_unread=(),
    )
    verdict: RunBottleneck = run_verdict(LINK_BOUND, core=0.5, link=0.9)
    return measured(record, sequence, verdict, cpu(0.5, 0.4))


def test_the_link_balance_of_a_run_is_its_busiest_link_over_its_idlest() -> None:
    assert link_balance(_run(1e6, 0, 300, 100).record) == 3.0
    assert link_balance(_run(1e6, 0, 300, 0).record) is None, "an idle link: unbounded"
    cut_short = dataclasses.replace(
        _run(1e6, 0, 300, 100).record,
        transfers={"h1->h5": transfer(False, None, failure=Failure("retry counter exceeded"))},
    )
    assert link_balance(cut_short) is None, "a dead QP's run measured no spread"


def test_the_summary_holds_mrc_against_single_and_against_the_strongest_roce() -> None:
    runs = {
        "mrc": {0: _run(6e6, 0, 120, 100)},
        "single": {0: _run(4e6, 1, 400, 0)},
        "roce:adaptive:1qp": {0: _run(3e6, 2, 500, 0)},
        "roce:adaptive:4qp": {0: _run(4.5e6, 3, 300, 100)},
        "roce:adaptive:16qp": {0: _run(5e6, 4, 150, 100)},
    }
    summary = spray.summarize(runs, spray_target())
    figures = to_json(summary)
    assert isinstance(figures, dict)
    assert figures["goodput_ratio_mrc_over_single"] == [1.5]
    assert figures["roce:adaptive:4qp"]["link_load_max_over_min_mean"] == 3.0
    assert figures["single"]["link_load_max_over_min_seeds"] == 0
    goodput = figures["goodput_against_strongest_roce"]
    assert (goodput["strongest"], goodput["mrc_over_strongest"]) == ("roce:adaptive:16qp", 1.2)
    assert goodput["better"] == "higher"
    balance = figures["link_balance_against_strongest_roce"]
    assert (balance["strongest"], balance["better"]) == ("roce:adaptive:16qp", "lower")
    assert balance["mrc_over_strongest"] == pytest.approx(1.2 / 1.5)
    assert [label for label, _ in balance["roce_values"]] == [
        "roce:adaptive:16qp",
        "roce:adaptive:4qp",
        "roce:adaptive:1qp",
    ]
    assert spread_problems(figures) == []
    lines = spray.text(summary)
    assert lines[0].startswith("aggregate goodput MRC / single: 1.50 (1 seed)")
    assert lines[2] == (
        "aggregate goodput (higher is better): strongest RoCE roce:adaptive:16qp 5 Mbit/s, "
        "mrc 6 Mbit/s, mrc / strongest 1.20 (others: roce:adaptive:4qp 4.5, roce:adaptive:1qp 3)"
    )
    assert lines[3].startswith(
        "link load max/min (lower is better): strongest RoCE roce:adaptive:16qp 1.5, mrc 1.2, "
        "mrc / strongest 0.80"
    )
    assert any(line.startswith("roce:adaptive:16qp aggregate 5.000 Mbit/s") for line in lines)


def spray_target() -> Any:
    from experiments.capabilities import target_facts

    return target_facts("linux", None)


def test_the_figures_show_every_mode(tmp_path: Any) -> None:
    def run(goodput: float) -> Run[SprayRun]:
        record = SprayRun(
            transfers={"h1->h5": transfer(goodput_bps=goodput)},
            evs=None,
            aggregate_goodput_bps=goodput,
            link_packets={"l1-s1": 10, "l1-s2": None},
            link_counters=(MEMBER_COUNTERS,),
            link_packets_max=10,
            link_packets_min=10,
            links_unread=("l1-s2",),
        )
        return measured(record)

    runs = {mode: {0: run(1e6 * (n + 1))} for n, mode in enumerate(modes())}
    params = parse_params(EXPERIMENT, {})
    assert spray.draw(tmp_path, runs, {}, params) == ["flows.png", "links.png"]
    for name in ("flows.png", "links.png"):
        assert (tmp_path / name).read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
