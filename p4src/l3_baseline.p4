/* Baseline for `make bench-dataplane`: plain L3 forwarding built from the same headers and the
 * same parser up to UDP, one LPM table to a port and MAC rewrite, no selector, no marking, no
 * trimming, no counters. mrc.p4's forwarding rate is reported as a ratio to this program's. */
#define MRC_L3_BASELINE

#include <core.p4>
#include <v1model.p4>

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"

control L3Ingress(inout headers_t hdr, inout local_metadata_t meta,
                  inout standard_metadata_t std_meta) {
    @name(".L3Ingress.forward")
    action forward(port_t port, mac_t smac, mac_t dmac) {
        std_meta.egress_spec = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
    }

    @name(".L3Ingress.drop")
    action drop() {
        mark_to_drop(std_meta);
    }

    @name(".L3Ingress.routes_v4")
    table routes_v4 {
        key = { hdr.ipv4.dst_addr: lpm @name("ipv4_dst"); }
        actions = { forward; drop; }
        const default_action = drop();
        size = 4096;
    }

    apply {
        if (std_meta.parser_error != error.NoError || !hdr.ipv4.isValid()) {
            mark_to_drop(std_meta);
        } else {
            routes_v4.apply();
        }
    }
}

control L3Egress(inout headers_t hdr, inout local_metadata_t meta,
                 inout standard_metadata_t std_meta) {
    apply { }
}

V1Switch(MrcParser(), MrcVerifyChecksum(), L3Ingress(), L3Egress(), MrcComputeChecksum(),
         MrcDeparser()) main;
