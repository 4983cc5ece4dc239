"""What a target declares: capabilities measured against BMv2's mrc.p4 (all of it by default),
and who marks ECN: a program always, the kernel's first ECN qdisc where it offers one."""

from __future__ import annotations

from controller.southbound.interface import LinkEvidence
from controller.southbound.target import Capabilities, EcnMarking, Feature

KERNEL = EcnMarking(qdiscs=("red", "codel", "fq_codel"))


def test_by_default_a_target_does_all_that_bmv2_does() -> None:
    capabilities = Capabilities()
    assert capabilities.trimming and capabilities.dscp_classes
    assert capabilities.member_counters and capabilities.restart
    assert capabilities.ecn.marks(None) is True
    assert capabilities.link_evidence is LinkEvidence.PROBES and capabilities.hardware is None


def test_a_lacking_feature_is_declared_with_why() -> None:
    capabilities = Capabilities(lacks={Feature.TRIMMING: "no queue to trim from"})
    assert not capabilities.trimming and capabilities.restart
    assert capabilities.lacks[Feature.TRIMMING] == "no queue to trim from"


def test_roce_data_gets_bmv2s_lossless_class_unless_the_target_says_why_not() -> None:
    assert Capabilities().lossless_roce
    assert Capabilities().roce_class == (
        "lossless class: no congestion drops; pause frames (PFC) not modelled"
    )
    without = Capabilities(lacks={Feature.LOSSLESS_ROCE: "one queue per port"})
    assert not without.lossless_roce
    assert without.roce_class == "no lossless RoCE class: one queue per port"


def test_a_program_marks_whatever_the_kernel() -> None:
    program = EcnMarking(program="mrc.p4")
    assert program.marker(None) == "mrc.p4" and program.marks({}) is True
    assert not program.by_kernel


def test_the_kernel_marks_with_the_first_ecn_qdisc_it_offers() -> None:
    assert KERNEL.by_kernel
    assert KERNEL.marker({"red": False, "codel": True, "fq_codel": True}) == "codel"
    assert KERNEL.marks({"red": True}) is True
    assert KERNEL.marks({"red": False, "codel": False}) is False
    assert KERNEL.marker({}) is None


def test_unprobed_kernel_marking_is_unknown_and_no_marker_means_none() -> None:
    assert KERNEL.marks(None) is None and KERNEL.marker(None) is None
    assert EcnMarking().marks(None) is False and not EcnMarking().by_kernel
