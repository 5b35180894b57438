package openflow

import "fmt"

// fieldFormat says how OVS prints a field's value.
type fieldFormat uint8

const (
	fmtHex fieldFormat = iota
	fmtDec
	fmtMAC
	fmtIPv4
	fmtIPv6
	fmtPort
	fmtCtState
)

// OXM classes.
const (
	classNXM0  = 0x0000 // NXM_OF_*
	classNXM1  = 0x0001 // NXM_NX_*
	classOXM   = 0x8000 // OpenFlow basic
	classExper = 0xffff
)

// fieldInfo is what the codec and the renderer need to know about a field.
// The names are OVS's: name is the meta-flow name used by set_field, nxm the
// name mf_format_subfield prints (NXM when the field has one, else OXM).
type fieldInfo struct {
	name   string
	nxm    string
	class  uint16
	field  uint8
	bytes  int // width on the wire
	nbits  int // width in bits (subfield "[]")
	format fieldFormat
}

var fieldTable = map[FieldID]fieldInfo{
	FieldInPort:     {"in_port", "OXM_OF_IN_PORT", classOXM, 0, 4, 32, fmtPort},
	FieldEthDst:     {"eth_dst", "NXM_OF_ETH_DST", classOXM, 3, 6, 48, fmtMAC},
	FieldEthSrc:     {"eth_src", "NXM_OF_ETH_SRC", classOXM, 4, 6, 48, fmtMAC},
	FieldEthType:    {"eth_type", "NXM_OF_ETH_TYPE", classOXM, 5, 2, 16, fmtHex},
	FieldVlanTCI:    {"vlan_tci", "NXM_OF_VLAN_TCI", classNXM0, 4, 2, 16, fmtHex},
	FieldIPDSCP:     {"ip_dscp", "OXM_OF_IP_DSCP", classOXM, 8, 1, 6, fmtDec},
	FieldIPProto:    {"nw_proto", "NXM_OF_IP_PROTO", classOXM, 10, 1, 8, fmtDec},
	FieldIPv4Src:    {"ip_src", "NXM_OF_IP_SRC", classOXM, 11, 4, 32, fmtIPv4},
	FieldIPv4Dst:    {"ip_dst", "NXM_OF_IP_DST", classOXM, 12, 4, 32, fmtIPv4},
	FieldTCPSrc:     {"tcp_src", "NXM_OF_TCP_SRC", classOXM, 13, 2, 16, fmtDec},
	FieldTCPDst:     {"tcp_dst", "NXM_OF_TCP_DST", classOXM, 14, 2, 16, fmtDec},
	FieldUDPSrc:     {"udp_src", "NXM_OF_UDP_SRC", classOXM, 15, 2, 16, fmtDec},
	FieldUDPDst:     {"udp_dst", "NXM_OF_UDP_DST", classOXM, 16, 2, 16, fmtDec},
	FieldSCTPSrc:    {"sctp_src", "OXM_OF_SCTP_SRC", classOXM, 17, 2, 16, fmtDec},
	FieldSCTPDst:    {"sctp_dst", "OXM_OF_SCTP_DST", classOXM, 18, 2, 16, fmtDec},
	FieldICMPv4Type: {"icmp_type", "NXM_OF_ICMP_TYPE", classOXM, 19, 1, 8, fmtDec},
	FieldICMPv4Code: {"icmp_code", "NXM_OF_ICMP_CODE", classOXM, 20, 1, 8, fmtDec},
	FieldARPOp:      {"arp_op", "NXM_OF_ARP_OP", classOXM, 21, 2, 16, fmtDec},
	FieldARPSpa:     {"arp_spa", "NXM_OF_ARP_SPA", classOXM, 22, 4, 32, fmtIPv4},
	FieldARPTpa:     {"arp_tpa", "NXM_OF_ARP_TPA", classOXM, 23, 4, 32, fmtIPv4},
	FieldARPSha:     {"arp_sha", "NXM_NX_ARP_SHA", classOXM, 24, 6, 48, fmtMAC},
	FieldARPTha:     {"arp_tha", "NXM_NX_ARP_THA", classOXM, 25, 6, 48, fmtMAC},
	FieldIPv6Src:    {"ipv6_src", "NXM_NX_IPV6_SRC", classOXM, 26, 16, 128, fmtIPv6},
	FieldIPv6Dst:    {"ipv6_dst", "NXM_NX_IPV6_DST", classOXM, 27, 16, 128, fmtIPv6},
	FieldICMPv6Type: {"icmpv6_type", "NXM_NX_ICMPV6_TYPE", classOXM, 29, 1, 8, fmtDec},
	FieldICMPv6Code: {"icmpv6_code", "NXM_NX_ICMPV6_CODE", classOXM, 30, 1, 8, fmtDec},
	FieldNDTarget:   {"nd_target", "NXM_NX_ND_TARGET", classOXM, 31, 16, 128, fmtIPv6},
	FieldNDSll:      {"nd_sll", "NXM_NX_ND_SLL", classOXM, 32, 6, 48, fmtMAC},
	FieldNDTll:      {"nd_tll", "NXM_NX_ND_TLL", classOXM, 33, 6, 48, fmtMAC},
	FieldTunID:      {"tun_id", "NXM_NX_TUN_ID", classOXM, 38, 8, 64, fmtHex},
	FieldMetadata:   {"metadata", "OXM_OF_METADATA", classOXM, 2, 8, 64, fmtHex},
	FieldPktMark:    {"pkt_mark", "NXM_NX_PKT_MARK", classNXM1, 33, 4, 32, fmtHex},
	FieldConjID:     {"conj_id", "NXM_NX_CONJ_ID", classNXM1, 37, 4, 32, fmtDec},
	FieldCtState:    {"ct_state", "NXM_NX_CT_STATE", classNXM1, 105, 4, 32, fmtCtState},
	FieldCtZone:     {"ct_zone", "NXM_NX_CT_ZONE", classNXM1, 106, 2, 16, fmtHex},
	FieldCtMark:     {"ct_mark", "NXM_NX_CT_MARK", classNXM1, 107, 4, 32, fmtHex},
	FieldCtLabel:    {"ct_label", "NXM_NX_CT_LABEL", classNXM1, 108, 16, 128, fmtHex},
}

