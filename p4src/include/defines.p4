/* Shared constants of the MRC switch program.
 *
 * The numbers mirror wire/constants.py (the wire contract of the whole testbed); the DSCP values
 * of the traffic classes (six MRC, three standard RoCEv2) are NOT compiled in: the controller
 * writes them into MrcIngress.classify.dscp_classes and MrcIngress.trim.trim_dscp, so a fabric
 * can renumber them. */
#ifndef MRC_DEFINES_P4
#define MRC_DEFINES_P4

typedef bit<9>   port_t;
typedef bit<48>  mac_t;
typedef bit<32>  ipv4_addr_t;
typedef bit<128> ipv6_addr_t;
typedef bit<16>  next_id_t;
typedef bit<19>  qdepth_t;
typedef bit<16>  usid_t;        /* one micro-SID */

/* The CPU port must match simple_switch_grpc --cpu-port (the topology file's cpu_port, default 255). */
const port_t CPU_PORT = 255;
const bit<32> MAX_PORTS = 512;
const bit<32> MAX_MEMBERS = 4096;

const bit<16> ETHERTYPE_IPV4 = 0x0800;
const bit<16> ETHERTYPE_IPV6 = 0x86DD;
const bit<16> ETHERTYPE_LLDP = 0x88CC;
const bit<8>  IP_PROTO_UDP = 17;
const bit<8>  IP_PROTO_IPV4 = 4;   /* IPv4-in-IPv6: an SRv6 carrier over an IPv4 packet */
const bit<8>  IP_PROTO_IPV6 = 41;  /* IPv6-in-IPv6: an SRv6 carrier over an IPv6 packet */
const bit<16> ROCEV2_UDP_PORT = 4791;

/* BTH opcodes (MRC's own data opcodes, in the vendor range). */
const bit<8> OP_WRITE_FIRST      = 0xC6;
const bit<8> OP_WRITE_MIDDLE     = 0xC7;
const bit<8> OP_WRITE_LAST       = 0xC8;
const bit<8> OP_WRITE_LAST_IMM   = 0xC9;
const bit<8> OP_WRITE_ONLY       = 0xCA;
const bit<8> OP_WRITE_ONLY_IMM   = 0xCB;
const bit<8> OP_ACK              = 0xD1;
const bit<8> OP_EP_REQUEST       = 0xD8;
const bit<8> OP_EP_RESPONSE      = 0xD9;
const bit<8> OP_SACK             = 0xDC;
const bit<8> OP_NACK             = 0xDD;
const bit<8> OP_RELIABILITY_PROBE = 0xDE;

/* Standard RoCEv2 RC opcodes (IBTA): the baseline transport MRC replaces, forwarded like MRC
 * traffic. Only the writes, their acknowledgement and the congestion notification: a fabric
 * carrying RDMA WRITE needs no other, and any other opcode is dropped as unknown. */
const bit<8> ROCE_WRITE_FIRST     = 0x06;  /* RETH */
const bit<8> ROCE_WRITE_MIDDLE    = 0x07;
const bit<8> ROCE_WRITE_LAST      = 0x08;
const bit<8> ROCE_WRITE_LAST_IMM  = 0x09;  /* ImmDt */
const bit<8> ROCE_WRITE_ONLY      = 0x0A;  /* RETH */
const bit<8> ROCE_WRITE_ONLY_IMM  = 0x0B;  /* RETH, ImmDt */
const bit<8> ROCE_ACK             = 0x11;  /* AETH: an ACK or a NAK */
const bit<8> ROCE_CNP             = 0x81;  /* 16 reserved bytes */

/* SRv6 uSID (docs/routing.md): the uSID that ends a carrier (End-of-Carrier). */
const usid_t USID_END_OF_CARRIER = 0;

/* Header sizes in bytes, for trimming. */
const bit<16> ETH_LEN = 14;
const bit<16> IPV4_LEN = 20;
const bit<16> IPV6_LEN = 40;
const bit<16> UDP_LEN = 8;
const bit<16> BTH_LEN = 12;
const bit<16> METH_LEN = 4;
const bit<16> TSETH_LEN = 4;
const bit<16> RETH_LEN = 16;
const bit<16> IMM_LEN = 4;

/* Internal traffic classes, set from the packet's DSCP by the classify table. The RoCE classes,
 * as a RoCE fabric is deployed: data rides the lossless class (its own queue, deep enough that
 * congestion never drops it; pause frames, PFC, are not modelled), ECN-marked on that queue's
 * depth so DCQCN acts, never trimmed; ACK/NAK and CNP ride the high-priority queue, never
 * marked. */
typedef bit<4> mrc_class_t;
const mrc_class_t CLASS_OTHER           = 0;
const mrc_class_t CLASS_TRIMMABLE       = 1;
const mrc_class_t CLASS_TRIMMABLE_RETX  = 2;
const mrc_class_t CLASS_NO_TRIM         = 3;
const mrc_class_t CLASS_TRIMMED         = 4;
const mrc_class_t CLASS_TRIMMED_LASTHOP = 5;
const mrc_class_t CLASS_CONTROL         = 6;
const mrc_class_t CLASS_ROCE_DATA       = 7;
const mrc_class_t CLASS_ROCE_ACK        = 8;
const mrc_class_t CLASS_ROCE_CNP        = 9;

/* v1model priority queues (simple_switch_grpc --priority-queues 3), served by strict priority,
 * the highest first; each has its own depth and rate (controller/southbound/queues.py mirrors
 * these numbers). NORMAL: MRC data and any other IP, the queue trimming watches. LOSSLESS: RoCE
 * data, the lossless class (no congestion drops; pause frames, PFC, not modelled). HIGH: MRC
 * control, trimmed headers, RoCE ACK/NAK and CNP. */
const bit<3> PRIO_NORMAL = 0;
const bit<3> PRIO_LOSSLESS = 1;
const bit<3> PRIO_HIGH = 2;

/* ECN code points. */
const bit<2> ECN_NOT_ECT = 0;
const bit<2> ECN_CE = 3;

/* Indexes of MrcIngress.drop_reasons: why the switch dropped a packet it received. */
const bit<32> DROP_PARSER_TOO_SHORT   = 0;  /* error.PacketTooShort: truncated headers */
const bit<32> DROP_PARSER_NO_MATCH    = 1;  /* error.NoMatch: a select with no case */
const bit<32> DROP_PARSER_BAD_IPV4    = 2;  /* version != 4 or IHL != 5 */
const bit<32> DROP_PARSER_BAD_IPV6    = 3;  /* version != 6 */
const bit<32> DROP_PARSER_BAD_OPCODE  = 4;  /* BTH opcode neither MRC nor RoCE RC writes use */
const bit<32> DROP_PARSER_OTHER       = 5;  /* any other parser error */
const bit<32> DROP_IPV4_CHECKSUM      = 6;
const bit<32> DROP_NO_ROUTE           = 7;
const bit<32> DROP_TTL_EXPIRED        = 8;
const bit<32> DROP_NOT_IP             = 9;
const bit<32> DROP_SRV6_FOREIGN_SID   = 10; /* outer destination's block or active uSID not ours */
const bit<32> DROP_SRV6_BAD_NEXT      = 11; /* after the shift, the next uSID names no neighbour */
const bit<32> DROP_REASONS            = 16;

#endif
