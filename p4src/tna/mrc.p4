/* MRC-aware switch program for Tofino 1 (TNA, tna.p4), compiled with p4c-barefoot.
 *
 * The TNA counterpart of ../mrc.p4 (docs/tofino.md says what differs and why). Ingress: drop and
 * count malformed packets, packet I/O with the controller, DSCP classification, SRv6 uSID source
 * routing of IPv6-in-IPv6 carriers, L3 routing to a multipath group hashed on the entropy value or,
 * with structured EV, to the uplink the EV's fields name, TTL, queue choice. Egress: trimming
 * (mirror with truncation), RED-like ECN marking, per-port counters.
 * P4Runtime-visible names are pinned with absolute @names equal to mrc.p4's wherever the meaning
 * is the same; p4src/tna/name_map.py lists the ones that differ. Shared with mrc.p4: defines,
 * headers, and the classify and routing controls. */
#include <core.p4>
#include <tna.p4>

#include "../include/defines.p4"
#include "../include/headers.p4"
#include "include/defines.p4"
#include "include/metadata.p4"
#include "include/parser.p4"
#include "include/control/packet_io.p4"
#include "../include/control/classify.p4"
#include "../include/control/routing.p4"
#include "include/control/hash_inputs.p4"
#include "include/control/srv6.p4"
#include "include/control/structured_ev.p4"
#include "include/control/next.p4"
#include "include/control/priority.p4"
#include "include/control/trim.p4"
#include "include/control/ecn.p4"