// vlanVIDInfo is OXM_OF_VLAN_VID, which set_field and OF1.3 matches use
// for FieldVlanTCI when the mask covers only CFI+VID.
var vlanVIDInfo = fieldInfo{"vlan_vid", "OXM_OF_VLAN_VID", classOXM, 6, 2, 13, fmtDec}

var regInfo = func() (r [16]fieldInfo) {
	for i := range r {
		r[i] = fieldInfo{fmt.Sprintf("reg%d", i), fmt.Sprintf("NXM_NX_REG%d", i), classNXM1, uint8(i), 4, 32, fmtHex}
	}
	return r
}()

// info returns the metadata of a field; regs are synthesised.
func info(f FieldID, reg uint8) (fieldInfo, bool) {
	if f == FieldReg {
		if reg > 15 {
			return fieldInfo{}, false
		}
		return regInfo[reg], true
	}
	fi, ok := fieldTable[f]
	return fi, ok
}

// nxmHeader is a 32-bit OXM/NXM header (class:16, field:7, hasmask:1, length:8).
func nxmHeader(class uint16, field uint8, hasMask bool, length int) uint32 {
	h := uint32(class)<<16 | uint32(field)<<9 | uint32(length)
	if hasMask {
		h |= 1 << 8
	}
	return h
}

// headerOf is the header used in actions (set_field, reg_load, reg_move,
// learn) for a field; NXM-class headers where the field has one, because
// OVS accepts both and prints the same.
func headerOf(f FieldID, reg uint8) (uint32, fieldInfo, bool) {
	fi, ok := info(f, reg)
	if !ok {
		return 0, fi, false
	}
	return nxmHeader(fi.class, fi.field, false, fi.bytes), fi, true
}

type fieldKey struct {
	id  FieldID
	reg uint8
}

// byHeader indexes (class<<8 | field) -> field, for both the NXM and the OXM
// spelling of each field.
var byHeader = func() map[uint32]fieldKey {
	m := map[uint32]fieldKey{}
	for id, fi := range fieldTable {
		m[uint32(fi.class)<<8|uint32(fi.field)] = fieldKey{id: id}
	}
	for r := uint8(0); r < 16; r++ {
		m[uint32(classNXM1)<<8|uint32(r)] = fieldKey{id: FieldReg, reg: r}
	}
	nxm0 := map[uint8]FieldID{1: FieldEthDst, 2: FieldEthSrc, 3: FieldEthType, 4: FieldVlanTCI, 6: FieldIPProto,
		7: FieldIPv4Src, 8: FieldIPv4Dst, 9: FieldTCPSrc, 10: FieldTCPDst, 11: FieldUDPSrc, 12: FieldUDPDst,
		13: FieldICMPv4Type, 14: FieldICMPv4Code, 15: FieldARPOp, 16: FieldARPSpa, 17: FieldARPTpa}
	for f, id := range nxm0 {
		m[uint32(classNXM0)<<8|uint32(f)] = fieldKey{id: id}
	}
	nxm1 := map[uint8]FieldID{16: FieldTunID, 17: FieldARPSha, 18: FieldARPTha, 19: FieldIPv6Src, 20: FieldIPv6Dst,
		21: FieldICMPv6Type, 22: FieldICMPv6Code, 23: FieldNDTarget, 24: FieldNDSll, 25: FieldNDTll}
	for f, id := range nxm1 {
		m[uint32(classNXM1)<<8|uint32(f)] = fieldKey{id: id}
	}
	return m
}()

// fieldByHeader maps a received (class, field) back to our FieldID. Both NXM
// and OXM spellings are accepted.
func fieldByHeader(class uint16, field uint8) (FieldID, uint8, bool) {
	k, ok := byHeader[uint32(class)<<8|uint32(field)]
	return k.id, k.reg, ok
}
