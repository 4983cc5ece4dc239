"""Figure styles: every contender keeps its colour, and the variants of one contender (a
swept timeout, a QP count) share it but are drawn so that a reader can tell them apart."""

from __future__ import annotations

from experiments.plots import (
    MODE_COLOURS,
    colour_of,
    hatch_of,
    line_style,
)


def test_a_variant_takes_its_contenders_colour():
    assert colour_of("roce:perftest:t10") == MODE_COLOURS["roce:perftest"]
    assert colour_of("roce:adaptive:16qp (path cut)") == MODE_COLOURS["roce:adaptive"]
    assert colour_of("mrc (256 EVs)") == MODE_COLOURS["mrc"]


def test_a_label_without_a_colour_of_its_own_gets_matplotlibs_next():
    assert colour_of("tcp") is None
    assert colour_of("") is None


def test_contenders_are_solid_and_each_variant_of_one_is_dashed_its_own_way():
    labels = ["mrc", "single", "roce:perftest", "roce:perftest:t10", "roce:perftest:t12"]
    styles = {label: line_style(label, labels) for label in labels}
    assert styles["mrc"] == styles["single"] == styles["roce:perftest"] == "-"
    assert "-" != styles["roce:perftest:t10"] != styles["roce:perftest:t12"] != "-"


def test_variants_of_different_contenders_are_told_apart_by_colour_and_style():
    labels = ["roce:adaptive:1qp", "roce:adaptive:4qp", "roce:nccl:2qp"]
    assert len({hatch_of(label, labels) for label in labels[:2]}) == 2
    assert colour_of(labels[2]) != colour_of(labels[0])
    assert hatch_of("mrc", ["mrc", *labels]) is None
