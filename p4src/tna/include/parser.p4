/* Parsers and deparsers of the TNA program.
 *
 * Ingress parses up to the BTH opcode: enough to route, classify and to refuse opcodes the fabric
 * does not carry. Tofino has no user-defined parser errors, so what mrc.p4 raises with verify()
 * (bad IPv4/IPv6 version or IHL, unknown opcode) is recorded in metadata and dropped by ingress
 * with the same drop reasons; truncated headers and unmatched selects are the hardware's
 * parser_err flags. Egress parses one header further on MRC's data writes, METH, which marks a
 * packet trimmable (trimming happens there). Both parse an IPv6 packet whose next header is IPv6 or
 * IPv4 as an SRv6 uSID carrier, as mrc.p4 does: the outer header goes to hdr.mrc.srv6 and the
 * inner packet is parsed as if it had come alone. */
#ifndef MRC_TNA_PARSER_P4
#define MRC_TNA_PARSER_P4

parser MrcIngressParser(packet_in pkt, out tna_headers_t hdr, out ingress_md_t meta,
                        out ingress_intrinsic_metadata_t ig_intr_md) {
    Checksum() ipv4_csum;

    state start {
        pkt.extract(ig_intr_md);
        pkt.advance(PORT_METADATA_SIZE);
        meta.bad_ipv4 = false;
        meta.bad_ipv6 = false;
        meta.bad_opcode = false;
        transition select(ig_intr_md.ingress_port) {
            TNA_CPU: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        pkt.extract(hdr.mrc.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.mrc.ethernet);
        transition select(hdr.mrc.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6_or_carrier;
            default: accept;
        }
    }

    /* The next-header byte is the 7th of the IPv6 header. */
    state parse_ipv6_or_carrier {
        transition select(pkt.lookahead<bit<56>>()[7:0]) {
            IP_PROTO_IPV6: parse_srv6;
            IP_PROTO_IPV4: parse_srv6;
            default: parse_ipv6;
        }
    }

    state parse_srv6 {
        pkt.extract(hdr.mrc.srv6);
        transition select(hdr.mrc.srv6.version, hdr.mrc.srv6.next_hdr) {
            (6, IP_PROTO_IPV4): parse_ipv4;
            (6, IP_PROTO_IPV6): parse_ipv6;
            default: bad_ipv6;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.mrc.ipv4);
        ipv4_csum.add(hdr.mrc.ipv4);
        meta.ipv4_checksum_ok = ipv4_csum.verify();
        /* IP options never appear in RoCEv2 fabrics; IHL != 5 is treated as malformed. */
        transition select(hdr.mrc.ipv4.version, hdr.mrc.ipv4.ihl, hdr.mrc.ipv4.frag_offset,
                          hdr.mrc.ipv4.protocol) {
            (4, 5, 0, IP_PROTO_UDP): parse_udp;
            (4, 5, _, _): accept;
            default: bad_ipv4;
        }
    }

    state bad_ipv4 {
        meta.bad_ipv4 = true;
        transition accept;
    }

    state parse_ipv6 {
        pkt.extract(hdr.mrc.ipv6);
        transition select(hdr.mrc.ipv6.version, hdr.mrc.ipv6.next_hdr) {
            (6, IP_PROTO_UDP): parse_udp;
            (6, _): accept;
            default: bad_ipv6;
        }
    }

    state bad_ipv6 {
        meta.bad_ipv6 = true;
        transition accept;
    }

    state parse_udp {
        pkt.extract(hdr.mrc.udp);
        transition select(hdr.mrc.udp.dst_port) {
            ROCEV2_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    /* The opcodes of mrc.p4's parser: MRC's own and the standard RoCE RC writes, ACK and CNP. */
    state parse_bth {
        pkt.extract(hdr.mrc.bth);
        transition select(hdr.mrc.bth.opcode) {
            OP_WRITE_FIRST: accept;
            OP_WRITE_MIDDLE: accept;
            OP_WRITE_LAST: accept;
            OP_WRITE_LAST_IMM: accept;
            OP_WRITE_ONLY: accept;
            OP_WRITE_ONLY_IMM: accept;
            OP_ACK: accept;
            OP_EP_REQUEST: accept;
            OP_EP_RESPONSE: accept;
            OP_SACK: accept;
            OP_NACK: accept;
            OP_RELIABILITY_PROBE: accept;
            ROCE_WRITE_FIRST: accept;
            ROCE_WRITE_MIDDLE: accept;
            ROCE_WRITE_LAST: accept;
            ROCE_WRITE_LAST_IMM: accept;
            ROCE_WRITE_ONLY: accept;
            ROCE_WRITE_ONLY_IMM: accept;
            ROCE_ACK: accept;
            ROCE_CNP: accept;
            default: unknown_opcode;
        }
    }

    state unknown_opcode {
        meta.bad_opcode = true;
        transition accept;
    }
}

control MrcIngressDeparser(packet_out pkt, inout tna_headers_t hdr, in ingress_md_t meta,
                           in ingress_intrinsic_metadata_for_deparser_t ig_dprsr_md) {
    Checksum() ipv4_csum;

    apply {
        if (hdr.mrc.ipv4.isValid()) {
            hdr.mrc.ipv4.hdr_checksum = ipv4_csum.update({
                hdr.mrc.ipv4.version, hdr.mrc.ipv4.ihl, hdr.mrc.ipv4.dscp, hdr.mrc.ipv4.ecn,
                hdr.mrc.ipv4.total_len, hdr.mrc.ipv4.identification, hdr.mrc.ipv4.flags,
                hdr.mrc.ipv4.frag_offset, hdr.mrc.ipv4.ttl, hdr.mrc.ipv4.protocol,
                hdr.mrc.ipv4.src_addr, hdr.mrc.ipv4.dst_addr });
        }
        pkt.emit(hdr.bridged);
        pkt.emit(hdr.mrc.packet_in);
        pkt.emit(hdr.mrc.ethernet);
        pkt.emit(hdr.mrc.srv6);
        pkt.emit(hdr.mrc.ipv4);
        pkt.emit(hdr.mrc.ipv6);
        pkt.emit(hdr.mrc.udp);
        pkt.emit(hdr.mrc.bth);
    }
}

/* Egress sees two kinds of packet: one from ingress (bridged metadata first) and the truncated
 * mirror copy that egress itself made of a packet it decided to trim (mirror header first). */
parser MrcEgressParser(packet_in pkt, out tna_headers_t hdr, out egress_md_t meta,
                       out egress_intrinsic_metadata_t eg_intr_md) {
    state start {
        pkt.extract(eg_intr_md);
        meta.trim_session = 0;
        transition select(pkt.lookahead<bit<8>>()) {
            PKT_TRIM: parse_trim;
            default: parse_bridged;
        }
    }

    state parse_bridged {
        pkt.extract(meta.bridged);
        meta.trim.setInvalid();
        transition parse_ethernet;
    }

    state parse_trim {
        pkt.extract(meta.trim);
        meta.bridged.setInvalid();
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.mrc.ethernet);
        transition select(hdr.mrc.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
            ETHERTYPE_IPV6: parse_ipv6_or_carrier;
            default: accept;
        }
    }

    /* Ingress has refused a carrier with a bad outer version. */
    state parse_ipv6_or_carrier {
        transition select(pkt.lookahead<bit<56>>()[7:0]) {
            IP_PROTO_IPV6: parse_srv6;
            IP_PROTO_IPV4: parse_srv6;
            default: parse_ipv6;
        }
    }

    state parse_srv6 {
        pkt.extract(hdr.mrc.srv6);
        transition select(hdr.mrc.srv6.next_hdr) {
            IP_PROTO_IPV4: parse_ipv4;
            default: parse_ipv6;
        }
    }

    state parse_ipv4 {
        pkt.extract(hdr.mrc.ipv4);
        transition select(hdr.mrc.ipv4.frag_offset, hdr.mrc.ipv4.protocol) {
            (0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_ipv6 {
        pkt.extract(hdr.mrc.ipv6);
        transition select(hdr.mrc.ipv6.next_hdr) {
            IP_PROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.mrc.udp);
        transition select(hdr.mrc.udp.dst_port) {
            ROCEV2_UDP_PORT: parse_bth;
            default: accept;
        }
    }

    /* Only MRC's data writes are trimmable; every other packet's headers after the BTH are
     * payload to egress. */
    state parse_bth {
        pkt.extract(hdr.mrc.bth);
        transition select(hdr.mrc.bth.opcode) {
            OP_WRITE_FIRST: parse_meth;
            OP_WRITE_MIDDLE: parse_meth;
            OP_WRITE_LAST: parse_meth;
            OP_WRITE_LAST_IMM: parse_meth;
            OP_WRITE_ONLY: parse_meth;
            OP_WRITE_ONLY_IMM: parse_meth;
            default: accept;
        }
    }

    /* METH says the packet is trimmable. The headers after it (TSETH, RETH, ImmDt) are not
     * extracted: trimming needs only their lengths, which the BTH's TS flag and opcode give,
     * and an SRv6 carrier's longest stack would pass egress's 160-byte parse depth. */
    state parse_meth {
        pkt.extract(hdr.mrc.meth);
        transition accept;
    }
}

control MrcEgressDeparser(packet_out pkt, inout tna_headers_t hdr, in egress_md_t meta,
                          in egress_intrinsic_metadata_for_deparser_t eg_dprsr_md) {
    Checksum() ipv4_csum;
    Mirror(MIRROR_TYPE_TRIM) trim_mirror;

    apply {
        if (eg_dprsr_md.mirror_type == MIRROR_TYPE_TRIM) {
            trim_mirror.emit<trim_mirror_t>(meta.trim_session, meta.trim);
        }
        if (hdr.mrc.ipv4.isValid()) {
            hdr.mrc.ipv4.hdr_checksum = ipv4_csum.update({
                hdr.mrc.ipv4.version, hdr.mrc.ipv4.ihl, hdr.mrc.ipv4.dscp, hdr.mrc.ipv4.ecn,
                hdr.mrc.ipv4.total_len, hdr.mrc.ipv4.identification, hdr.mrc.ipv4.flags,
                hdr.mrc.ipv4.frag_offset, hdr.mrc.ipv4.ttl, hdr.mrc.ipv4.protocol,
                hdr.mrc.ipv4.src_addr, hdr.mrc.ipv4.dst_addr });
        }
        pkt.emit(hdr.mrc.ethernet);
        pkt.emit(hdr.mrc.srv6);
        pkt.emit(hdr.mrc.ipv4);
        pkt.emit(hdr.mrc.ipv6);
        pkt.emit(hdr.mrc.udp);
        pkt.emit(hdr.mrc.bth);
        pkt.emit(hdr.mrc.meth);
    }
}

#endif
