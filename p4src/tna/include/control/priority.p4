/* Queue choice, as mrc.p4's Priority does it in ingress: control packets, trimmed headers and
 * RoCE's ACK/NAK and CNP ride the high-priority queue, RoCE data the lossless class's queue,
 * everything else the normal one. On Tofino the decision to trim is taken in egress
 * (control/trim.p4), whose copy goes to the high-priority queue through its mirror session.
 * Whether QID_LOSSLESS is lossless is the port configuration's doing (PFC; defines.p4). */
#ifndef MRC_TNA_PRIORITY_P4
#define MRC_TNA_PRIORITY_P4

control Priority(in local_metadata_t meta, inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    apply {
        if (meta.mrc_class == CLASS_CONTROL || meta.mrc_class == CLASS_TRIMMED
                || meta.mrc_class == CLASS_TRIMMED_LASTHOP || meta.mrc_class == CLASS_ROCE_ACK
                || meta.mrc_class == CLASS_ROCE_CNP) {
            ig_tm_md.qid = QID_HIGH;
        } else if (meta.mrc_class == CLASS_ROCE_DATA) {
            ig_tm_md.qid = QID_LOSSLESS;
        } else {
            ig_tm_md.qid = QID_NORMAL;
        }
    }
}

#endif
