--[[
Wireshark / tshark dissector for MRC (Multipath Reliable Connection) over RoCEv2.

Usage:  tshark -X lua_script:wire/mrc.lua -r capture.pcap -V
        tshark -X lua_script:wire/mrc.lua -r capture.pcap -T fields -e mrc.seth.cum_ack_psn

Why a post-dissector: Wireshark's built-in InfiniBand dissector ("RRoCE" on UDP 4791) decodes
the BTH of every MRC packet (opcode, QP, PSN) but shows MRC's own opcodes as "Unknown OpCode"
and none of the extension headers. Registering a post-dissector keeps that standard decode
untouched and adds an "MRC" tree after it. It also survives Wireshark's UDP rule of offering a
packet to the dissector of its *lower* port first: an MRC packet's source port is its entropy
value (EV), which can be any port, 53 included, and then DNS, not RRoCE, claims the payload.
The post-dissector finds the UDP header whose destination port is the MRC port itself and
decodes the whole MRC payload from there, whoever dissected it before.
Standard opcodes (below 0xC0, MRC_OPCODE_MIN in wire/constants.py: the RoCE baseline's RDMA
WRITEs, ACKs, NAKs and CNPs) are not MRC's: the post-dissector leaves them to the InfiniBand
dissector, which decodes them in full (RETH, AETH, CNP).

Layout (all big-endian; wire/layers.py documents every field choice):
  BTH (12) | by opcode:
    0xC6-0xCB data: METH(4) [TSETH(4) iff BTH.TS] RETH(16) [ImmDt(4) on 0xC9/0xCB] payload
    0xD1 ACK: AETH(4)      0xD8/0xD9 endpoint request/response: EPH(8) [EPH(8)...: the
    further EV-probe answers a 0xD9 may carry]
    0xDC SACK: SETH(28) CC_STATE(8)     0xDD NACK: NETH(20)     0xDE reliability probe: -
  then the 4-byte ICRC (little-endian CRC-32), except on a trimmed packet: DSCP TRIMMED or
  TRIMMED_LASTHOP (preferences, default 12 and 13) means a switch cut payload and ICRC off.
The ICRC is recomputed over the masked IP/UDP pseudo-header and checked (mrc.icrc.valid).
Filter field names follow the scapy layers' field names: mrc.<header>.<field>.
]]

local mrc = Proto("mrc", "MRC (Multipath Reliable Connection) over RoCEv2")

mrc.prefs.udp_port = Pref.uint("UDP port", 4791, "Destination UDP port of MRC (RoCEv2's)")
mrc.prefs.trimmed_dscp = Pref.uint("TRIMMED DSCP", 12, "DSCP of a packet trimmed in the fabric")
mrc.prefs.trimmed_lasthop_dscp =
    Pref.uint("TRIMMED_LASTHOP DSCP", 13, "DSCP of a packet trimmed on the last hop")

-- Numbers from wire/constants.py.
local OP = {
    WRITE_FIRST = 0xC6, WRITE_MIDDLE = 0xC7, WRITE_LAST = 0xC8, WRITE_LAST_IMM = 0xC9,
    WRITE_ONLY = 0xCA, WRITE_ONLY_IMM = 0xCB, ACK = 0xD1, EP_REQUEST = 0xD8,
    EP_RESPONSE = 0xD9, SACK = 0xDC, NACK = 0xDD, RELIABILITY_PROBE = 0xDE,
}
local opcode_names = {}
for name, value in pairs(OP) do opcode_names[value] = name end

local nack_reason_names = {
    [0x01] = "TRIMMED", [0x02] = "TRIMMED_LASTHOP", [0x06] = "NO_BITMAP",
    [0x07] = "NO_PKT_BUFFER", [0x0A] = "NO_RESOURCE", [0x0B] = "PSN_OOR_WINDOW",
    [0x19] = "UNEXP_EVENT",
}
local ep_type_names = { [1] = "EV_PROBE", [2] = "PORT_STATUS" }
local skip_mode_names = { [0] = "NONE", [1] = "SKIP_ONCE", [2] = "ALWAYS_SKIP" }

