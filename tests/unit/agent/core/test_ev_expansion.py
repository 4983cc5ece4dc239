"""EV expansion, from the rules: a compact EV's bits fill each field's mask, the fields'
values are packed into the format's widths, left-aligned in 32 bytes.

Each worked example below was computed by hand from the rules in
``agent/core/ev_expansion.py``'s docstring; the tables say why each expected value is what it
is.
"""

from __future__ import annotations

import pytest

from agent.core.ev_expansion import (
    MAX_EV_BYTES,
    EvField,
    EvMode,
    FormatMode,
    ProfileError,
    check_fields,
    check_format,
    check_generated,
    expand,
    field_values,
    generate,
    generation_count,
    parse_ev,
    wire_ev,
)

FULL16 = EvField(width=16, mask=0xFFFF)


def _hex(expanded: bytes, nbytes: int) -> str:
    assert expanded[nbytes:] == bytes(MAX_EV_BYTES - nbytes), "bits past the fields are zero"
    return expanded[:nbytes].hex()


# (case, format widths, fields, compact EV, field values, expanded bytes in hex)
WORKED = [
    (
        # Two full 16-bit fields: the compact EV is copied as it is.
        "two full fields",
        [16, 16],
        [FULL16, FULL16],
        "0x1234abcd",
        [0x1234, 0xABCD],
        "1234abcd",
    ),
    (
        # A fixed tier number in each field's upper byte, 4 generated bits in its low nibble:
        # 0x5a = 0101 1010 gives field 0 the bits 0101 and field 1 the bits 1010.
        "fixed high byte, 4-bit low nibble",
        [16, 16],
        [
            EvField(width=16, init_val=0x0100, mask=0x000F),
            EvField(width=16, init_val=0x0200, mask=0x000F),
        ],
        "0x5a",
        [0x0105, 0x020A],
        "0105020a",
    ),
    (
        # A split mask 0x0f0f: 8 bits go into bits 11-8 and 3-0, the first EV bit highest.
        # 0xa5 = 1010 0101: 1010 -> bits 11-8, 0101 -> bits 3-0; 0x1000 stays.
        "split mask keeps the init bits between",
        [16],
        [EvField(width=16, init_val=0x1000, mask=0x0F0F)],
        "0xa5",
        [0x1A05],
        "1a05",
    ),
    (
        # Mask bits overwrite the init value where they lie: 0xff with mask 0x0f and bits
        # 0000 leaves 0xf0.
        "mask bits overwrite init bits",
        [8],
        [EvField(width=8, init_val=0xFF, mask=0x0F)],
        "0x00",
        [0xF0],
        "f0",
    ),
    (
        # 4-bit fields in 8-bit format slots are right-aligned, zero above: 0x3c -> 3 and c,
        # packed as 0000 0011 0000 1100.
        "narrow fields sit at the bottom of wide slots",
        [8, 8],
        [EvField(width=4, mask=0xF), EvField(width=4, mask=0xF)],
        "0x3c",
        [0x3, 0xC],
        "030c",
    ),
    (
        # SRv6: a fixed 32-bit locator (mask 0) and two of the format's four 16-bit uSIDs;
        # the format's last two uSIDs are not used, so the address ends there.
        "SRv6 locator and a subset of uSIDs",
        [32, 16, 16, 16, 16],
        [EvField(width=32, init_val=0xCAFECAFE), FULL16, FULL16],
        "0x11112222",
        [0xCAFECAFE, 0x1111, 0x2222],
        "cafecafe11112222",
    ),
    (
        # Three tiers of 8, 4 and 4 bits in a 16-bit STEV: 0xb7 0x3c -> 0xb7, 0x3, 0xc.
        "three tiers",
        [8, 4, 4],
        [EvField(width=8, mask=0xFF), EvField(width=4, mask=0xF), EvField(width=4, mask=0xF)],
        "0xb73c",
        [0xB7, 0x3, 0xC],
        "b73c",
    ),
]


