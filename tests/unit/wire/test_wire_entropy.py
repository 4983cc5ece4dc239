"""The EV on the wire: bits 31-16 ride in the UDP source port, bits 15-0 in the low 16 bits
of the IPv6 flow label; what does not fit those fields is not part of the EV."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from wire.entropy import MAX_EV, ev_flow_label, ev_from_headers, ev_source_port


@settings(max_examples=50, deadline=None)
@given(sport=st.integers(0, 0xFFFF), flow_label=st.integers(0, 0xFFFF))
def test_ev_layout_is_source_port_high_flow_label_low(sport, flow_label):
    ev = ev_from_headers(sport, flow_label)
    assert ev == (sport << 16) | flow_label
    assert (ev_source_port(ev), ev_flow_label(ev)) == (sport, flow_label)


@settings(max_examples=50, deadline=None)
@given(ev=st.integers(0, MAX_EV))
def test_every_32_bit_ev_survives_the_trip_through_the_headers(ev):
    assert ev_from_headers(ev_source_port(ev), ev_flow_label(ev)) == ev


def test_over_ipv4_there_is_no_flow_label_and_the_low_half_is_zero():
    assert ev_from_headers(0xC001) == 0xC001_0000


def test_flow_label_bits_above_the_sixteenth_carry_no_entropy():
    assert ev_from_headers(0xC001, 0xF_1234) == 0xC001_1234
    assert ev_flow_label(0xC001_1234) == 0x1234
    assert MAX_EV == 0xFFFF_FFFF
