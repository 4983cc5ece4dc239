/* Header and metadata types of the MRC switch program. MRC headers follow the OCP MRC 1.0 layout
 * (docs/protocol.md); wire/layers.py defines the same layout as scapy layers. Standard RoCEv2
 * packets share BTH, RETH, ImmDt and AETH with it; a CNP adds its 16 reserved bytes. */
#ifndef MRC_HEADERS_P4
#define MRC_HEADERS_P4

#include "defines.p4"

@controller_header("packet_in")
header packet_in_t {
    port_t  ingress_port;
    bit<7>  _pad;
}

@controller_header("packet_out")
header packet_out_t {
    port_t  egress_port;
    bit<7>  _pad;
}

header ethernet_t {
    mac_t   dst_addr;
    mac_t   src_addr;
    bit<16> ether_type;
}

header ipv4_t {
    bit<4>  version;
    bit<4>  ihl;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<16> total_len;
    bit<16> identification;
    bit<3>  flags;
    bit<13> frag_offset;
    bit<8>  ttl;
    bit<8>  protocol;
    bit<16> hdr_checksum;
    ipv4_addr_t src_addr;
    ipv4_addr_t dst_addr;
}

header ipv6_t {
    bit<4>  version;
    bit<6>  dscp;
    bit<2>  ecn;
    bit<20> flow_label;
    bit<16> payload_len;
    bit<8>  next_hdr;
    bit<8>  hop_limit;
    ipv6_addr_t src_addr;
    ipv6_addr_t dst_addr;
}

header udp_t {
    bit<16> src_port;
    bit<16> dst_port;
    bit<16> len;
    bit<16> checksum;
}

/* Base Transport Header, RoCEv2 layout; byte 8 holds MRC's A, R, RTX, TS flags. */
header bth_t {
    bit<8>  opcode;
    bit<1>  se;
    bit<1>  migreq;
    bit<2>  pad_count;
    bit<4>  tver;
    bit<16> pkey;
    bit<8>  reserved0;
    bit<24> dest_qp;
    bit<1>  ack_req;
    bit<1>  r;
    bit<1>  rtx;
    bit<1>  ts;
    bit<4>  reserved1;
    bit<24> psn;
}

header meth_t {
    bit<16> rqmsn;
    bit<16> msn;
}

header tseth_t {
    bit<16> tx_timestamp;
    bit<16> flags;
}

header reth_t {
    bit<64> virtual_addr;
    bit<32> r_key;
    bit<32> dma_len;
}

header immdt_t {
    bit<32> data;
}

header aeth_t {
    bit<8>  syndrome;
    bit<24> msn;
}

header seth_t {
    bit<4>  type;
    bit<5>  next;
    bit<2>  m;
    bit<1>  pr;
    bit<4>  reserved0;
    bit<16> ack_psn_offset;
    bit<32> entropy;
    bit<16> src_pdc;
    bit<16> dst_pdc;
    bit<8>  reserved1;
    bit<24> cack_psn;
    bit<4>  cc_type;
    bit<4>  cc_flags;
    bit<8>  mpr;
    bit<16> sack_offset;
    bit<64> sack_bitmap;
}

header cc_state_t {
    bit<16> echoed_tx_timestamp;
    bit<1>  reserved0;
    bit<15> ooo_count;
    bit<1>  r_c;
    bit<7>  rcv_cwnd_pen;
    bit<24> received_bytes;
}

header neth_t {
    bit<4>  type;
    bit<5>  next;
    bit<7>  reserved0;
    bit<8>  reason;
    bit<8>  vendor_info;
    bit<32> entropy;
    bit<16> src_pdc;
    bit<16> dst_pdc;
    bit<8>  reserved1;
    bit<24> nack_psn;
    bit<4>  cc_type;
    bit<4>  cc_flags;
    bit<8>  reserved2;
    bit<16> tx_timestamp;
}

/* RoCEv2 CNP (opcode 0x81): 16 reserved bytes after the BTH. */
header cnp_t {
    bit<128> reserved;
}

/* Endpoint request/response (EV probe, port status): the testbed's own 8-byte layout. */
header eph_t {
    bit<8>  type;
    bit<8>  flags;
    bit<16> seq;
    bit<32> value;
}

struct headers_t {
    packet_out_t packet_out;
    packet_in_t  packet_in;
    ethernet_t   ethernet;
    ipv6_t       srv6;      /* the outer IPv6 header of an SRv6 uSID carrier (IPv6/IPv4-in-IPv6) */
    ipv4_t       ipv4;
    ipv6_t       ipv6;
    udp_t        udp;
    bth_t        bth;
    meth_t       meth;
    tseth_t      tseth;
    reth_t       reth;
    immdt_t      immdt;
    aeth_t       aeth;
    seth_t       seth;
    cc_state_t   cc_state;
    neth_t       neth;
    eph_t        eph;
    cnp_t        cnp;
}

/* With an SRv6 carrier, ipv4/ipv6 are the inner (end-to-end) header and srv6 the outer one, so
 * every control that looks at the end-to-end packet works unchanged. */

/* Per-packet state. The selector hashes hash_* and ev only: BMv2 keeps stale values in invalid
 * headers, so hashing header fields directly would mix IPv4 and IPv6 garbage into the hash. */
struct local_metadata_t {
    next_id_t   next_id;
    bit<128>    hash_src;
    bit<128>    hash_dst;
    bit<32>     ev;
    bit<6>      dscp;
    mrc_class_t mrc_class;
    bool        routed;
    bool        host_facing;
    bit<16>     mrc_hdr_len;   /* bytes of MRC headers after UDP, on MRC data packets */
    qdepth_t    trim_threshold;
    bit<1>      trim_host_facing;
    bit<6>      trimmed_dscp;
    bit<6>      trimmed_lasthop_dscp;
    bool        srv6_transit;  /* an SRv6 carrier forwarded on its uSIDs, outer header kept */
    bool        steered;       /* egress chosen by a structured-EV uplink entry */
}

#endif
