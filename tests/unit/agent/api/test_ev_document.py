"""``mrc-agent ctl ev expand FILE``: JSON profiles in OCP's field names, checked, expanded and
printed as text or JSON, with no agent running."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from agent.api.ev_document import DocumentError, parse_document
from agent.cli import agent_main

STEV = {"ev_fmt_mode": "STEV", "fmt_fields": [{"width": 16}, {"width": 16}]}
TIERS = [
    {"width": 16, "init_val": "0x0100", "mask": "0x000f", "min_val": 1, "max_val": "0xf"},
    {"width": 16, "init_val": "0x0200", "mask": "0x000f", "min_val": 1, "max_val": "0xf"},
]


def _case(**profile) -> dict:
    return {"name": "tiers", "ev_fmt_profile": STEV, "ev_profile": profile}


def test_explicit_evs_are_expanded_with_their_ports():
    (case,) = parse_document(
        _case(ev_mode="EXP", fields=TIERS, evs=["0x5a", {"val": "0x12", "port": 2}])
    )
    assert [e.expansion.values for e in case.evs] == [(0x0105, 0x020A), (0x0101, 0x0202)]
    assert [e.port for e in case.evs] == [1, 2]
    out = case.to_json()
    assert out["evs"][0]["expanded"].startswith("0x0105020a000")
    assert out["evs"][0]["ev"] == "0x5a"
    assert out["evs"][0]["wire"] == {"udp_source_port": 0x0105, "flow_label": 0x020A}


def test_text_output_lists_profiles_then_each_evs_fields_and_expansion():
    (case,) = parse_document(_case(type="Explicit", fields=TIERS, evs=["0x5a"]))
    text = case.to_text().splitlines()
    assert "  type: STEV" in text
    assert "  type: Explicit" in text
    assert "    00: width=16, init_val=0x100, min=0x1 max=0xf mask=0xf" in text
    index = text.index("EXPANDED EVs:")
    assert text[index + 1] == "  00: fld0=0x0105 fld1=0x020a"
    assert text[index + 2] == "      0x0105020a" + "00" * 28


def test_generated_profiles_without_evs_generate_ev_count_of_them():
    (case,) = parse_document(_case(ev_mode="GEN", fields=TIERS, ev_count=225, seed=3))
    values = {e.expansion.values for e in case.evs}
    assert len(values) == 225  # 15 x 15: every combination of 1..15 in each tier
    assert all(0x0101 <= a <= 0x010F and 0x0201 <= b <= 0x020F for a, b in values)


@pytest.mark.parametrize(
    ("profile", "where"),
    [
        ({"ev_mode": "EXP", "fields": TIERS}, "ev_profile.evs"),
        ({"ev_mode": "GEN", "fields": TIERS, "evs": ["0x00"]}, "ev_profile.evs[0]"),
        ({"ev_mode": "EXP", "fields": TIERS, "evs": ["0x5a01"]}, "ev_profile.evs[0]"),
        ({"ev_mode": "EXP", "fields": TIERS, "evs": ["0x5"]}, "ev_profile.evs[0]"),
        ({"ev_mode": "AUTO", "fields": TIERS}, "ev_profile.ev_mode"),
        ({"ev_mode": "RANDOM", "fields": TIERS}, "ev_profile.ev_mode"),
        ({"ev_mode": "EXP", "fields": [{"width": 16, "mask": "0x1ffff"}]}, "fields[0].mask"),
        ({"ev_mode": "EXP", "fields": [{"width": 17}], "evs": []}, "fields[0].width"),
        ({"ev_mode": "EXP", "fields": [{"mask": 1}], "evs": []}, "fields[0].width"),
        ({"ev_mode": "EXP", "fields": [{"width": 8, "colour": 1}]}, "fields[0].colour"),
        ({"ev_mode": "EXP", "fields": [{"width": "eight"}]}, "fields[0].width"),
        ({"ev_mode": "GEN", "fields": TIERS, "ev_count": 226}, "ev_profile.ev_count"),
        ({"ev_mode": "EXP", "type": "GEN", "fields": TIERS}, "ev_profile.ev_mode"),
        ({"ev_mode": "EXP", "fields": TIERS, "evs": [{"val": "0x5a", "port": 0}]}, "port"),
    ],
)
def test_bad_documents_name_the_case_and_the_field(profile, where):
    with pytest.raises(DocumentError) as raised:
        parse_document(_case(**profile))
    message = str(raised.value)
    assert message.startswith("tiers: ")
    assert where in message


def test_a_bad_format_profile_is_named():
    document = {
        "ev_fmt_profile": {"type": "UDP", "fmt_fields": [{"width": 16}, {"width": 1}]},
        "ev_profile": {"type": "EXP", "fields": [{"width": 16, "mask": 1}], "evs": []},
    }
    with pytest.raises(DocumentError, match=r"case 0: ev_fmt_profile\.fmt_fields: 17 bits"):
        parse_document(document)


def test_the_command_prints_text_or_json_and_refuses_a_bad_file(tmp_path: Path, capsys):
    good = tmp_path / "good.json"
    good.write_text(json.dumps([_case(ev_mode="EXP", fields=TIERS, evs=["0x5a"])] * 2))
    assert agent_main.main(["ctl", "ev", "expand", str(good)]) == 0
    assert capsys.readouterr().out.count("EXPANDED EVs:") == 2
    assert agent_main.main(["ctl", "ev", "expand", "--json", str(good)]) == 0
    cases = json.loads(capsys.readouterr().out)
    assert cases[1]["evs"][0]["fields"] == [0x0105, 0x020A]

    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(_case(ev_mode="EXP", fields=TIERS, evs=["0x5a01"])))
    assert agent_main.main(["ctl", "ev", "expand", str(bad)]) == 2
    assert "ev_profile.evs[0]" in capsys.readouterr().err
    assert agent_main.main(["ctl", "ev", "expand", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "junk.json").write_text("{not json")
    assert agent_main.main(["ctl", "ev", "expand", str(tmp_path / "junk.json")]) == 2
