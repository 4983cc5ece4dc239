/* Constants of the TNA (Tofino 1) program that have no v1model counterpart.
 *
 * Everything the two programs share (EtherTypes, opcodes, header sizes, classes, drop reasons)
 * comes from ../../include/defines.p4; this file adds Tofino's queues, the CPU port, the
 * bridged/mirror header tags and the trimming mirror sessions. */
#ifndef MRC_TNA_DEFINES_P4
#define MRC_TNA_DEFINES_P4

/* The CPU port is the chip's PCIe port: 320 on 4-pipe Tofino 1 (and the Tofino model), 192 on
 * 2-pipe parts. Build with -DTNA_CPU_PORT=192 for those. */
#ifndef TNA_CPU_PORT
#define TNA_CPU_PORT 320
#endif
const PortId_t TNA_CPU = TNA_CPU_PORT;

/* Egress queues, as mrc.p4's priority queues (the numbers are Tofino queue ids, not
 * priorities). QID_NORMAL: MRC data and any other IP. QID_HIGH: MRC control, trimmed headers,
 * RoCE ACK/NAK and CNP. QID_LOSSLESS: RoCE data, the lossless class. What makes each queue what
 * it is lives in the switch's port and queue configuration (bf-drivers / the SDE's port and
 * traffic-manager settings), not in P4 or P4Runtime: QID_HIGH strict priority over the others;
 * QID_LOSSLESS mapped to a PFC-enabled priority (iCoS), with pause frames on and headroom
 * buffer reserved on every port, for it to be lossless at all (docs/tofino.md). */
const QueueId_t QID_NORMAL = 0;
const QueueId_t QID_HIGH = 1;
const QueueId_t QID_LOSSLESS = 2;

/* First byte of what egress parses before Ethernet: who made this packet. */
const bit<8> PKT_BRIDGED = 0;   /* came through ingress: bridged metadata follows */
const bit<8> PKT_TRIM = 1;      /* an egress-to-egress mirror copy, truncated: to be trimmed */

/* Egress mirror type of the trimming copy (the deparser's Mirror extern). */
const MirrorType_t MIRROR_TYPE_TRIM = 1;

/* The trimming mirror session of port p is TRIM_SESSION_BASE + p (1 ++ p as 10 bits): the
 * control plane creates one per trimming port (P4Runtime CloneSessionEntry with
 * packet_length_bytes = TRIM_TRUNCATE_BYTES, class_of_service of the high-priority queue). */
const MirrorId_t TRIM_SESSION_BASE = 512;

/* Truncation length of a trim session: the mirror header (2 bytes) and the longest header stack
 * a trimmable packet has (Ethernet, an SRv6 carrier's outer IPv6, IPv6, UDP, BTH, METH, TSETH,
 * RETH, ImmDt = 142 bytes). Shorter stacks keep payload bytes up to that length (68 for IPv4
 * without TSETH or ImmDt), which the rewritten IP and UDP lengths exclude: the receiver sees them
 * as link-layer padding. */
const bit<16> TRIM_TRUNCATE_BYTES = 144;

#endif
