/* Packet I/O with the controller: packet-out from the CPU port goes straight to the port the
 * controller names; LLDP frames (the controller's link probes) go up to the CPU as packet-in with
 * the port they arrived on. */
#ifndef MRC_PACKET_IO_P4
#define MRC_PACKET_IO_P4

control PacketIoIngress(inout headers_t hdr, inout local_metadata_t meta,
                        inout standard_metadata_t std_meta, out bool handled) {
    apply {
        handled = false;
        if (hdr.packet_out.isValid()) {
            std_meta.egress_spec = hdr.packet_out.egress_port;
            hdr.packet_out.setInvalid();
            std_meta.priority = PRIO_HIGH;
            handled = true;
        } else if (hdr.ethernet.isValid() && hdr.ethernet.ether_type == ETHERTYPE_LLDP) {
            std_meta.egress_spec = CPU_PORT;
            hdr.packet_in.setValid();
            hdr.packet_in.ingress_port = std_meta.ingress_port;
            hdr.packet_in._pad = 0;
            handled = true;
        }
    }
}

#endif
