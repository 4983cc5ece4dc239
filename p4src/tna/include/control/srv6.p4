/* SRv6 uSID source routing on Tofino, as mrc.p4's Srv6 (docs/routing.md): the same tables, keys,
 * actions and drop reasons, laid out for Tofino's stages.
 *
 * The carrier's outer destination is a 32-bit block, then up to six 16-bit uSIDs, the first the
 * active one. A switch whose block and uSID are the active ones (my_usid) shifts the uSID list
 * left by 16 bits. When the uSID after its own is End-of-Carrier (0) it decapsulates, and the
 * inner packet is routed like any other; otherwise usid_next sends the carrier to the neighbour
 * that uSID names. A carrier whose active uSID is not this switch's, and one whose next uSID
 * names no neighbour, are dropped and counted by the caller (drop_reason).
 *
 * Unlike mrc.p4, usid_next is looked up on the next uSID where it stands before the shift
 * (bits 79-64), not after it (bits 95-80): the same entries and the same value, but both tables
 * read the header as it arrived, so Tofino looks them up in one stage instead of two. The shift
 * is six 16-bit moves, which Tofino's ALUs do container to container. */
#ifndef MRC_TNA_SRV6_P4
#define MRC_TNA_SRV6_P4

control Srv6(inout headers_t hdr, inout local_metadata_t meta,
             inout ingress_intrinsic_metadata_for_tm_t ig_tm_md, out bit<32> drop_reason) {
    bool mine = false;
    bool next_known = false;

    @name(".MrcIngress.srv6.usid_end")
    action usid_end() {
        mine = true;
        hdr.srv6.dst_addr[95:80] = hdr.srv6.dst_addr[79:64];
        hdr.srv6.dst_addr[79:64] = hdr.srv6.dst_addr[63:48];
        hdr.srv6.dst_addr[63:48] = hdr.srv6.dst_addr[47:32];
        hdr.srv6.dst_addr[47:32] = hdr.srv6.dst_addr[31:16];
        hdr.srv6.dst_addr[31:16] = hdr.srv6.dst_addr[15:0];
        hdr.srv6.dst_addr[15:0] = 0;
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

    /* Sets the port whether or not the carrier turns out to be this switch's: a foreign one is
     * dropped by the caller, so the port it was given never matters. */
    @name(".MrcIngress.srv6.usid_forward")
    action usid_forward(PortId_t port, mac_t smac, mac_t dmac) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        next_known = true;
    }

    /* Static: per neighbour, its uSID to the port toward it. Never changed on a failure: a
     * carrier naming a dead link is lost there, and the sender retires that path. */
    @name(".MrcIngress.srv6.usid_next")
    table usid_next {
        key = {
            hdr.srv6.dst_addr[127:96]: exact @name("block");
            hdr.srv6.dst_addr[79:64]: exact @name("usid");
        }
        actions = { usid_forward; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 1024;
    }

    @name(".MrcIngress.srv6.decap")
    action decap() {
        hdr.srv6.setInvalid();
    }

    apply {
        drop_reason = 0;
        meta.srv6_transit = false;
        /* Before the shift, which moves the next uSID into the active place. */
        bool last = false;
        if (hdr.srv6.dst_addr[79:64] == USID_END_OF_CARRIER) {
            last = true;
        }
        usid_next.apply();
        my_usid.apply();
        if (!mine) {
            drop_reason = DROP_SRV6_FOREIGN_SID;
        } else if (last) {
            /* RFC 6040: a CE mark on the outer header survives onto an ECN-capable inner one.
             * In apply, not in decap: a Tofino action cannot test header validity. */
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
            decap();
        } else if (!next_known) {
            drop_reason = DROP_SRV6_BAD_NEXT;
        } else {
            meta.srv6_transit = true;
        }
    }
}

#endif
