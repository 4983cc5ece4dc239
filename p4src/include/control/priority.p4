/* Queue choice by traffic class, before trimming (which may move a packet to PRIO_HIGH).
 *
 * MRC control, trimmed headers (a header trimmed upstream arrives in its TRIMMED class) and
 * RoCE's ACK/NAK and CNP ride the high-priority queue: the feedback a sender waits for overtakes
 * the data it reports on. Standard RoCE data rides the lossless class, a queue of its own, as a
 * RoCE fabric runs it: the controller makes it deep enough that congestion never drops it (pause
 * frames, PFC, are not modelled: a deep queue stands in for a paused sender), and egress
 * ECN-marks it on that queue's depth so DCQCN acts. Everything else (MRC data, unclassified IP)
 * rides the normal queue, the one trimming watches. Strict priority serves the lossless class
 * before MRC data where both share a port; experiments run one transport at a time. */
#ifndef MRC_PRIORITY_P4
#define MRC_PRIORITY_P4

control Priority(in local_metadata_t meta, inout standard_metadata_t std_meta) {
    apply {
        if (meta.mrc_class == CLASS_CONTROL || meta.mrc_class == CLASS_TRIMMED
                || meta.mrc_class == CLASS_TRIMMED_LASTHOP || meta.mrc_class == CLASS_ROCE_ACK
                || meta.mrc_class == CLASS_ROCE_CNP) {
            std_meta.priority = PRIO_HIGH;
        } else if (meta.mrc_class == CLASS_ROCE_DATA) {
            std_meta.priority = PRIO_LOSSLESS;
        } else {
            std_meta.priority = PRIO_NORMAL;
        }
    }
}

#endif
