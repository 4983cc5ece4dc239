/* Queue choice, as mrc.p4's Trim does it in ingress: control packets, trimmed headers and RoCE
 * CNPs ride the high-priority queue, everything else the normal one. On Tofino the decision to
 * trim is taken in egress (control/trim.p4), whose copy goes to the high-priority queue through
 * its mirror session. */
#ifndef MRC_TNA_PRIORITY_P4
#define MRC_TNA_PRIORITY_P4

control Priority(in local_metadata_t meta, inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    apply {
        if (meta.mrc_class == CLASS_CONTROL || meta.mrc_class == CLASS_TRIMMED
                || meta.mrc_class == CLASS_TRIMMED_LASTHOP || meta.mrc_class == CLASS_ROCE_CNP) {
            ig_tm_md.qid = QID_HIGH;
        } else {
            ig_tm_md.qid = QID_NORMAL;
        }
    }
}

#endif
