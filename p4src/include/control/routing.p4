/* L3 routing: longest-prefix match on the destination address to a next-hop id. The next-hop id
 * names a multipath group (or a single member) in MrcIngress.next.hashed. */
#ifndef MRC_ROUTING_P4
#define MRC_ROUTING_P4

control Routing(inout headers_t hdr, inout local_metadata_t meta) {
    @name(".MrcIngress.routing.set_next_id")
    action set_next_id(next_id_t next_id) {
        meta.next_id = next_id;
        meta.routed = true;
    }

    @name(".MrcIngress.routing.routes_v4")
    table routes_v4 {
        key = { hdr.ipv4.dst_addr: lpm @name("ipv4_dst"); }
        actions = { set_next_id; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 4096;
    }

    @name(".MrcIngress.routing.routes_v6")
    table routes_v6 {
        key = { hdr.ipv6.dst_addr: lpm @name("ipv6_dst"); }
        actions = { set_next_id; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 4096;
    }

    apply {
        meta.routed = false;
        if (hdr.ipv4.isValid()) {
            routes_v4.apply();
        } else if (hdr.ipv6.isValid()) {
            routes_v6.apply();
        }
    }
}

#endif