@pytest.mark.parametrize(
    ("widths", "fields", "ev", "values", "expanded"),
    [case[1:] for case in WORKED],
    ids=[case[0] for case in WORKED],
)
def test_worked_examples(widths, fields, ev, values, expanded):
    check_fields(widths, fields)
    result = expand(widths, fields, parse_ev(ev))
    assert list(result.values) == values
    assert _hex(result.expanded, len(expanded) // 2) == expanded
    assert result.hex == "0x" + expanded + "00" * (MAX_EV_BYTES - len(expanded) // 2)


def test_srv6_with_srh_puts_the_segment_after_the_address():
    # 32-bit locator + six 16-bit uSIDs = the 128-bit outer address; then a second locator
    # and two uSIDs: the SRH segment starts at byte 16.
    widths = [32, *[16] * 6, 32, 16, 16]
    fields = [EvField(32, init_val=0xCAFECAFE), *[FULL16] * 6, EvField(32, init_val=0xDECAFBAD)]
    fields += [FULL16, FULL16]
    check_format(FormatMode.SRV6, widths)
    check_fields(widths, fields)
    ev = parse_ev("0x" + "".join(f"{n:04x}" for n in range(1, 9)))
    expanded = expand(widths, fields, ev).expanded
    assert expanded[:16].hex() == "cafecafe" + "000100020003000400050006"
    assert expanded[16:24].hex() == "decafbad00070008"
    assert expanded[24:] == bytes(8)


def test_an_ev_with_bits_past_its_fields_is_refused():
    fields = [EvField(width=8, mask=0xFF)]
    with pytest.raises(ProfileError, match="past the 8 bits") as raised:
        field_values(fields, parse_ev("0x1201"), index=3)
    assert raised.value.field == "evs[3]"


def test_fixed_fields_take_no_bits_so_their_ev_is_all_zero():
    fields = [EvField(width=16, init_val=0x4242)]
    assert expand([16], fields, parse_ev("0x00")).values == (0x4242,)
    with pytest.raises(ProfileError):
        expand([16], fields, parse_ev("0x01"))


# (fields against format [16, 16], the field the error names, words it says)
BAD_FIELDS = [
    ([FULL16, FULL16, FULL16], "fields", "more than the format's 2"),
    ([EvField(width=32, mask=1)], "fields[0].width", "do not fit format field 0"),
    ([EvField(width=8, init_val=0x100)], "fields[0].init_val", "wider than 8 bits"),
    ([EvField(width=8, mask=0x100)], "fields[0].mask", "outside the field's 8"),
    ([EvField(width=8, mask=0x3, max_val=4)], "fields[0].max_val", "mask's 2 bits"),
    ([EvField(width=0)], "fields[0].width", "1-32"),
    ([EvField(width=8, init_val=-1)], "fields[0].init_val", "32-bit"),
]


@pytest.mark.parametrize(("fields", "field", "words"), BAD_FIELDS)
def test_profiles_that_do_not_fit_their_format_name_the_field(fields, field, words):
    with pytest.raises(ProfileError, match=words) as raised:
        check_fields([16, 16], fields)
    assert raised.value.field == field


def test_fields_wider_in_all_than_the_format_are_refused():
    with pytest.raises(ProfileError, match="16 bits in all, wider than the format's 12") as raised:
        check_fields([8, 4], [EvField(8), EvField(8)])
    assert raised.value.field == "fields"


def test_generated_min_above_max_is_refused():
    with pytest.raises(ProfileError) as raised:
        check_fields([8], [EvField(width=8, mask=0xF, min_val=9, max_val=8)], EvMode.GEN)
    assert raised.value.field == "fields[0].min_val"


@pytest.mark.parametrize(
    ("mode", "widths", "field", "words"),
    [
        (FormatMode.STEV, [16, 16, 1], "fmt_fields", "33 bits"),
        (FormatMode.UDP, [8, 9], "fmt_fields", "17 bits"),
        (FormatMode.STEV, [0], "fmt_fields[0].width", "1-32"),
        (FormatMode.SRV6, [33], "fmt_fields[0].width", "1-32"),
        (FormatMode.STEV, [], "fmt_fields", "at least one"),
    ],
)
def test_formats_wider_than_their_mode_carries_are_refused(mode, widths, field, words):
    with pytest.raises(ProfileError, match=words) as raised:
        check_format(mode, widths)
    assert raised.value.field == field


def test_srv6_formats_may_fill_both_addresses():
    check_format(FormatMode.SRV6, [32] * 8)
    with pytest.raises(ProfileError):
        check_format(FormatMode.SRV6, [32] * 8 + [1])


@pytest.mark.parametrize("text", ["", "0x", "0x123", "zz", "0x" + "00" * 33, "12 34"], ids=repr)
def test_evs_that_are_not_whole_hex_bytes_are_refused(text):
    with pytest.raises(ProfileError):
        parse_ev(text, "evs[0]")


def test_evs_are_read_from_their_first_digit_and_padded_at_the_end():
    assert parse_ev("0xAB") == b"\xab" + bytes(31)
    assert parse_ev("cd01") == b"\xcd\x01" + bytes(30)


def test_generation_enumerates_every_ev_when_asked_for_all_of_them():
    # Field 0: values 1..3 in 2 bits; field 1: values 0..1 in 1 bit: 3 x 2 = 6 EVs, first
    # field most significant: (1,0) (1,1) (2,0) (2,1) (3,0) (3,1) -> 3-bit strings.
    fields = [EvField(width=8, mask=0x3, min_val=1, max_val=3), EvField(width=8, mask=0x1)]
    check_fields([8, 8], fields, EvMode.GEN)
    assert generation_count(fields) == 6
    evs = generate(fields, 6)
    assert [ev[0] >> 5 for ev in evs] == [0b010, 0b011, 0b100, 0b101, 0b110, 0b111]
    assert expand([8, 8], fields, evs[0]).values == (1, 0)


def test_generated_samples_are_distinct_within_range_and_fixed_by_the_seed():
    fields = [EvField(width=16, init_val=0x100, mask=0xFF, min_val=0, max_val=179), FULL16]
    evs = generate(fields, 500, seed=7)
    assert len(set(evs)) == 500
    assert evs == generate(fields, 500, seed=7)
    assert evs != generate(fields, 500, seed=8)
    for index, ev in enumerate(evs):
        check_generated(fields, ev, index)
        assert expand([16, 16], fields, ev).values[0] - 0x100 <= 179


def test_asking_more_evs_than_the_fields_can_make_is_refused():
    with pytest.raises(ProfileError, match="only 4") as raised:
        generate([EvField(width=4, mask=0x3)], 5)
    assert raised.value.field == "ev_count"


def test_generated_evs_outside_the_range_are_refused():
    fields = [EvField(width=8, mask=0xF, min_val=1, max_val=0xF)]
    with pytest.raises(ProfileError, match="outside") as raised:
        check_generated(fields, parse_ev("0x00"), 2)
    assert raised.value.field == "evs[2]"


@pytest.mark.parametrize(
    ("mode", "ipv6", "expanded", "value"),
    [
        # STEV: source port, then the flow label (IPv6 only: IPv4 has none).
        (FormatMode.STEV, True, "c0011234", 0xC0011234),
        (FormatMode.STEV, False, "c0011234", 0xC0010000),
        # UDP: the source port alone.
        (FormatMode.UDP, True, "c001", 0xC0010000),
    ],
)
def test_expanded_evs_map_to_source_port_and_flow_label(mode, ipv6, expanded, value):
    buffer = bytes.fromhex(expanded).ljust(MAX_EV_BYTES, b"\0")
    assert wire_ev(mode, buffer, ipv6) == value


def test_srv6_and_port_zero_cannot_go_on_the_wire():
    with pytest.raises(ProfileError, match="SRv6"):
        wire_ev(FormatMode.SRV6, bytes(MAX_EV_BYTES), True)
    with pytest.raises(ProfileError, match="port 0"):
        wire_ev(FormatMode.STEV, bytes(MAX_EV_BYTES), True)
