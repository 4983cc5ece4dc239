/* Parser, deparser and checksum controls.
 *
 * On UDP 4791 the BTH opcode picks the headers: MRC's own opcodes (vendor range) and the standard
 * RoCEv2 RC writes, ACK and CNP; any other opcode is a parser error (dropped, counted).
 *
 * v1model does not drop a packet whose parse failed: it hands it to ingress with parser_error set,
 * half-parsed. MrcIngress drops and counts every such packet first thing.
 * IPv6-in-IPv6 and IPv4-in-IPv6 are SRv6 uSID carriers (control/srv6.p4): the outer header is
 * hdr.srv6, the inner one hdr.ipv6 or hdr.ipv4.
 * Built with MRC_L3_BASELINE defined, the parser stops at UDP (the baseline program of
 * `make bench-dataplane`). */
#ifndef MRC_PARSER_P4
#define MRC_PARSER_P4

#include <core.p4>
#include <v1model.p4>
#include "headers.p4"

/* UnknownOpcode: a BTH opcode that is neither MRC's nor one of the standard RoCE RC opcodes the
 * fabric forwards. */
error {
    BadIpv4Header,
    BadIpv6Header,
    UnknownOpcode
}

parser MrcParser(packet_in pkt, out headers_t hdr, inout local_metadata_t meta,
                 inout standard_metadata_t std_meta) {
    state start {
        transition select(std_meta.ingress_port) {
            CPU_PORT: parse_packet_out;
            default: parse_ethernet;
        }
    }

    state parse_packet_out {
        pkt.extract(hdr.packet_out);
        transition parse_ethernet;
    }

    state parse_ethernet {
        pkt.extract(hdr.ethernet);
        transition select(hdr.ethernet.ether_type) {
            ETHERTYPE_IPV4: parse_ipv4;
#ifdef MRC_L3_BASELINE
            ETHERTYPE_IPV6: parse_ipv6;
#else
            ETHERTYPE_IPV6: parse_ipv6_or_carrier;
#endif
            default: accept;
        }
    }

    /* IPv6 whose next header is IPv6 or IPv4 is an SRv6 uSID carrier: the outer header goes to
     * hdr.srv6 and the inner packet is parsed as if it had come alone. The next-header byte is
     * the 7th of the IPv6 header. */
#ifndef MRC_L3_BASELINE
    state parse_ipv6_or_carrier {
        transition select(pkt.lookahead<bit<56>>()[7:0]) {
            IP_PROTO_IPV6: parse_srv6;
            IP_PROTO_IPV4: parse_srv6;
            default: parse_ipv6;
        }
    }

    state parse_srv6 {
        pkt.extract(hdr.srv6);
        verify(hdr.srv6.version == 6, error.BadIpv6Header);
        transition select(hdr.srv6.next_hdr) {
            IP_PROTO_IPV4: parse_ipv4;
            default: parse_ipv6;
        }
    }
#endif

    state parse_ipv4 {
        pkt.extract(hdr.ipv4);
        /* IP options never appear in RoCEv2 fabrics; IHL != 5 is treated as malformed. */
        verify(hdr.ipv4.version == 4 && hdr.ipv4.ihl == 5, error.BadIpv4Header);
        meta.dscp = hdr.ipv4.dscp;
        transition select(hdr.ipv4.frag_offset, hdr.ipv4.protocol) {
            (0, IP_PROTO_UDP): parse_udp;
            default: accept;
        }
    }

    state parse_ipv6 {
        pkt.extract(hdr.ipv6);
        verify(hdr.ipv6.version == 6, error.BadIpv6Header);
        meta.dscp = hdr.ipv6.dscp;
        transition select(hdr.ipv6.next_hdr) {
            IP_PROTO_UDP: parse_udp;
            default: accept;
        }
    }

    state parse_udp {
        pkt.extract(hdr.udp);
#ifdef MRC_L3_BASELINE
        transition accept;
#else
        transition select(hdr.udp.dst_port) {
            ROCEV2_UDP_PORT: parse_bth;
            default: accept;
        }
#endif
    }

#ifndef MRC_L3_BASELINE
    state parse_bth {
        pkt.extract(hdr.bth);
        transition select(hdr.bth.opcode) {
            OP_WRITE_FIRST: parse_meth;
            OP_WRITE_MIDDLE: parse_meth;
            OP_WRITE_LAST: parse_meth;
            OP_WRITE_LAST_IMM: parse_meth;
            OP_WRITE_ONLY: parse_meth;
            OP_WRITE_ONLY_IMM: parse_meth;
            OP_ACK: parse_aeth;
            OP_EP_REQUEST: parse_eph;
            OP_EP_RESPONSE: parse_eph;
            OP_SACK: parse_seth;
            OP_NACK: parse_neth;
            OP_RELIABILITY_PROBE: accept;
            ROCE_WRITE_FIRST: parse_roce_reth;
            ROCE_WRITE_MIDDLE: accept;
            ROCE_WRITE_LAST: accept;
            ROCE_WRITE_LAST_IMM: parse_roce_immdt;
            ROCE_WRITE_ONLY: parse_roce_reth;
            ROCE_WRITE_ONLY_IMM: parse_roce_reth;
            ROCE_ACK: parse_aeth;
            ROCE_CNP: parse_cnp;
            default: unknown_opcode;
        }
    }

    state unknown_opcode {
        verify(false, error.UnknownOpcode);
        transition accept;  /* never reached: the failed verify ends parsing with the error */
    }

    state parse_meth {
        pkt.extract(hdr.meth);
        meta.mrc_hdr_len = BTH_LEN + METH_LEN + RETH_LEN;
        transition select(hdr.bth.ts) {
            1: parse_tseth;
            default: parse_reth;
        }
    }

    state parse_tseth {
        pkt.extract(hdr.tseth);
        meta.mrc_hdr_len = meta.mrc_hdr_len + TSETH_LEN;
        transition parse_reth;
    }

    state parse_reth {
        pkt.extract(hdr.reth);
        transition select(hdr.bth.opcode) {
            OP_WRITE_LAST_IMM: parse_immdt;
            OP_WRITE_ONLY_IMM: parse_immdt;
            default: accept;
        }
    }

    state parse_immdt {
        pkt.extract(hdr.immdt);
        meta.mrc_hdr_len = meta.mrc_hdr_len + IMM_LEN;
        transition accept;
    }

    /* Standard RoCE: extracted to check the packet is whole, never trimmed (no METH, which is
     * what Trim requires), so mrc_hdr_len stays 0. */
    state parse_roce_reth {
        pkt.extract(hdr.reth);
        transition select(hdr.bth.opcode) {
            ROCE_WRITE_ONLY_IMM: parse_roce_immdt;
            default: accept;
        }
    }

    state parse_roce_immdt {
        pkt.extract(hdr.immdt);
        transition accept;
    }

    state parse_cnp {
        pkt.extract(hdr.cnp);
        transition accept;
    }

    state parse_aeth {
        pkt.extract(hdr.aeth);
        transition accept;
    }

    state parse_eph {
        pkt.extract(hdr.eph);
        transition accept;
    }

    state parse_seth {
        pkt.extract(hdr.seth);
        pkt.extract(hdr.cc_state);
        transition accept;
    }

    state parse_neth {
        pkt.extract(hdr.neth);
        transition accept;
    }
#endif
}

control MrcVerifyChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        verify_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control MrcComputeChecksum(inout headers_t hdr, inout local_metadata_t meta) {
    apply {
        update_checksum(hdr.ipv4.isValid(),
            { hdr.ipv4.version, hdr.ipv4.ihl, hdr.ipv4.dscp, hdr.ipv4.ecn, hdr.ipv4.total_len,
              hdr.ipv4.identification, hdr.ipv4.flags, hdr.ipv4.frag_offset, hdr.ipv4.ttl,
              hdr.ipv4.protocol, hdr.ipv4.src_addr, hdr.ipv4.dst_addr },
            hdr.ipv4.hdr_checksum, HashAlgorithm.csum16);
    }
}

control MrcDeparser(packet_out pkt, in headers_t hdr) {
    apply {
        pkt.emit(hdr.packet_in);
        pkt.emit(hdr.ethernet);
        pkt.emit(hdr.srv6);
        pkt.emit(hdr.ipv4);
        pkt.emit(hdr.ipv6);
        pkt.emit(hdr.udp);
        pkt.emit(hdr.bth);
        pkt.emit(hdr.meth);
        pkt.emit(hdr.tseth);
        pkt.emit(hdr.reth);
        pkt.emit(hdr.immdt);
        pkt.emit(hdr.aeth);
        pkt.emit(hdr.seth);
        pkt.emit(hdr.cc_state);
        pkt.emit(hdr.neth);
        pkt.emit(hdr.eph);
        pkt.emit(hdr.cnp);
    }
}

#endif
