/* SRv6 uSID source routing (docs/routing.md).
 *
 * The packet carries its path in the outer IPv6 destination: a 32-bit block, then up to six
 * 16-bit uSIDs, one per switch on the path, the first the next switch to act. A switch whose
 * block and uSID are the active ones (my_usid) shifts the uSID list left by 16 bits, the block
 * staying in place. When the next uSID is End-of-Carrier (0) the switch was the path's last:
 * it decapsulates, and the inner packet is routed like any other (its host route), so hosts
 * never see the outer header and need no SRv6 of their own. Otherwise the next uSID names a
 * neighbour, and the static usid_next table sends the packet to it. A carrier whose active uSID
 * is not this switch's (foreign, or an empty list) and one whose next uSID names no neighbour
 * are dropped and counted by the caller (drop_reason). */
#ifndef MRC_SRV6_P4
#define MRC_SRV6_P4

control Srv6(inout headers_t hdr, inout local_metadata_t meta,
             inout standard_metadata_t std_meta, out bit<32> drop_reason) {
    bool mine = false;

    @name(".MrcIngress.srv6.usid_end")
    action usid_end() {
        mine = true;
        hdr.srv6.dst_addr[95:0] = hdr.srv6.dst_addr[79:0] ++ 16w0;
    }

    /* One entry per (block, uSID) of this switch: its uN uSID in each plane's block. */
    @name(".MrcIngress.srv6.my_usid")
    table my_usid {
        key = {
            hdr.srv6.dst_addr[127:96]: exact @name("block");
            hdr.srv6.dst_addr[95:80]: exact @name("usid");
        }
        actions = { usid_end; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 64;
    }

    @name(".MrcIngress.srv6.usid_forward")
    action usid_forward(port_t port, mac_t smac, mac_t dmac) {
        std_meta.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        meta.srv6_transit = true;
    }

    /* Static: per neighbour, its uSID to the port toward it. Never changed on a failure: a
     * carrier naming a dead link is lost there, and the sender retires that path. */
    @name(".MrcIngress.srv6.usid_next")
    table usid_next {
        key = {
            hdr.srv6.dst_addr[127:96]: exact @name("block");
            hdr.srv6.dst_addr[95:80]: exact @name("usid");
        }
        actions = { usid_forward; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 1024;
    }

    @name(".MrcIngress.srv6.decap")
    action decap() {
        /* RFC 6040: a CE mark on the outer header survives onto an ECN-capable inner one. */
        if (hdr.srv6.ecn == ECN_CE) {
            if (hdr.ipv6.isValid() && hdr.ipv6.ecn != ECN_NOT_ECT) {
                hdr.ipv6.ecn = ECN_CE;
            } else if (hdr.ipv4.isValid() && hdr.ipv4.ecn != ECN_NOT_ECT) {
                hdr.ipv4.ecn = ECN_CE;
            }
        }
        if (hdr.ipv4.isValid()) {
            hdr.ethernet.ether_type = ETHERTYPE_IPV4;
        }
        hdr.srv6.setInvalid();
    }

    apply {
        drop_reason = 0;
        meta.srv6_transit = false;
        my_usid.apply();
        if (!mine) {
            drop_reason = DROP_SRV6_FOREIGN_SID;
        } else if (hdr.srv6.dst_addr[95:80] == USID_END_OF_CARRIER) {
            decap();
        } else if (!usid_next.apply().hit) {
            drop_reason = DROP_SRV6_BAD_NEXT;
        }
    }
}

#endif
