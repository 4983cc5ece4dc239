/* Structured EV (docs/routing.md): fields of the entropy value name the uplink at each tier, so
 * the sender picks its path exactly instead of a hash bucket.
 *
 * The topology lays the fields out; this switch reads the field of its own tier, whose position
 * the controller writes as the default action of the keyless ev_field table (no entry: the
 * switch does not steer). uplinks then maps (next-hop id, field value) to one port exactly. A
 * packet that misses (a next hop going down the tree, or a switch without structured entries)
 * is left to the EV-hashed selector, so ECMP stays the default. The EV is read from the headers
 * as Next builds it: UDP source port in bits 31-16, IPv6 flow label's low 16 bits in 15-0. */
#ifndef MRC_STRUCTURED_EV_P4
#define MRC_STRUCTURED_EV_P4

control StructuredEv(inout headers_t hdr, inout local_metadata_t meta,
                     inout standard_metadata_t std_meta) {
    bit<16> field = 0;
    bool configured = false;

    @name(".MrcIngress.structured_ev.set_ev_field")
    action set_ev_field(bit<8> shift, bit<16> mask) {
        bit<32> ev = 0;
        if (hdr.udp.isValid()) {
            ev[31:16] = hdr.udp.src_port;
            if (hdr.ipv6.isValid()) {
                ev[15:0] = hdr.ipv6.flow_label[15:0];
            }
        }
        field = (bit<16>)(ev >> shift) & mask;
        configured = true;
    }

    @name(".MrcIngress.structured_ev.ev_field")
    table ev_field {
        key = { }
        actions = { set_ev_field; NoAction; }
        default_action = NoAction();
    }

    @name(".MrcIngress.structured_ev.ev_uplink")
    action ev_uplink(port_t port, mac_t smac, mac_t dmac) {
        std_meta.egress_spec = port;
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
        ev_field.apply();
        if (configured && hdr.udp.isValid()) {
            uplinks.apply();
        }
    }
}

#endif