-- Every MRC opcode is in InfiniBand's manufacturer-specific range; below it, standard RoCE.
local MRC_OPCODE_MIN = 0xC0

local LEN = { BTH = 12, METH = 4, TSETH = 4, RETH = 16, IMM = 4, AETH = 4, SETH = 28,
              CC_STATE = 8, NETH = 20, EPH = 8, ICRC = 4, UDP = 8 }

local F = {}
-- BTH
F.opcode = ProtoField.uint8("mrc.bth.opcode", "Opcode", base.HEX, opcode_names)
F.solicited = ProtoField.uint8("mrc.bth.solicited", "Solicited event", base.DEC, nil, 0x80)
F.migreq = ProtoField.uint8("mrc.bth.migreq", "MigReq", base.DEC, nil, 0x40)
F.padcount = ProtoField.uint8("mrc.bth.padcount", "Pad count", base.DEC, nil, 0x30)
F.version = ProtoField.uint8("mrc.bth.version", "Transport version", base.DEC, nil, 0x0F)
F.pkey = ProtoField.uint16("mrc.bth.pkey", "P_Key", base.HEX)
F.resv8 = ProtoField.uint8("mrc.bth.resv8", "Reserved", base.HEX)
F.dqpn = ProtoField.uint24("mrc.bth.dqpn", "Destination QP", base.DEC)
F.ackreq = ProtoField.uint8("mrc.bth.ackreq", "A (ack request)", base.DEC, nil, 0x80)
F.r = ProtoField.uint8("mrc.bth.r", "R", base.DEC, nil, 0x40)
F.rtx = ProtoField.uint8("mrc.bth.rtx", "RTX (retransmission)", base.DEC, nil, 0x20)
F.ts = ProtoField.uint8("mrc.bth.ts", "TS (TSETH present)", base.DEC, nil, 0x10)
F.resv4 = ProtoField.uint8("mrc.bth.resv4", "Reserved", base.HEX, nil, 0x0F)
F.psn = ProtoField.uint24("mrc.bth.psn", "PSN", base.DEC)
-- METH, TSETH, RETH, ImmDt
F.rqmsn = ProtoField.uint16("mrc.meth.rqmsn", "RQMSN", base.DEC)
F.msn = ProtoField.uint16("mrc.meth.msn", "MSN", base.DEC)
F.tx_ts = ProtoField.uint16("mrc.tseth.tx_ts", "Tx timestamp (us mod 2^16)", base.DEC)
F.ts_flags = ProtoField.uint16("mrc.tseth.flags", "Flags", base.HEX)
F.va = ProtoField.uint64("mrc.reth.va", "Virtual address", base.HEX)
F.rkey = ProtoField.uint32("mrc.reth.rkey", "R_Key", base.HEX)
F.dma_length = ProtoField.uint32("mrc.reth.dma_length", "DMA length", base.DEC)
F.imm = ProtoField.uint32("mrc.immdt.imm", "Immediate data", base.HEX)
-- AETH
F.syndrome = ProtoField.uint8("mrc.aeth.syndrome", "Syndrome", base.HEX)
F.aeth_msn = ProtoField.uint24("mrc.aeth.msn", "MSN", base.DEC)
-- SETH
F.seth_type = ProtoField.uint16("mrc.seth.type", "Type", base.DEC, nil, 0xF000)
F.seth_next = ProtoField.uint16("mrc.seth.next", "Next", base.DEC, nil, 0x0F80)
F.seth_m = ProtoField.uint16("mrc.seth.m", "Skip mode", base.DEC, skip_mode_names, 0x0060)
F.seth_pr = ProtoField.uint16("mrc.seth.pr", "PR", base.DEC, nil, 0x0010)
F.seth_reserved0 = ProtoField.uint16("mrc.seth.reserved0", "Reserved", base.HEX, nil, 0x000F)
F.ack_psn_offset = ProtoField.int16("mrc.seth.ack_psn_offset", "Ack PSN offset", base.DEC)
F.seth_entropy = ProtoField.uint32("mrc.seth.entropy", "Entropy (EV answered)", base.HEX)
F.seth_src_pdc = ProtoField.uint16("mrc.seth.src_pdc_id", "Source PDC id", base.DEC)
F.seth_dst_pdc = ProtoField.uint16("mrc.seth.dst_pdc_id", "Destination PDC id", base.DEC)
F.seth_reserved1 = ProtoField.uint8("mrc.seth.reserved1", "Reserved", base.HEX)
F.cum_ack_psn = ProtoField.uint24("mrc.seth.cum_ack_psn", "Cumulative ack PSN", base.DEC)
F.seth_cc_type = ProtoField.uint8("mrc.seth.cc_type", "CC type", base.DEC, nil, 0xF0)
F.seth_cc_flags = ProtoField.uint8("mrc.seth.cc_flags", "CC flags", base.HEX, nil, 0x0F)
F.seth_ecn_echo = ProtoField.uint8("mrc.seth.ecn_echo", "ECN echo", base.DEC, nil, 0x01)
F.mpr = ProtoField.uint8("mrc.seth.mpr", "MPR", base.DEC)
F.sack_offset = ProtoField.int16("mrc.seth.sack_offset", "SACK offset", base.DEC)
F.sack_bitmap = ProtoField.uint64("mrc.seth.sack_bitmap", "SACK bitmap", base.HEX)
-- CC_STATE
F.echoed_tx_ts = ProtoField.uint16("mrc.cc_state.echoed_tx_ts", "Echoed tx timestamp", base.DEC)
F.cc_reserved = ProtoField.uint16("mrc.cc_state.reserved", "Reserved", base.DEC, nil, 0x8000)
F.ooo_count = ProtoField.uint16("mrc.cc_state.ooo_count", "Out-of-order count", base.DEC, nil,
                                0x7FFF)
