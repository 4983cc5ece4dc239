/* Packet I/O with the controller, as in mrc.p4: a packet-out from the CPU port goes to the port
 * the controller names, on the high-priority queue; an LLDP frame goes up to the CPU as a
 * packet-in carrying the port it arrived on. The controller headers are mrc.p4's
 * (@controller_header packet_in / packet_out), which the TNA P4Runtime servers understand.
 * packet_in._pad is left as it is: zeroing it in the same action as the port copy would need a
 * constant and a rotated source at once, which Tofino's ALUs cannot do. The controller ignores
 * the padding. Packet-ins and packet-outs bypass egress: they carry no bridged metadata. */
#ifndef MRC_TNA_PACKET_IO_P4
#define MRC_TNA_PACKET_IO_P4

control PacketIoIngress(inout headers_t hdr, in ingress_intrinsic_metadata_t ig_intr_md,
                        inout ingress_intrinsic_metadata_for_tm_t ig_tm_md, out bool handled) {
    apply {
        handled = false;
        if (hdr.packet_out.isValid()) {
            ig_tm_md.ucast_egress_port = hdr.packet_out.egress_port;
            ig_tm_md.qid = QID_HIGH;
            ig_tm_md.bypass_egress = 1;
            hdr.packet_out.setInvalid();
            handled = true;
        } else if (hdr.ethernet.isValid() && hdr.ethernet.ether_type == ETHERTYPE_LLDP) {
            ig_tm_md.ucast_egress_port = TNA_CPU;
            ig_tm_md.bypass_egress = 1;
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = ig_intr_md.ingress_port;
            handled = true;
        }
    }
}

#endif