control MrcIngress(inout tna_headers_t hdr, inout ingress_md_t meta,
                   in ingress_intrinsic_metadata_t ig_intr_md,
                   in ingress_intrinsic_metadata_from_parser_t ig_prsr_md,
                   inout ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md,
                   inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    @name(".MrcIngress.port_rx")
    Counter<bit<64>, PortId_t>(MAX_PORTS, CounterType_t.PACKETS_AND_BYTES) port_rx;
    @name(".MrcIngress.port_drops")
    Counter<bit<32>, PortId_t>(MAX_PORTS, CounterType_t.PACKETS) port_drops;
    @name(".MrcIngress.drop_reasons")
    Counter<bit<32>, bit<32>>(DROP_REASONS, CounterType_t.PACKETS) drop_reasons;

    PacketIoIngress() packet_io;
    Classify() classify;
    Srv6() srv6;
    Routing() routing;
    HashInputs() hash_inputs;
    EvField() ev_field;
    StructuredEv() structured_ev;
    Next() next;
    Priority() priority;

    /* A Tofino table addresses its indirect counters with one index, so port_drops is counted
     * beside this action rather than in it. */
    @name(".MrcIngress.drop")
    action drop(bit<32> reason) {
        drop_reasons.count(reason);
        ig_dprsr_md.drop_ctl = 1;
    }

    apply {
        port_rx.count(ig_intr_md.ingress_port);
        bool dropped = true;
        bit<32> reason = DROP_PARSER_OTHER;
        bool handled = false;
        /* One drop site, so each counter is updated from one table, as Tofino requires. */
        if (ig_prsr_md.parser_err != PARSER_ERROR_OK) {
            if (ig_prsr_md.parser_err & PARSER_ERROR_PARTIAL_HDR != 0) {
                reason = DROP_PARSER_TOO_SHORT;
            } else if (ig_prsr_md.parser_err & PARSER_ERROR_NO_MATCH != 0) {
                reason = DROP_PARSER_NO_MATCH;
            }
        } else if (meta.bad_ipv4) {
            reason = DROP_PARSER_BAD_IPV4;
        } else if (meta.bad_ipv6) {
            reason = DROP_PARSER_BAD_IPV6;
        } else if (meta.bad_opcode) {
            reason = DROP_PARSER_BAD_OPCODE;
        } else if (hdr.mrc.ipv4.isValid() && !meta.ipv4_checksum_ok) {
            reason = DROP_IPV4_CHECKSUM;
        } else {
            packet_io.apply(hdr.mrc, ig_intr_md, ig_tm_md, handled);
            if (handled) {
                dropped = false;
            } else if (!hdr.mrc.ipv4.isValid() && !hdr.mrc.ipv6.isValid()) {
                reason = DROP_NOT_IP;
            } else if (hdr.mrc.srv6.isValid() && hdr.mrc.srv6.hop_limit <= 1) {
                reason = DROP_TTL_EXPIRED;
            } else {
                /* Routing and the hash inputs read the inner header of a carrier, so they are
                 * looked up beside the uSID tables, not after them; a carrier in transit then
                 * ignores them. */
                bit<32> srv6_reason = 0;
                if (hdr.mrc.srv6.isValid()) {
                    srv6.apply(hdr.mrc, meta.mrc, ig_tm_md, srv6_reason);
                } else {
                    meta.mrc.srv6_transit = false;
                }
                /* Copied here, not in the parser: the DSCP fields sit at different bit offsets,
                 * which one parser-written field cannot take. A carrier in transit is classified
                 * by its outer DSCP, which the sender copies from the inner one. */
                if (meta.mrc.srv6_transit) {
                    meta.mrc.dscp = hdr.mrc.srv6.dscp;
                } else if (hdr.mrc.ipv4.isValid()) {
                    meta.mrc.dscp = hdr.mrc.ipv4.dscp;
                } else {
                    meta.mrc.dscp = hdr.mrc.ipv6.dscp;
                }
                hash_inputs.apply(hdr.mrc, meta.mrc);
                ev_field.apply(meta.mrc, meta.ev_field, meta.ev_configured);
                classify.apply(hdr.mrc, meta.mrc);
                routing.apply(hdr.mrc, meta.mrc);
                if (srv6_reason != 0) {
                    reason = srv6_reason;
                } else if (meta.mrc.srv6_transit) {
                    dropped = false;
                    hdr.mrc.srv6.hop_limit = hdr.mrc.srv6.hop_limit - 1;
                } else if ((hdr.mrc.ipv4.isValid() && hdr.mrc.ipv4.ttl <= 1)
                           || (hdr.mrc.ipv6.isValid() && hdr.mrc.ipv6.hop_limit <= 1)) {
                    reason = DROP_TTL_EXPIRED;
                } else {
                    if (meta.mrc.routed) {
                        structured_ev.apply(hdr.mrc, meta.mrc, meta.ev_field, meta.ev_configured,
                                            ig_tm_md);
                        if (!meta.mrc.steered) {
                            next.apply(hdr.mrc, meta.mrc, ig_tm_md);
                        }
                    }
                    if (!meta.mrc.routed) {
                        reason = DROP_NO_ROUTE;
                    } else {
                        dropped = false;
                        if (hdr.mrc.ipv4.isValid()) {
                            hdr.mrc.ipv4.ttl = hdr.mrc.ipv4.ttl - 1;
                        } else {
                            hdr.mrc.ipv6.hop_limit = hdr.mrc.ipv6.hop_limit - 1;
                        }
                    }
                }
                if (!dropped) {
                    priority.apply(meta.mrc, ig_tm_md);
                    hdr.bridged.setValid();
                    hdr.bridged.pkt_src = PKT_BRIDGED;
                    hdr.bridged.mrc_class = meta.mrc.mrc_class;
                    hdr.bridged._pad = 0;
                }
            }
        }
        if (dropped) {
            drop(reason);
            port_drops.count(ig_intr_md.ingress_port);
        }
    }
}

control MrcEgress(inout tna_headers_t hdr, inout egress_md_t meta,
                  in egress_intrinsic_metadata_t eg_intr_md,
                  in egress_intrinsic_metadata_from_parser_t eg_prsr_md,
                  inout egress_intrinsic_metadata_for_deparser_t eg_dprsr_md,
                  inout egress_intrinsic_metadata_for_output_port_t eg_oport_md) {
    @name(".MrcEgress.port_tx")
    Counter<bit<64>, PortId_t>(MAX_PORTS, CounterType_t.PACKETS_AND_BYTES) port_tx;

    Trim() trim;
    EcnMarking() ecn;

    apply {
        bool trimming;
        trim.apply(hdr.mrc, meta.bridged, meta.trim, meta.trim_session, eg_intr_md, eg_dprsr_md,
                   trimming);
        if (!trimming) {
            /* The trimmed copy is counted when it leaves, not the original it replaces. */
            port_tx.count(eg_intr_md.egress_port);
            if (meta.bridged.isValid()) {
                ecn.apply(hdr.mrc, meta.bridged.mrc_class, meta.ecn, eg_intr_md);
            }
        }
    }
}

Pipeline(MrcIngressParser(), MrcIngress(), MrcIngressDeparser(), MrcEgressParser(), MrcEgress(),
         MrcEgressDeparser()) pipe;

Switch(pipe) main;