F.r_c = ProtoField.uint8("mrc.cc_state.r_c", "R_C", base.DEC, nil, 0x80)
F.rcv_cwnd_pen = ProtoField.uint8("mrc.cc_state.rcv_cwnd_pen", "Receiver cwnd penalty", base.DEC,
                                  nil, 0x7F)
F.received_bytes = ProtoField.uint24("mrc.cc_state.received_bytes", "Received bytes", base.DEC)
-- NETH
F.neth_type = ProtoField.uint16("mrc.neth.type", "Type", base.DEC, nil, 0xF000)
F.neth_next = ProtoField.uint16("mrc.neth.next", "Next", base.DEC, nil, 0x0F80)
F.neth_reserved0 = ProtoField.uint16("mrc.neth.reserved0", "Reserved", base.HEX, nil, 0x007F)
F.reason = ProtoField.uint8("mrc.neth.reason", "Reason", base.HEX, nack_reason_names)
F.vendor = ProtoField.uint8("mrc.neth.vendor", "Vendor info", base.HEX)
F.neth_entropy = ProtoField.uint32("mrc.neth.entropy", "Entropy (EV NACKed)", base.HEX)
F.neth_src_pdc = ProtoField.uint16("mrc.neth.src_pdc_id", "Source PDC id", base.DEC)
F.neth_dst_pdc = ProtoField.uint16("mrc.neth.dst_pdc_id", "Destination PDC id", base.DEC)
F.neth_reserved1 = ProtoField.uint8("mrc.neth.reserved1", "Reserved", base.HEX)
F.nack_psn = ProtoField.uint24("mrc.neth.nack_psn", "NACK PSN", base.DEC)
F.neth_cc_type = ProtoField.uint8("mrc.neth.cc_type", "CC type", base.DEC, nil, 0xF0)
F.neth_cc_flags = ProtoField.uint8("mrc.neth.cc_flags", "CC flags", base.HEX, nil, 0x0F)
F.neth_ecn_echo = ProtoField.uint8("mrc.neth.ecn_echo", "ECN echo", base.DEC, nil, 0x01)
F.neth_reserved2 = ProtoField.uint8("mrc.neth.reserved2", "Reserved", base.HEX)
F.neth_tx_ts = ProtoField.uint16("mrc.neth.tx_ts", "Echoed tx timestamp", base.DEC)
-- EPH
F.eph_type = ProtoField.uint8("mrc.eph.type", "Type", base.DEC, ep_type_names)
F.eph_flags = ProtoField.uint8("mrc.eph.flags", "Flags", base.HEX)
F.eph_seq = ProtoField.uint16("mrc.eph.seq", "Sequence", base.DEC)
F.eph_value = ProtoField.uint32("mrc.eph.value", "Value (EV or port-state bitmap)", base.HEX)
-- Payload, ICRC, and what the envelope says
F.payload = ProtoField.bytes("mrc.payload", "Payload")
F.payload_length = ProtoField.uint32("mrc.payload_length", "Payload length", base.DEC)
F.icrc = ProtoField.uint32("mrc.icrc", "ICRC", base.HEX)
F.icrc_valid = ProtoField.bool("mrc.icrc.valid", "ICRC valid")
F.icrc_expected = ProtoField.uint32("mrc.icrc.expected", "Expected ICRC", base.HEX)
F.trimmed = ProtoField.bool("mrc.trimmed", "Trimmed (by DSCP)")
F.ev = ProtoField.uint32("mrc.ev", "Entropy value (UDP sport << 16 | flow label)", base.HEX)

