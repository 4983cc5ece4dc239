/* Structured EV (docs/routing.md), as mrc.p4's StructuredEv: fields of the entropy value name the
 * uplink at each tier. The keyless ev_field table's default action says where this switch's field
 * sits; uplinks maps (next-hop id, field value) to one port. A miss leaves the packet to the
 * EV-hashed selector. The EV is read as Next builds it: UDP source port in bits 31-16, the IPv6
 * flow label's low 16 bits in 15-0. Tofino shifts only by constants, so the field is cut out by
 * a hidden table of 32 constant shifts keyed on the configured shift, then masked. The field is
 * cut out (EvField) before routing, which it does not depend on, so the two share stages; only
 * the uplinks lookup (StructuredEv) waits for the next-hop id. */
#ifndef MRC_TNA_STRUCTURED_EV_P4
#define MRC_TNA_STRUCTURED_EV_P4

control EvField(in local_metadata_t meta, out bit<16> field, out bool configured) {
    bit<8> field_shift = 0;
    bit<16> field_mask = 0;

    @name(".MrcIngress.structured_ev.set_ev_field")
    action set_ev_field(bit<8> shift, bit<16> mask) {
        field_shift = shift;
        field_mask = mask;
        configured = true;
    }

#define EV_SHIFT(n) @hidden action ev_shift_##n() { field = (bit<16>)(meta.ev >> n); }
    EV_SHIFT(0) EV_SHIFT(1) EV_SHIFT(2) EV_SHIFT(3) EV_SHIFT(4) EV_SHIFT(5) EV_SHIFT(6)
    EV_SHIFT(7) EV_SHIFT(8) EV_SHIFT(9) EV_SHIFT(10) EV_SHIFT(11) EV_SHIFT(12) EV_SHIFT(13)
    EV_SHIFT(14) EV_SHIFT(15) EV_SHIFT(16) EV_SHIFT(17) EV_SHIFT(18) EV_SHIFT(19) EV_SHIFT(20)
    EV_SHIFT(21) EV_SHIFT(22) EV_SHIFT(23) EV_SHIFT(24) EV_SHIFT(25) EV_SHIFT(26) EV_SHIFT(27)
    EV_SHIFT(28) EV_SHIFT(29) EV_SHIFT(30) EV_SHIFT(31)
#undef EV_SHIFT

#define EV_SHIFT_ENTRY(n) n: ev_shift_##n();
    @hidden
    table ev_shift {
        key = { field_shift: exact; }
        actions = {
            ev_shift_0; ev_shift_1; ev_shift_2; ev_shift_3; ev_shift_4; ev_shift_5; ev_shift_6;
            ev_shift_7; ev_shift_8; ev_shift_9; ev_shift_10; ev_shift_11; ev_shift_12;
            ev_shift_13; ev_shift_14; ev_shift_15; ev_shift_16; ev_shift_17; ev_shift_18;
            ev_shift_19; ev_shift_20; ev_shift_21; ev_shift_22; ev_shift_23; ev_shift_24;
            ev_shift_25; ev_shift_26; ev_shift_27; ev_shift_28; ev_shift_29; ev_shift_30;
            ev_shift_31; @defaultonly NoAction;
        }
        const entries = {
            EV_SHIFT_ENTRY(0) EV_SHIFT_ENTRY(1) EV_SHIFT_ENTRY(2) EV_SHIFT_ENTRY(3)
            EV_SHIFT_ENTRY(4) EV_SHIFT_ENTRY(5) EV_SHIFT_ENTRY(6) EV_SHIFT_ENTRY(7)
            EV_SHIFT_ENTRY(8) EV_SHIFT_ENTRY(9) EV_SHIFT_ENTRY(10) EV_SHIFT_ENTRY(11)
            EV_SHIFT_ENTRY(12) EV_SHIFT_ENTRY(13) EV_SHIFT_ENTRY(14) EV_SHIFT_ENTRY(15)
            EV_SHIFT_ENTRY(16) EV_SHIFT_ENTRY(17) EV_SHIFT_ENTRY(18) EV_SHIFT_ENTRY(19)
            EV_SHIFT_ENTRY(20) EV_SHIFT_ENTRY(21) EV_SHIFT_ENTRY(22) EV_SHIFT_ENTRY(23)
            EV_SHIFT_ENTRY(24) EV_SHIFT_ENTRY(25) EV_SHIFT_ENTRY(26) EV_SHIFT_ENTRY(27)
            EV_SHIFT_ENTRY(28) EV_SHIFT_ENTRY(29) EV_SHIFT_ENTRY(30) EV_SHIFT_ENTRY(31)
        }
        const default_action = NoAction();
        size = 32;
    }
#undef EV_SHIFT_ENTRY

    @name(".MrcIngress.structured_ev.ev_field")
    table ev_field {
        key = { }
        actions = { set_ev_field; NoAction; }
        default_action = NoAction();
    }

    apply {
        field = 0;
        configured = false;
        ev_field.apply();
        if (configured) {
            ev_shift.apply();
            field = field & field_mask;
        }
    }
}

control StructuredEv(inout headers_t hdr, inout local_metadata_t meta, in bit<16> field,
                     in bool configured, inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    @name(".MrcIngress.structured_ev.ev_uplink")
    action ev_uplink(PortId_t port, mac_t smac, mac_t dmac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        meta.steered = true;
    }

    @name(".MrcIngress.structured_ev.uplinks")
    table uplinks {
        key = {
            meta.next_id: exact @name("next_id");
            field: exact @name("ev_field");
        }
        actions = { ev_uplink; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 4096;
    }

    apply {
        meta.steered = false;
        if (configured && hdr.udp.isValid()) {
            uplinks.apply();
        }
    }
}

#endif
