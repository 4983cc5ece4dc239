/* The inputs of the EV-hashed selector and of structured EV, set on every IP packet before
 * routing (they do not depend on it, so Tofino runs them in the same stages): source and
 * destination address, and the entropy value (EV: UDP source port in bits 31-16, plus the low 16
 * bits of the IPv6 flow label). Metadata, never header fields: invalid headers hold whatever their
 * containers last held. */
#ifndef MRC_TNA_HASH_INPUTS_P4
#define MRC_TNA_HASH_INPUTS_P4

control HashInputs(in headers_t hdr, inout local_metadata_t meta) {
    apply {
        meta.hash_src = 0;
        meta.hash_dst = 0;
        meta.ev = 0;
        if (hdr.ipv4.isValid()) {
            meta.hash_src = (bit<128>)hdr.ipv4.src_addr;
            meta.hash_dst = (bit<128>)hdr.ipv4.dst_addr;
        } else if (hdr.ipv6.isValid()) {
            meta.hash_src = hdr.ipv6.src_addr;
            meta.hash_dst = hdr.ipv6.dst_addr;
        }
        if (hdr.udp.isValid()) {
            meta.ev[31:16] = hdr.udp.src_port;
            if (hdr.ipv6.isValid()) {
                meta.ev[15:0] = hdr.ipv6.flow_label[15:0];
            }
        }
    }
}

#endif