local field_list = {}
for _, field in pairs(F) do field_list[#field_list + 1] = field end
mrc.fields = field_list

local E = {
    malformed = ProtoExpert.new("mrc.malformed", "Malformed MRC packet", expert.group.MALFORMED,
                                expert.severity.ERROR),
    bad_icrc = ProtoExpert.new("mrc.icrc.bad", "Bad ICRC", expert.group.CHECKSUM,
                               expert.severity.ERROR),
    trimmed = ProtoExpert.new("mrc.trimmed.note", "Trimmed packet: no payload, no ICRC",
                              expert.group.SEQUENCE, expert.severity.NOTE),
}
mrc.experts = { E.malformed, E.bad_icrc, E.trimmed }

local f_udp_dstport = Field.new("udp.dstport")
local f_ip_version = Field.new("ip.version")
local f_ipv6_version = Field.new("ipv6.version")

-- CRC-32 (IEEE, reflected), as zlib.crc32.
local crc_table = {}
for i = 0, 255 do
    local c = i
    for _ = 1, 8 do
        if bit32.band(c, 1) == 1 then
            c = bit32.bxor(0xEDB88320, bit32.rshift(c, 1))
        else
            c = bit32.rshift(c, 1)
        end
    end
    crc_table[i] = c
end

local function crc32_bytes(crc, byte)
    return bit32.bxor(crc_table[bit32.band(bit32.bxor(crc, byte), 0xFF)], bit32.rshift(crc, 8))
end

-- ICRC of the IP datagram src[ip_off, icrc_off + 4): 8 bytes of 0xFF, then the datagram with
-- the fields a router may rewrite set to ones (wire/icrc.py), ICRC slot excluded.
local function compute_icrc(src, ip, udp_off, icrc_off)
    local data = src:bytes(ip.offset, icrc_off - ip.offset)
    local masked = {}
    if ip.version == 4 then
        masked[1] = true; masked[8] = true; masked[10] = true; masked[11] = true
    else
        masked[1] = true; masked[2] = true; masked[3] = true; masked[7] = true
    end
    local rel_udp = udp_off - ip.offset
    masked[rel_udp + 6] = true; masked[rel_udp + 7] = true
    masked[rel_udp + LEN.UDP + 4] = true
    local crc = 0xFFFFFFFF
    for _ = 1, 8 do crc = crc32_bytes(crc, 0xFF) end
    for i = 0, data:len() - 1 do
        local byte = data:get_index(i)
        if masked[i] then
            byte = 0xFF
        elseif i == 0 and ip.version == 6 then
            byte = bit32.bor(byte, 0x0F)
        end
        crc = crc32_bytes(crc, byte)
    end
    return bit32.bxor(crc, 0xFFFFFFFF)
end

-- The IP header right before the UDP header at udp_off (innermost one, if tunnelled). Its
-- version comes from the header byte itself: the IPv6 dissector also adds a hidden ip.version.
local function enclosing_ip(src, udp_off)
    local offset = nil
    for _, fields in ipairs({ { f_ip_version() }, { f_ipv6_version() } }) do
        for _, fi in ipairs(fields) do
            if fi.offset < udp_off and (offset == nil or fi.offset > offset) then
                offset = fi.offset
            end
        end
    end
    if offset == nil then return nil end
    local first = src(offset, 1):uint()
    local ip = { offset = offset, version = bit32.rshift(first, 4) }
    if ip.version == 4 then
        ip.header_len = bit32.band(first, 0x0F) * 4
        ip.dscp = bit32.rshift(src(offset + 1, 1):uint(), 2)
        ip.flow_label = 0
    elseif ip.version == 6 then
        ip.header_len = 40
        local tc = bit32.bor(bit32.lshift(bit32.band(first, 0x0F), 4),
                             bit32.rshift(src(offset + 1, 1):uint(), 4))
        ip.dscp = bit32.rshift(tc, 2)
        ip.flow_label = src(offset + 2, 2):uint()
    else
        return nil
    end
    ip.udp_follows = (offset + ip.header_len == udp_off)
    return ip
end

-- Add a header subtree of n bytes at off, or flag the packet malformed when it is cut short.
local function header(tree, src, off, stop, n, title)
    if off + n > stop then
        tree:add_proto_expert_info(E.malformed, string.format("%s needs %d bytes, %d left",
                                                              title, n, stop - off))
        return nil
    end
    return tree:add(mrc, src(off, n), title)
end

local function dissect_bth(tree, src, off)
    local t = tree:add(mrc, src(off, LEN.BTH), "BTH")
    t:add(F.opcode, src(off, 1))
    t:add(F.solicited, src(off + 1, 1)); t:add(F.migreq, src(off + 1, 1))
    t:add(F.padcount, src(off + 1, 1)); t:add(F.version, src(off + 1, 1))
    t:add(F.pkey, src(off + 2, 2))
    t:add(F.resv8, src(off + 4, 1))
    t:add(F.dqpn, src(off + 5, 3))
    t:add(F.ackreq, src(off + 8, 1)); t:add(F.r, src(off + 8, 1)); t:add(F.rtx, src(off + 8, 1))
    t:add(F.ts, src(off + 8, 1)); t:add(F.resv4, src(off + 8, 1))
    t:add(F.psn, src(off + 9, 3))
end

-- Data packet headers after the BTH; returns the offset where the payload starts (or nil).
local function dissect_data_headers(tree, src, off, stop, opcode, ts_flag, info)
    local t = header(tree, src, off, stop, LEN.METH, "METH")
    if not t then return nil end
    t:add(F.rqmsn, src(off, 2)); t:add(F.msn, src(off + 2, 2))
    info[#info + 1] = "MSN=" .. src(off + 2, 2):uint()
    off = off + LEN.METH
    if ts_flag then
        t = header(tree, src, off, stop, LEN.TSETH, "TSETH")
        if not t then return nil end
        t:add(F.tx_ts, src(off, 2)); t:add(F.ts_flags, src(off + 2, 2))
        off = off + LEN.TSETH
    end
    t = header(tree, src, off, stop, LEN.RETH, "RETH")
    if not t then return nil end
    t:add(F.va, src(off, 8)); t:add(F.rkey, src(off + 8, 4)); t:add(F.dma_length, src(off + 12, 4))
    info[#info + 1] = string.format("VA=0x%s len=%d", src(off, 8):uint64():tohex(),
                                    src(off + 12, 4):uint())
    off = off + LEN.RETH
    if opcode == OP.WRITE_LAST_IMM or opcode == OP.WRITE_ONLY_IMM then
        t = header(tree, src, off, stop, LEN.IMM, "ImmDt")
        if not t then return nil end
        t:add(F.imm, src(off, 4))
        off = off + LEN.IMM
    end
    return off
end

local function dissect_seth(tree, src, off, stop, info)
    local t = header(tree, src, off, stop, LEN.SETH, "SETH")
    if not t then return nil end
    local b01 = src(off, 2)
    t:add(F.seth_type, b01); t:add(F.seth_next, b01); t:add(F.seth_m, b01); t:add(F.seth_pr, b01)
    t:add(F.seth_reserved0, b01)
    t:add(F.ack_psn_offset, src(off + 2, 2))
    t:add(F.seth_entropy, src(off + 4, 4))
    t:add(F.seth_src_pdc, src(off + 8, 2)); t:add(F.seth_dst_pdc, src(off + 10, 2))
    t:add(F.seth_reserved1, src(off + 12, 1))
    t:add(F.cum_ack_psn, src(off + 13, 3))
    t:add(F.seth_cc_type, src(off + 16, 1)); t:add(F.seth_cc_flags, src(off + 16, 1))
    t:add(F.seth_ecn_echo, src(off + 16, 1))
    t:add(F.mpr, src(off + 17, 1))
    t:add(F.sack_offset, src(off + 18, 2))
    t:add(F.sack_bitmap, src(off + 20, 8))
    info[#info + 1] = string.format("cack=%d bitmap=0x%s", src(off + 13, 3):uint(),
                                    src(off + 20, 8):uint64():tohex())
    off = off + LEN.SETH
    t = header(tree, src, off, stop, LEN.CC_STATE, "CC_STATE")
    if not t then return nil end
    t:add(F.echoed_tx_ts, src(off, 2))
    t:add(F.cc_reserved, src(off + 2, 2)); t:add(F.ooo_count, src(off + 2, 2))
    t:add(F.r_c, src(off + 4, 1)); t:add(F.rcv_cwnd_pen, src(off + 4, 1))
    t:add(F.received_bytes, src(off + 5, 3))
    return off + LEN.CC_STATE
end

local function dissect_neth(tree, src, off, stop, info)
    local t = header(tree, src, off, stop, LEN.NETH, "NETH")
    if not t then return nil end
    local b01 = src(off, 2)
    t:add(F.neth_type, b01); t:add(F.neth_next, b01); t:add(F.neth_reserved0, b01)
    t:add(F.reason, src(off + 2, 1)); t:add(F.vendor, src(off + 3, 1))
    t:add(F.neth_entropy, src(off + 4, 4))
    t:add(F.neth_src_pdc, src(off + 8, 2)); t:add(F.neth_dst_pdc, src(off + 10, 2))
    t:add(F.neth_reserved1, src(off + 12, 1))
    t:add(F.nack_psn, src(off + 13, 3))
    t:add(F.neth_cc_type, src(off + 16, 1)); t:add(F.neth_cc_flags, src(off + 16, 1))
    t:add(F.neth_ecn_echo, src(off + 16, 1))
    t:add(F.neth_reserved2, src(off + 17, 1))
    t:add(F.neth_tx_ts, src(off + 18, 2))
    local reason = src(off + 2, 1):uint()
    info[#info + 1] = string.format("nack_psn=%d reason=%s", src(off + 13, 3):uint(),
                                    nack_reason_names[reason] or string.format("0x%02x", reason))
    return off + LEN.NETH
end

local function dissect_fixed(tree, src, off, stop, n, title, fields)
    local t = header(tree, src, off, stop, n, title)
    if not t then return nil end
    for _, spec in ipairs(fields) do t:add(spec[1], src(off + spec[2], spec[3])) end
    return off + n
end

-- Everything from the BTH on: src[off, stop) is the UDP payload.
local function dissect_mrc(src, off, stop, ip, ev, pinfo, tree)
    local root = tree:add(mrc, src(off, stop - off))
    root:add(F.ev, ev):set_generated()
    local trimmed = ip ~= nil and (ip.dscp == mrc.prefs.trimmed_dscp
                                   or ip.dscp == mrc.prefs.trimmed_lasthop_dscp)
    if ip ~= nil then
        root:add(F.trimmed, trimmed):set_generated()
        if trimmed then root:add_proto_expert_info(E.trimmed) end
    end
    if stop - off < LEN.BTH then
        root:add_proto_expert_info(E.malformed, "shorter than a BTH")
        return
    end
    dissect_bth(root, src, off)
    local opcode = src(off, 1):uint()
    local ts_flag = bit32.band(src(off + 8, 1):uint(), 0x10) ~= 0
    local info = { opcode_names[opcode] or string.format("opcode 0x%02x", opcode),
                   "QP=" .. src(off + 5, 3):uint(), "PSN=" .. src(off + 9, 3):uint() }
    local icrc_off = trimmed and stop or stop - LEN.ICRC
    if icrc_off < off + LEN.BTH then
        root:add_proto_expert_info(E.malformed, "no room for the ICRC")
        return
    end
    local next_off = off + LEN.BTH
    if opcode >= OP.WRITE_FIRST and opcode <= OP.WRITE_ONLY_IMM then
        next_off = dissect_data_headers(root, src, next_off, icrc_off, opcode, ts_flag, info)
    elseif opcode == OP.ACK then
        next_off = dissect_fixed(root, src, next_off, icrc_off, LEN.AETH, "AETH",
                                 { { F.syndrome, 0, 1 }, { F.aeth_msn, 1, 3 } })
    elseif opcode == OP.EP_REQUEST or opcode == OP.EP_RESPONSE then
        -- An EV-probe response may answer several probes: one more EPH each.
        local eph_fields = { { F.eph_type, 0, 1 }, { F.eph_flags, 1, 1 },
                             { F.eph_seq, 2, 2 }, { F.eph_value, 4, 4 } }
        next_off = dissect_fixed(root, src, next_off, icrc_off, LEN.EPH, "EPH", eph_fields)
        while opcode == OP.EP_RESPONSE and next_off ~= nil
              and next_off + LEN.EPH <= icrc_off do
            next_off = dissect_fixed(root, src, next_off, icrc_off, LEN.EPH, "EPH", eph_fields)
        end
    elseif opcode == OP.SACK then
        next_off = dissect_seth(root, src, next_off, icrc_off, info)
    elseif opcode == OP.NACK then
        next_off = dissect_neth(root, src, next_off, icrc_off, info)
    end
    if trimmed then info[#info + 1] = "[trimmed]" end
    pinfo.cols.protocol = "MRC"
    pinfo.cols.info = table.concat(info, " ")
    if next_off == nil then return end
    if icrc_off > next_off then
        root:add(F.payload, src(next_off, icrc_off - next_off))
    end
    root:add(F.payload_length, icrc_off - next_off):set_generated()
    if trimmed then return end
    local carried = src(icrc_off, LEN.ICRC):le_uint()
    local item = root:add_le(F.icrc, src(icrc_off, LEN.ICRC))
    if ip ~= nil and ip.udp_follows then
        local expected = compute_icrc(src, ip, off - LEN.UDP, icrc_off)
        local valid = (expected == carried)
        item:add(F.icrc_valid, valid):set_generated()
        if not valid then
            item:add(F.icrc_expected, expected):set_generated()
            item:add_proto_expert_info(E.bad_icrc, string.format("Bad ICRC, expected 0x%08x",
                                                                 expected))
        end
    end
end

function mrc.dissector(tvb, pinfo, tree)
    local udp_dport = nil
    for _, fi in ipairs({ f_udp_dstport() }) do
        if fi.value == mrc.prefs.udp_port then udp_dport = fi end
    end
    if udp_dport == nil then return end
    local src = udp_dport.source or tvb
    local udp_off = udp_dport.offset - 2
    if udp_off < 0 or udp_off + LEN.UDP > src:len() then return end
    local udp_len = src(udp_off + 4, 2):uint()
    local stop = math.max(math.min(udp_off + udp_len, src:len()), udp_off + LEN.UDP)
    if stop > udp_off + LEN.UDP and src(udp_off + LEN.UDP, 1):uint() < MRC_OPCODE_MIN then
        return  -- a standard RoCEv2 packet: the InfiniBand dissector's
    end
    local ip = enclosing_ip(src, udp_off)
    local ev = src(udp_off, 2):uint() * 65536 + (ip ~= nil and ip.flow_label or 0)
    dissect_mrc(src, udp_off + LEN.UDP, stop, ip, ev, pinfo, tree)
end

register_postdissector(mrc, true)

--[[
SRv6 uSID carriers (wire/srv6.py): an IPv6 header whose next header is IPv6 (41) or IPv4 (4)
has its path in its destination: a 32-bit block, then 16-bit uSIDs, active first, up to
End-of-Carrier (0). Wireshark decodes both IP headers itself; this post-dissector adds the
block and the uSID list of the outer one. A uSID after End-of-Carrier is flagged malformed.
]]
local srv6 = Proto("mrc_srv6", "MRC SRv6 uSID carrier")
local S = {
    block = ProtoField.string("mrc_srv6.block", "Block"),
    usid = ProtoField.uint16("mrc_srv6.usid", "uSID", base.HEX),
    active = ProtoField.uint16("mrc_srv6.active", "Active uSID", base.HEX),
    count = ProtoField.uint8("mrc_srv6.count", "uSIDs left"),
}
srv6.fields = { S.block, S.usid, S.active, S.count }
local E_srv6_hole = ProtoExpert.new("mrc_srv6.hole", "uSID after End-of-Carrier",
                                    expert.group.MALFORMED, expert.severity.ERROR)
srv6.experts = { E_srv6_hole }
local f_ipv6_nxt = Field.new("ipv6.nxt")
local f_ipv6_dst = Field.new("ipv6.dst")

function srv6.dissector(tvb, pinfo, tree)
    local nxt = { f_ipv6_nxt() }
    local dst = { f_ipv6_dst() }
    if #nxt == 0 or #dst == 0 then return end
    if nxt[1].value ~= 41 and nxt[1].value ~= 4 then return end
    local src = dst[1].source or tvb
    local off = dst[1].offset
    if off + 16 > src:len() then return end
    local root = tree:add(srv6, src(off, 16))
    local block = string.format("%x:%x::/32", src(off, 2):uint(), src(off + 2, 2):uint())
    root:add(S.block, src(off, 4), block)
    local count, ended = 0, false
    for i = 0, 5 do
        local range = src(off + 4 + 2 * i, 2)
        local usid = range:uint()
        if usid == 0 then
            ended = true
        elseif ended then
            root:add_proto_expert_info(E_srv6_hole)
            return
        else
            if count == 0 then root:add(S.active, range) end
            root:add(S.usid, range)
            count = count + 1
        end
    end
    root:add(S.count, count):set_generated()
end

register_postdissector(srv6, true)
