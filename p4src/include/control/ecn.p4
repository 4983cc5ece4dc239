/* RED-like ECN marking in egress.
 *
 * An ECT packet of a data class leaving a port with marking on gets CE with a probability rising
 * linearly from 0 at min_depth to 1 at max_depth (queue depth in packets at enqueue). v1model has
 * no runtime division, so draw r uniformly in [min_depth, max_depth] and mark when depth > r.
 * The controller turns marking off toward hosts (no entry, or ecn_disabled): MRC wants a mark to
 * mean "this path is loaded", not "the receiver is in incast". Control and trimmed packets, RoCE
 * ACK/NAKs and CNPs are never marked; RoCE data is, as DCQCN needs, on the depth of the lossless
 * queue it joined (enq_qdepth is per priority queue). */
#ifndef MRC_ECN_P4
#define MRC_ECN_P4

control EcnMarking(inout headers_t hdr, inout local_metadata_t meta,
                   inout standard_metadata_t std_meta) {
    @name(".MrcEgress.ecn.ecn_marks")
    counter(MAX_PORTS, CounterType.packets) ecn_marks;

    qdepth_t min_depth = 0;
    qdepth_t max_depth = 0;

    @name(".MrcEgress.ecn.set_ecn_thresholds")
    action set_ecn_thresholds(qdepth_t min_qdepth, qdepth_t max_qdepth) {
        min_depth = min_qdepth;
        max_depth = max_qdepth;
    }

    @name(".MrcEgress.ecn.ecn_disabled")
    action ecn_disabled() {
    }

    @name(".MrcEgress.ecn.port_ecn")
    table port_ecn {
        key = { std_meta.egress_port: exact @name("egress_port"); }
        actions = { set_ecn_thresholds; ecn_disabled; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_PORTS;
    }

    @name(".MrcEgress.ecn.mark_ce")
    action mark_ce() {
        if (hdr.srv6.isValid()) {
            hdr.srv6.ecn = ECN_CE;  /* the inner header gets it at decapsulation (RFC 6040) */
        } else if (hdr.ipv4.isValid()) {
            hdr.ipv4.ecn = ECN_CE;
        } else {
            hdr.ipv6.ecn = ECN_CE;
        }
        ecn_marks.count((bit<32>)std_meta.egress_port);
    }

    apply {
        bit<2> ecn = ECN_NOT_ECT;
        if (hdr.srv6.isValid()) {
            ecn = hdr.srv6.ecn;
        } else if (hdr.ipv4.isValid()) {
            ecn = hdr.ipv4.ecn;
        } else if (hdr.ipv6.isValid()) {
            ecn = hdr.ipv6.ecn;
        }
        bool data_class = meta.mrc_class != CLASS_CONTROL && meta.mrc_class != CLASS_TRIMMED
                          && meta.mrc_class != CLASS_TRIMMED_LASTHOP
                          && meta.mrc_class != CLASS_ROCE_ACK && meta.mrc_class != CLASS_ROCE_CNP;
        if (data_class && (ecn == 1 || ecn == 2)) {
            switch (port_ecn.apply().action_run) {
                set_ecn_thresholds: {
                    qdepth_t depth = std_meta.enq_qdepth;
                    if (depth >= max_depth) {
                        mark_ce();
                    } else if (depth > min_depth) {
                        qdepth_t r;
                        random(r, min_depth, max_depth);
                        if (depth > r) {
                            mark_ce();
                        }
                    }
                }
                default: {}
            }
        }
    }
}

#endif
