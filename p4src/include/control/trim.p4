/* Packet trimming and priority.
 *
 * A trimmable MRC data packet (DSCP class TRIMMABLE or TRIMMABLE_RETX, and MRC's METH present)
 * whose egress port's normal-priority queue holds at least the port's trim threshold is cut to
 * its headers (Ethernet .. RETH[/ImmDt]): lengths are rewritten to the cut size, the UDP checksum
 * is zeroed (BMv2 would checksum the uncut payload, and a Linux receiver drops a wrong checksum),
 * DSCP becomes TRIMMED, or TRIMMED_LASTHOP when the port faces a host, and the header rides the
 * high-priority queue so that the receiver's NACK comes at once. Every other packet keeps the
 * queue control/priority.p4 chose. Standard RoCE data is never trimmed, whatever its DSCP: it has
 * no METH, and an RC responder could do nothing with a header (it would see a PSN gap and NAK);
 * in its own class it rides the lossless queue, with another DSCP a full queue drops it at the
 * tail. The threshold is set below the queue's depth limit by the controller; a port without a
 * trim_config entry never trims. */
#ifndef MRC_TRIM_P4
#define MRC_TRIM_P4

control Trim(inout headers_t hdr, inout local_metadata_t meta,
             inout standard_metadata_t std_meta) {
    @name(".MrcIngress.trim.trims")
    counter(MAX_PORTS, CounterType.packets) trims;

    @name(".MrcIngress.trim.set_trim_config")
    action set_trim_config(qdepth_t threshold, bit<1> host_facing) {
        meta.trim_threshold = threshold;
        meta.trim_host_facing = host_facing;
    }

    @name(".MrcIngress.trim.trim_config")
    table trim_config {
        key = { std_meta.egress_spec: exact @name("egress_port"); }
        actions = { set_trim_config; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_PORTS;
    }

    @name(".MrcIngress.trim.set_trim_dscp")
    action set_trim_dscp(bit<6> trimmed, bit<6> trimmed_lasthop) {
        meta.trimmed_dscp = trimmed;
        meta.trimmed_lasthop_dscp = trimmed_lasthop;
    }

    /* Keyless: the controller sets its default action to the fabric's DSCP values. */
    @name(".MrcIngress.trim.trim_dscp")
    table trim_dscp {
        key = { }
        actions = { set_trim_dscp; }
        default_action = set_trim_dscp(12, 13);
    }

    apply {
        if ((meta.mrc_class == CLASS_TRIMMABLE || meta.mrc_class == CLASS_TRIMMABLE_RETX)
                && hdr.meth.isValid()) {
            if (trim_config.apply().hit) {
                qdepth_t occupancy;
                port_occupancy.read(occupancy, (bit<32>)std_meta.egress_spec);
                if (occupancy >= meta.trim_threshold) {
                    /* Cut to the headers. Inline, not an action: BMv2 cannot run truncate()
                     * conditionally inside an action. */
                    trim_dscp.apply();
                    bit<16> l4_len = UDP_LEN + meta.mrc_hdr_len;
                    bit<6> dscp = meta.trimmed_dscp;
                    meta.mrc_class = CLASS_TRIMMED;
                    if (meta.trim_host_facing == 1) {
                        dscp = meta.trimmed_lasthop_dscp;
                        meta.mrc_class = CLASS_TRIMMED_LASTHOP;
                    }
                    hdr.udp.len = l4_len;
                    hdr.udp.checksum = 0;
                    bit<16> ip_len;
                    if (hdr.ipv4.isValid()) {
                        hdr.ipv4.total_len = IPV4_LEN + l4_len;
                        hdr.ipv4.dscp = dscp;
                        ip_len = IPV4_LEN + l4_len;
                    } else {
                        hdr.ipv6.payload_len = l4_len;
                        hdr.ipv6.dscp = dscp;
                        ip_len = IPV6_LEN + l4_len;
                    }
                    /* An SRv6 carrier in transit: the outer header is cut to fit and re-marked
                     * too, so the rest of the path and, after decapsulation, the receiver both
                     * see a trimmed packet. */
                    if (hdr.srv6.isValid()) {
                        hdr.srv6.payload_len = ip_len;
                        hdr.srv6.dscp = dscp;
                        ip_len = IPV6_LEN + ip_len;
                    }
                    truncate((bit<32>)(ETH_LEN + ip_len));
                    std_meta.priority = PRIO_HIGH;
                    trims.count((bit<32>)std_meta.egress_spec);
                }
            }
        }
    }
}

#endif
