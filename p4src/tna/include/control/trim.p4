/* Packet trimming on Tofino 1: egress-to-egress mirroring with truncation.
 *
 * Tofino 1 shows queue depth only in egress, and ingress cannot read what egress writes (a
 * register belongs to one pipeline), so the decision is taken where the depth is seen: a
 * trimmable MRC data packet (class TRIMMABLE or TRIMMABLE_RETX, METH present) that joined its
 * port's queue at a depth of at least the port's threshold (enq_qdepth, in 80-byte cells) is
 * dropped, and an egress mirror copy of it goes to the port's trim session (TRIM_SESSION_BASE +
 * port), which truncates it to TRIM_TRUNCATE_BYTES and enqueues it on the high-priority queue.
 * That copy comes back through egress (trim_mirror header first) and is made a trimmed packet as
 * mrc.p4 makes one: IP and UDP lengths cut to the headers, UDP checksum zeroed, DSCP TRIMMED, or
 * TRIMMED_LASTHOP toward a host, on the outer header of an SRv6 carrier as well. Standard RoCE
 * data is never trimmed (no METH); a port without a trim_config entry never trims. */
#ifndef MRC_TNA_TRIM_P4
#define MRC_TNA_TRIM_P4

control Trim(inout headers_t hdr, in bridged_t bridged, inout trim_mirror_t trim,
             inout MirrorId_t trim_session, in egress_intrinsic_metadata_t eg_intr_md,
             inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md, out bool trimming) {
    @name(".MrcEgress.trim.trims")
    Counter<bit<32>, PortId_t>(MAX_PORTS, CounterType_t.PACKETS) trims;

    /* threshold - depth, saturating: 0 when the queue holds at least the threshold. Computed
     * in the table's action because Tofino's gateways compare a field with a constant only. */
    qdepth_t short_of = 1;
    bit<1> toward_host = 0;
    bit<6> trimmed_dscp = 0;
    bit<6> trimmed_lasthop_dscp = 0;

    @name(".MrcEgress.trim.set_trim_config")
    action set_trim_config(qdepth_t threshold, bit<1> host_facing) {
        short_of = threshold |-| eg_intr_md.enq_qdepth;
        toward_host = host_facing;
    }

    @name(".MrcEgress.trim.trim_config")
    table trim_config {
        key = { eg_intr_md.egress_port: exact @name("egress_port"); }
        actions = { set_trim_config; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_PORTS;
    }

    @name(".MrcEgress.trim.set_trim_dscp")
    action set_trim_dscp(bit<6> trimmed, bit<6> trimmed_lasthop) {
        trimmed_dscp = trimmed;
        trimmed_lasthop_dscp = trimmed_lasthop;
    }

    /* Keyless: the controller sets its default action to the fabric's DSCP values. */
    @name(".MrcEgress.trim.trim_dscp")
    table trim_dscp {
        key = { }
        actions = { set_trim_dscp; }
        default_action = set_trim_dscp(12, 13);
    }

    apply {
        trimming = false;
        if (trim.isValid()) {
            /* The truncated copy: cut the lengths to the headers and re-mark it. */
            trim_dscp.apply();
            /* The egress parser stops at METH: the TS flag says whether TSETH follows, the
             * opcode whether ImmDt does. */
            bool immdt = hdr.bth.opcode == OP_WRITE_LAST_IMM || hdr.bth.opcode == OP_WRITE_ONLY_IMM;
            bit<16> l4_len = UDP_LEN + BTH_LEN + METH_LEN + RETH_LEN;
            if (hdr.bth.ts == 1 && immdt) {
                l4_len = UDP_LEN + BTH_LEN + METH_LEN + TSETH_LEN + RETH_LEN + IMM_LEN;
            } else if (hdr.bth.ts == 1) {
                l4_len = UDP_LEN + BTH_LEN + METH_LEN + TSETH_LEN + RETH_LEN;
            } else if (immdt) {
                l4_len = UDP_LEN + BTH_LEN + METH_LEN + RETH_LEN + IMM_LEN;
            }
            bit<6> dscp = trimmed_dscp;
            if (trim.host_facing == 1) {
                dscp = trimmed_lasthop_dscp;
            }
            hdr.udp.len = l4_len;
            hdr.udp.checksum = 0;
            if (hdr.ipv4.isValid()) {
                hdr.ipv4.total_len = IPV4_LEN + l4_len;
                hdr.ipv4.dscp = dscp;
            } else {
                hdr.ipv6.payload_len = l4_len;
                hdr.ipv6.dscp = dscp;
            }
            /* An SRv6 carrier in transit: the outer header is cut to fit and re-marked too, so
             * the rest of the path and, after decapsulation, the receiver see a trimmed packet.
             * Its length comes from l4_len again: an ip_len local shared with the branch above
             * costs egress a stage (11 instead of 10). */
            if (hdr.srv6.isValid()) {
                hdr.srv6.dscp = dscp;
                if (hdr.ipv4.isValid()) {
                    hdr.srv6.payload_len = IPV4_LEN + l4_len;
                } else {
                    hdr.srv6.payload_len = IPV6_LEN + l4_len;
                }
            }
            trims.count(eg_intr_md.egress_port);
        } else if ((bridged.mrc_class == CLASS_TRIMMABLE
                    || bridged.mrc_class == CLASS_TRIMMABLE_RETX) && hdr.meth.isValid()) {
            if (trim_config.apply().hit) {
                if (short_of == 0) {
                    trimming = true;
                    trim.setValid();
                    trim.pkt_src = PKT_TRIM;
                    trim.host_facing = toward_host;
                    trim._pad = 0;
                    trim_session = TRIM_SESSION_BASE | (MirrorId_t)eg_intr_md.egress_port;
                    eg_dprsr_md.mirror_type = MIRROR_TYPE_TRIM;
                    eg_dprsr_md.drop_ctl = 1;
                }
            }
        }
    }
}

#endif
