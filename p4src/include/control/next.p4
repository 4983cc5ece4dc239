/* MRC-aware ECMP. A next-hop id selects a P4Runtime action-profile group; the selector hashes the
 * addresses and the entropy value (EV: UDP source port, plus the low 16 bits of the IPv6 flow label),
 * so every EV maps to one member, always, and different EVs spread across members. Members carry
 * watch_port: BMv2 stops choosing a member whose port is down, without the controller.
 * The hash inputs are metadata set here on every packet, never header fields: BMv2 keeps stale
 * values in invalid headers. */
#ifndef MRC_NEXT_P4
#define MRC_NEXT_P4

control Next(inout headers_t hdr, inout local_metadata_t meta,
             inout standard_metadata_t std_meta) {
    @name(".MrcIngress.next.member_packets")
    counter(MAX_MEMBERS, CounterType.packets_and_bytes) member_packets;

    @name(".MrcIngress.next.hashed_selector")
    action_selector(HashAlgorithm.crc32, 32w1024, 32w16) hashed_selector;

    @name(".MrcIngress.next.routing_hashed")
    action routing_hashed(port_t port, mac_t smac, mac_t dmac, bit<16> member_index) {
        std_meta.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        member_packets.count((bit<32>)member_index);
    }

    @name(".MrcIngress.next.hashed")
    table hashed {
        key = {
            meta.next_id: exact @name("next_id");
            meta.hash_src: selector @name("hash_src");
            meta.hash_dst: selector @name("hash_dst");
            meta.ev: selector @name("ev");
        }
        actions = { routing_hashed; }
        implementation = hashed_selector;
        size = 1024;
    }

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
        /* Tables with an action profile take no default action: a miss is seen via hit. */
        if (!hashed.apply().hit) {
            meta.routed = false;
        }
    }
}

#endif
