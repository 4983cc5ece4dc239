/* MRC-aware switch program for BMv2 (v1model).
 *
 * Ingress: drop and count malformed packets, packet I/O with the controller, DSCP classification,
 * SRv6 uSID source routing of IPv6-in-IPv6 carriers, L3 routing to a multipath group hashed on the
 * entropy value or, with structured EV, to the uplink the EV's fields name, TTL, the queue by
 * class (normal, the lossless RoCE class, high) and trimming.
 * Egress: queue-occupancy tracking, RED-like ECN marking, per-port counters.
 * Every P4Runtime-visible name is pinned with an absolute @name, so P4Info never drifts when the
 * code is reorganised (controller/southbound maps to these names). */
#include <core.p4>
#include <v1model.p4>

#include "include/defines.p4"
#include "include/headers.p4"
#include "include/parser.p4"
#include "include/occupancy.p4"
#include "include/control/packet_io.p4"
#include "include/control/classify.p4"
#include "include/control/routing.p4"
#include "include/control/srv6.p4"
#include "include/control/structured_ev.p4"
#include "include/control/next.p4"
#include "include/control/priority.p4"
#include "include/control/trim.p4"
#include "include/control/ecn.p4"

control MrcIngress(inout headers_t hdr, inout local_metadata_t meta,
                   inout standard_metadata_t std_meta) {
    @name(".MrcIngress.port_rx")
    counter(MAX_PORTS, CounterType.packets_and_bytes) port_rx;
    @name(".MrcIngress.port_drops")
    counter(MAX_PORTS, CounterType.packets) port_drops;
    @name(".MrcIngress.drop_reasons")
    counter(DROP_REASONS, CounterType.packets) drop_reasons;

    PacketIoIngress() packet_io;
    Classify() classify;
    Srv6() srv6;
    Routing() routing;
    StructuredEv() structured_ev;
    Next() next;
    Priority() priority;
    Trim() trim;

    @name(".MrcIngress.drop")
    action drop(bit<32> reason) {
        port_drops.count((bit<32>)std_meta.ingress_port);
        drop_reasons.count(reason);
        mark_to_drop(std_meta);
    }

    apply {
        port_rx.count((bit<32>)std_meta.ingress_port);
        if (std_meta.parser_error != error.NoError) {
            if (std_meta.parser_error == error.PacketTooShort) {
                drop(DROP_PARSER_TOO_SHORT);
            } else if (std_meta.parser_error == error.NoMatch) {
                drop(DROP_PARSER_NO_MATCH);
            } else if (std_meta.parser_error == error.BadIpv4Header) {
                drop(DROP_PARSER_BAD_IPV4);
            } else if (std_meta.parser_error == error.BadIpv6Header) {
                drop(DROP_PARSER_BAD_IPV6);
            } else if (std_meta.parser_error == error.UnknownOpcode) {
                drop(DROP_PARSER_BAD_OPCODE);
            } else {
                drop(DROP_PARSER_OTHER);
            }
            exit;
        }
        if (std_meta.checksum_error == 1) {
            drop(DROP_IPV4_CHECKSUM);
            exit;
        }

        bool handled;
        packet_io.apply(hdr, meta, std_meta, handled);
        if (handled) {
            exit;
        }
        if (!hdr.ipv4.isValid() && !hdr.ipv6.isValid()) {
            drop(DROP_NOT_IP);
            exit;
        }
        meta.srv6_transit = false;
        if (hdr.srv6.isValid()) {
            if (hdr.srv6.hop_limit <= 1) {
                drop(DROP_TTL_EXPIRED);
                exit;
            }
            bit<32> srv6_drop;
            srv6.apply(hdr, meta, std_meta, srv6_drop);
            if (srv6_drop != 0) {
                drop(srv6_drop);
                exit;
            }
        }
        if (meta.srv6_transit) {
            /* The fabric classifies a carrier by its outer DSCP, which the sender copies from
             * the inner one; the inner header is untouched until the last hop. */
            meta.dscp = hdr.srv6.dscp;
        } else if ((hdr.ipv4.isValid() && hdr.ipv4.ttl <= 1)
                   || (hdr.ipv6.isValid() && hdr.ipv6.hop_limit <= 1)) {
            drop(DROP_TTL_EXPIRED);
            exit;
        }
        classify.apply(hdr, meta);
        if (meta.srv6_transit) {
            hdr.srv6.hop_limit = hdr.srv6.hop_limit - 1;
        } else {
            routing.apply(hdr, meta);
            if (meta.routed) {
                structured_ev.apply(hdr, meta, std_meta);
                if (!meta.steered) {
                    next.apply(hdr, meta, std_meta);
                }
            }
            if (!meta.routed) {
                drop(DROP_NO_ROUTE);
                exit;
            }
            if (hdr.ipv4.isValid()) {
                hdr.ipv4.ttl = hdr.ipv4.ttl - 1;
            } else {
                hdr.ipv6.hop_limit = hdr.ipv6.hop_limit - 1;
            }
        }
        priority.apply(meta, std_meta);
        trim.apply(hdr, meta, std_meta);
    }
}

control MrcEgress(inout headers_t hdr, inout local_metadata_t meta,
                  inout standard_metadata_t std_meta) {
    @name(".MrcEgress.port_tx")
    counter(MAX_PORTS, CounterType.packets_and_bytes) port_tx;

    EcnMarking() ecn;

    apply {
        /* priority keeps the value ingress chose, i.e. the queue the packet came from: the
         * lossless and high-priority queues never write the register trimming reads. */
        if (std_meta.priority == PRIO_NORMAL) {
            port_occupancy.write((bit<32>)std_meta.egress_port, std_meta.deq_qdepth);
        }
        port_tx.count((bit<32>)std_meta.egress_port);
        if (std_meta.egress_port != CPU_PORT) {
            ecn.apply(hdr, meta, std_meta);
        }
    }
}

V1Switch(MrcParser(), MrcVerifyChecksum(), MrcIngress(), MrcEgress(), MrcComputeChecksum(),
         MrcDeparser()) main;
