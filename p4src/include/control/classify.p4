/* Classification by DSCP, never by opcode: that is what lets a fabric treat MRC without parsing it.
 * The controller installs one entry per class, MRC's six and standard RoCE's three (data, ACK/NAK,
 * CNP; values configurable, defaults in wire/constants.py DscpClass); any other DSCP is
 * CLASS_OTHER, forwarded like plain IP. */
#ifndef MRC_CLASSIFY_P4
#define MRC_CLASSIFY_P4

control Classify(inout headers_t hdr, inout local_metadata_t meta) {
    @name(".MrcIngress.classify.set_class")
    action set_class(mrc_class_t mrc_class) {
        meta.mrc_class = mrc_class;
    }

    @name(".MrcIngress.classify.dscp_classes")
    table dscp_classes {
        key = { meta.dscp: exact @name("dscp"); }
        actions = { set_class; @defaultonly NoAction; }
        const default_action = NoAction();
        size = 64;
    }

    apply {
        meta.mrc_class = CLASS_OTHER;
        if (hdr.ipv4.isValid() || hdr.ipv6.isValid()) {
            dscp_classes.apply();
        }
    }
}

#endif
