/* MRC-aware ECMP on Tofino, as mrc.p4's Next: a next-hop id selects a P4Runtime action-profile
 * group, and the selector hashes the addresses and the entropy value (EV) with CRC32, so every EV
 * maps to one member and different EVs spread. HashInputs (hash_inputs.p4) sets the inputs. Tofino's selector drops a member whose watch port is down
 * only through the control plane (the switch's port-status handling), not in the data plane. */
#ifndef MRC_TNA_NEXT_P4
#define MRC_TNA_NEXT_P4

/* Members per group and groups: a leaf's uplinks, a spine's downlinks, with room. */
const bit<32> MAX_GROUP_SIZE = 64;
const bit<32> MAX_GROUPS = 256;

control Next(inout headers_t hdr, inout local_metadata_t meta,
             inout ingress_intrinsic_metadata_for_tm_t ig_tm_md) {
    @name(".MrcIngress.next.member_packets")
    Counter<bit<64>, bit<16>>(MAX_MEMBERS, CounterType_t.PACKETS_AND_BYTES) member_packets;

    Hash<bit<32>>(HashAlgorithm_t.CRC32) selector_hash;
    /* P4Runtime (standard externs) names the selector after its action profile, so the profile
     * carries mrc.p4's selector name. */
    @name(".MrcIngress.next.hashed_selector")
    ActionProfile(1024) hashed_profile;
    @name(".MrcIngress.next.hashed_selection")
    ActionSelector(hashed_profile, selector_hash, SelectorMode_t.FAIR, MAX_GROUP_SIZE,
                   MAX_GROUPS) hashed_selector;

    @name(".MrcIngress.next.routing_hashed")
    action routing_hashed(PortId_t port, mac_t smac, mac_t dmac, bit<16> member_index) {
        ig_tm_md.ucast_egress_port = port;
        hdr.ethernet.src_addr = smac;
        hdr.ethernet.dst_addr = dmac;
        member_packets.count(member_index);
    }

    @name(".MrcIngress.next.hashed")
    table hashed {
        key = {
            meta.next_id: exact @name("next_id");
            meta.hash_src: selector @name("hash_src");
            meta.hash_dst: selector @name("hash_dst");
            meta.ev: selector @name("ev");
        }
        actions = { routing_hashed; }
        implementation = hashed_selector;
        size = 1024;
    }

    apply {
        if (!hashed.apply().hit) {
            meta.routed = false;
        }
    }
}

#endif
