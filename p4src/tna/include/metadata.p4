/* Headers and metadata of the TNA program that v1model does not need.
 *
 * Tofino hands nothing from ingress to egress except what the ingress deparser prepends
 * (bridged metadata), and nothing from egress to a mirror copy except the mirror header. The
 * packet headers themselves are MRC's (../../include/headers.p4), nested as `mrc` so the
 * controls shared with mrc.p4 (classify, routing) take them unchanged. */
#ifndef MRC_TNA_METADATA_P4
#define MRC_TNA_METADATA_P4

/* Ingress to egress: the traffic class (egress needs it for ECN and trimming). */
header bridged_t {
    bit<8>      pkt_src;    /* PKT_BRIDGED */
    mrc_class_t mrc_class;
    bit<4>      _pad;
}

/* Egress to its own mirror copy: the copy is to be trimmed, toward a host or not. */
header trim_mirror_t {
    bit<8>  pkt_src;        /* PKT_TRIM */
    bit<1>  host_facing;
    bit<7>  _pad;
}

struct tna_headers_t {
    bridged_t bridged;
    headers_t mrc;
}

struct ingress_md_t {
    local_metadata_t mrc;
    /* Parse faults the parser recorded instead of failing (Tofino has no user parser errors). */
    bool bad_ipv4;
    bool bad_ipv6;
    bool bad_opcode;
    bool ipv4_checksum_ok;  /* set only when ipv4 is valid */
    bit<16> ev_field;       /* this switch's structured-EV field of the packet's EV */
    bool ev_configured;     /* the switch steers on structured EV */
}

/* ECN's intermediate values. Metadata, not locals: the compiler folds locals back into one
 * condition, which Tofino's gateways cannot evaluate. */
struct ecn_scratch_t {
    qdepth_t draw;       /* a uniform random number */
    qdepth_t above_min;  /* depth - min_qdepth, saturating */
    qdepth_t span;       /* max_qdepth - min_qdepth */
    qdepth_t r;          /* the draw masked to the span */
    qdepth_t excess;     /* above_min - r, saturating: mark when non-zero */
}

struct egress_md_t {
    ecn_scratch_t ecn;
    bridged_t     bridged;
    trim_mirror_t trim;
    MirrorId_t    trim_session;
}

#endif
