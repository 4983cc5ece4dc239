/* RED-like ECN marking in egress, as mrc.p4's EcnMarking, from the depth Tofino reports.
 *
 * An ECT packet of a data class leaving a port with marking on gets CE when the queue it joined
 * (enq_qdepth, in 80-byte cells) holds at least max_depth, and with a probability rising from 0
 * at min_depth toward 1 at max_depth in between. Tofino cannot draw a random number in a range
 * given at run time, so r = rand & (max_depth - min_depth) stands in for mrc.p4's uniform draw:
 * exactly uniform when max_depth - min_depth + 1 is a power of two (the control plane should
 * choose such thresholds), a monotone staircase with the same mean otherwise. Thresholds are a
 * table (port_ecn), as in mrc.p4: Tofino has no Thrift queue settings. The controller turns
 * marking off toward hosts (no entry, or ecn_disabled). Control and trimmed packets, RoCE
 * ACK/NAKs and CNPs are never marked; RoCE data is, as DCQCN needs. */
#ifndef MRC_TNA_ECN_P4
#define MRC_TNA_ECN_P4

control EcnMarking(inout headers_t hdr, in mrc_class_t mrc_class, inout ecn_scratch_t s,
                   in egress_intrinsic_metadata_t eg_intr_md) {
    @name(".MrcEgress.ecn.ecn_marks")
    Counter<bit<32>, PortId_t>(MAX_PORTS, CounterType_t.PACKETS) ecn_marks;
    Random<qdepth_t>() rng;

    /* Saturating differences, computed in the table's action: Tofino's gateways compare a field
     * with a constant only. */
    qdepth_t below_max = 1;
    qdepth_t min_depth = 0;
    qdepth_t max_depth = 0;

    @name(".MrcEgress.ecn.set_ecn_thresholds")
    action set_ecn_thresholds(qdepth_t min_qdepth, qdepth_t max_qdepth) {
        below_max = max_qdepth |-| eg_intr_md.enq_qdepth;
        min_depth = min_qdepth;
        max_depth = max_qdepth;
    }

    @name(".MrcEgress.ecn.ecn_disabled")
    action ecn_disabled() {
    }

    /* The draw between min_depth and max_depth, one dependent step per table: a Tofino action
     * runs in one stage, and each step needs the previous one's result. Hidden: the data plane
     * runs them, the controller never sees them. */
    @hidden
    action ecn_step_span() {
        s.draw = rng.get();
        s.above_min = eg_intr_md.enq_qdepth |-| min_depth;
        s.span = max_depth - min_depth;
    }

    @hidden
    action ecn_step_mask() {
        s.r = s.draw & s.span;
    }

    @hidden
    action ecn_step_excess() {
        s.excess = s.above_min |-| s.r;
    }

    @hidden
    table ecn_span {
        actions = { ecn_step_span; }
        const default_action = ecn_step_span();
    }

    @hidden
    table ecn_mask {
        actions = { ecn_step_mask; }
        const default_action = ecn_step_mask();
    }

    @hidden
    table ecn_excess {
        actions = { ecn_step_excess; }
        const default_action = ecn_step_excess();
    }

    @name(".MrcEgress.ecn.port_ecn")
    table port_ecn {
        key = { eg_intr_md.egress_port: exact @name("egress_port"); }
        actions = { set_ecn_thresholds; ecn_disabled; @defaultonly NoAction; }
        const default_action = NoAction();
        size = MAX_PORTS;
    }

    /* Counts only: Tofino allows no header-validity test inside an action, so the CE bits are
     * written in apply. */
    @name(".MrcEgress.ecn.mark_ce")
    action mark_ce() {
        ecn_marks.count(eg_intr_md.egress_port);
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
        bool data_class = mrc_class != CLASS_CONTROL && mrc_class != CLASS_TRIMMED
                          && mrc_class != CLASS_TRIMMED_LASTHOP
                          && mrc_class != CLASS_ROCE_ACK && mrc_class != CLASS_ROCE_CNP;
        bool mark = false;
        if (data_class && (ecn == 1 || ecn == 2)) {
            switch (port_ecn.apply().action_run) {
                set_ecn_thresholds: {
                    if (below_max == 0) {
                        mark = true;
                    } else {
                        ecn_span.apply();
                        ecn_mask.apply();
                        ecn_excess.apply();
                        if (s.excess != 0) {
                            mark = true;
                        }
                    }
                }
                default: {}
            }
        }
        if (mark) {
            mark_ce();
            /* A carrier is marked on its outer header; the inner one gets the mark at
             * decapsulation (RFC 6040). */
            if (hdr.srv6.isValid()) {
                hdr.srv6.ecn = ECN_CE;
            } else if (hdr.ipv4.isValid()) {
                hdr.ipv4.ecn = ECN_CE;
            } else {
                hdr.ipv6.ecn = ECN_CE;
            }
        }
    }
}

#endif
