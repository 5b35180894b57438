package openflow

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Flow-mod flags (OFPFF_*), printed by dump-flows before the match.
const (
	FlagSendFlowRem  = 1 << 0
	FlagCheckOverlap = 1 << 1
	FlagResetCounts  = 1 << 2
	FlagNoPktCounts  = 1 << 3
	FlagNoBytCounts  = 1 << 4
)

// String renders the flow exactly as `ovs-ofctl -O OpenFlow13 dump-flows
// --no-stats` prints it, leading space included.
func (f Flow) String() string {
	var b strings.Builder
	b.Grow(160)
	b.WriteByte(' ')
	if f.Cookie != 0 {
		b.WriteString("cookie=0x")
		b.WriteString(strconv.FormatUint(f.Cookie, 16))
		b.WriteString(", ")
	}
	if f.Table != 0 {
		b.WriteString("table=")
		b.WriteString(strconv.Itoa(int(f.Table)))
		b.WriteString(", ")
	}
	if f.IdleTimeout != 0 {
		fmt.Fprintf(&b, "idle_timeout=%d, ", f.IdleTimeout)
	}
	if f.HardTimeout != 0 {
		fmt.Fprintf(&b, "hard_timeout=%d, ", f.HardTimeout)
	}
	writeFlags(&b, f.Flags)
	m := f.Match.format(int(f.Priority))
	if m != "" {
		b.WriteString(m)
		b.WriteByte(' ')
	}
	b.WriteString("actions=")
	b.WriteString(FormatActions(f.Actions))
	return b.String()
}

func writeFlags(b *strings.Builder, fl uint16) {
	if fl&FlagSendFlowRem != 0 {
		b.WriteString("send_flow_rem ")
	}
	if fl&FlagCheckOverlap != 0 {
		b.WriteString("check_overlap ")
	}
	if fl&FlagResetCounts != 0 {
		b.WriteString("reset_counts ")
	}
	if fl&FlagNoPktCounts != 0 {
		b.WriteString("no_packet_counts ")
	}
	if fl&FlagNoBytCounts != 0 {
		b.WriteString("no_byte_counts ")
	}
}

// Key identifies the flow entry in its bridge: table, priority and match,
// the triple OpenFlow itself keys on. Stable across field order.
func (f Flow) Key() string {
	return "table=" + strconv.Itoa(int(f.Table)) + "," + f.Match.format(int(f.Priority)|1<<16)
}

// Key is the canonical text of the match alone (no priority).
func (m Match) Key() string { return m.format(-1) }

// String is the match as ovs-ofctl prints it (without priority).
func (m Match) String() string { return m.format(-1) }

// matchView indexes a Match by field so that it can be printed in OVS order.
type matchView struct {
	f       [FieldIPDSCP + 1]*MatchField
	regs    [16]*MatchField
	unknown []*MatchField
}

// view indexes the match; masked values are reduced to value&mask as OVS
// stores them, so that equal matches print (and key) equally.
func (m Match) view() *matchView {
	v := &matchView{}
	for i := range m {
		mf := &m[i]
		if mf.HasMask {
			c := *mf
			c.Value &= c.Mask
			c.ValueHi &= c.MaskHi
			mf = &c
		}
		if mf.Field == fieldUnknown {
			v.unknown = append(v.unknown, mf)
			continue
		}
		if mf.Field == FieldReg {
			if mf.Reg < 16 {
				v.regs[mf.Reg] = mf
			}
			continue
		}
		if int(mf.Field) < len(v.f) {
			v.f[mf.Field] = mf
		}
	}
	return v
}

func (v *matchView) exact(id FieldID) (uint64, bool) {
	mf := v.f[id]
	if mf == nil || mf.HasMask {
		return 0, false
	}
	return mf.Value, true
}

// format follows lib/match.c match_format. priority < 0 omits it; the
// priority+1<<16 trick in Key always prints it.
func (m Match) format(priority int) string {
	var b strings.Builder
	b.Grow(128)
	if priority >= 0 {
		p := priority & 0xffff
		if priority>>16 != 0 || p != 32768 {
			b.WriteString("priority=")
			b.WriteString(strconv.Itoa(p))
			b.WriteByte(',')
		}
	}
	v := m.view()
	if mf := v.f[FieldPktMark]; mf != nil {
		writeU32Masked(&b, "pkt_mark", mf)
	}
	if mf := v.f[FieldConjID]; mf != nil {
		fmt.Fprintf(&b, "conj_id=%d,", uint32(mf.Value))
	}
	if mf := v.f[FieldCtState]; mf != nil {
		b.WriteString("ct_state=")
		b.WriteString(formatCtState(mf))
		b.WriteByte(',')
	}
	if mf := v.f[FieldCtZone]; mf != nil {
		writeU16Masked(&b, "ct_zone", mf)
	}
	if mf := v.f[FieldCtMark]; mf != nil {
		writeU32Masked(&b, "ct_mark", mf)
	}
	if mf := v.f[FieldCtLabel]; mf != nil {
		b.WriteString("ct_label=")
		v, m := mf.Value128(), mf.Mask128()
		b.WriteString(hexBytes(v[:]))
		if mf.HasMask && !allOnes(m[:]) {
			b.WriteByte('/')
			b.WriteString(hexBytes(m[:]))
		}
		b.WriteByte(',')
	}

	dlType, hasType := v.exact(FieldEthType)
	nwProto, hasProto := v.exact(FieldIPProto)
	skipType, skipProto := false, false
	if hasType {
		skipType = true
		switch dlType {
		case EthTypeIPv4:
			name := "ip"
			if hasProto {
				skipProto = true
				switch nwProto {
				case IPProtoICMP:
					name = "icmp"
				case IPProtoTCP:
					name = "tcp"
				case IPProtoUDP:
					name = "udp"
				case IPProtoSCTP:
					name = "sctp"
				default:
					skipProto = false
				}
			}
			b.WriteString(name)
			b.WriteByte(',')
		case EthTypeIPv6:
			name := "ipv6"
			if hasProto {
				skipProto = true
				switch nwProto {
				case IPProtoICMPv6:
					name = "icmp6"
				case IPProtoTCP:
					name = "tcp6"
				case IPProtoUDP:
					name = "udp6"
				case IPProtoSCTP:
					name = "sctp6"
				default:
					skipProto = false
				}
			}
			b.WriteString(name)
			b.WriteByte(',')
		case EthTypeARP:
			b.WriteString("arp,")
		case 0x8035:
			b.WriteString("rarp,")
		case 0x8847:
			b.WriteString("mpls,")
		case 0x8848:
			b.WriteString("mplsm,")
		default:
			skipType = false
		}
	}
	for i := range v.regs {
		if mf := v.regs[i]; mf != nil {
			writeU32Masked(&b, "reg"+strconv.Itoa(i), mf)
		}
	}
	if mf := v.f[FieldTunID]; mf != nil {
		writeU64Masked(&b, "tun_id", mf)
	}
	if mf := v.f[FieldMetadata]; mf != nil {
		writeU64Masked(&b, "metadata", mf)
	}
	if mf := v.f[FieldInPort]; mf != nil {
		b.WriteString("in_port=")
		b.WriteString(formatPort(uint32(mf.Value)))
		b.WriteByte(',')
	}
	if mf := v.f[FieldVlanTCI]; mf != nil {
		writeVlan(&b, mf)
	}
	if mf := v.f[FieldEthSrc]; mf != nil {
		writeMACMasked(&b, "dl_src", mf)
	}
	if mf := v.f[FieldEthDst]; mf != nil {
		writeMACMasked(&b, "dl_dst", mf)
	}
	if mf := v.f[FieldEthType]; mf != nil && !skipType {
		fmt.Fprintf(&b, "dl_type=0x%04x,", uint16(mf.Value))
	}
	switch {
	case hasType && dlType == EthTypeIPv6:
		writeIPv6Masked(&b, "ipv6_src", v.f[FieldIPv6Src])
		writeIPv6Masked(&b, "ipv6_dst", v.f[FieldIPv6Dst])
	case hasType && (dlType == EthTypeARP || dlType == 0x8035):
		writeIPv4Masked(&b, "arp_spa", v.f[FieldARPSpa])
		writeIPv4Masked(&b, "arp_tpa", v.f[FieldARPTpa])
	default:
		writeIPv4Masked(&b, "nw_src", v.f[FieldIPv4Src])
		writeIPv4Masked(&b, "nw_dst", v.f[FieldIPv4Dst])
	}
	isARP := hasType && (dlType == EthTypeARP || dlType == 0x8035)
	if isARP {
		if mf := v.f[FieldARPOp]; mf != nil {
			fmt.Fprintf(&b, "arp_op=%d,", uint8(mf.Value))
		}
	} else if mf := v.f[FieldIPProto]; mf != nil && !skipProto {
		fmt.Fprintf(&b, "nw_proto=%d,", uint8(mf.Value))
	}
	if isARP {
		if mf := v.f[FieldARPSha]; mf != nil {
			writeMACMasked(&b, "arp_sha", mf)
		}
		if mf := v.f[FieldARPTha]; mf != nil {
			writeMACMasked(&b, "arp_tha", mf)
		}
	}
	if mf := v.f[FieldIPDSCP]; mf != nil {
		fmt.Fprintf(&b, "nw_tos=%d,", (mf.Value&0x3f)<<2)
	}
	switch {
	case hasType && dlType == EthTypeIPv4 && hasProto && nwProto == IPProtoICMP:
		writeBE16Masked(&b, "icmp_type", v.f[FieldICMPv4Type])
		writeBE16Masked(&b, "icmp_code", v.f[FieldICMPv4Code])
	case hasType && dlType == EthTypeIPv6 && hasProto && nwProto == IPProtoICMPv6:
		writeBE16Masked(&b, "icmp_type", v.f[FieldICMPv6Type])
		writeBE16Masked(&b, "icmp_code", v.f[FieldICMPv6Code])
		writeIPv6Masked(&b, "nd_target", v.f[FieldNDTarget])
		if mf := v.f[FieldNDSll]; mf != nil {
			writeMACMasked(&b, "nd_sll", mf)
		}
		if mf := v.f[FieldNDTll]; mf != nil {
			writeMACMasked(&b, "nd_tll", mf)
		}
	default:
		src, dst := v.f[FieldTCPSrc], v.f[FieldTCPDst]
		if nwProto == IPProtoUDP {
			src, dst = v.f[FieldUDPSrc], v.f[FieldUDPDst]
		} else if nwProto == IPProtoSCTP {
			src, dst = v.f[FieldSCTPSrc], v.f[FieldSCTPDst]
		}
		writeBE16Masked(&b, "tp_src", src)
		writeBE16Masked(&b, "tp_dst", dst)
	}
	for _, mf := range v.unknown {
		fmt.Fprintf(&b, "unknown_oxm=0x%08x:%x,", uint32(mf.Value), join128(mf.ValueHi, mf.MaskHi))
	}
	s := b.String()
	return strings.TrimSuffix(s, ",")
}

// hex0 is C's "%#x": 0 prints as "0".
func hex0(v uint64) string {
	if v == 0 {
		return "0"
	}
	return "0x" + strconv.FormatUint(v, 16)
}

func writeU32Masked(b *strings.Builder, name string, mf *MatchField) {
	if mf.HasMask && uint32(mf.Mask) == 0 {
		return
	}
	b.WriteString(name)
	b.WriteByte('=')
	b.WriteString(hex0(uint64(uint32(mf.Value))))
	if mf.HasMask && uint32(mf.Mask) != 0xffffffff {
		b.WriteByte('/')
		b.WriteString(hex0(uint64(uint32(mf.Mask))))
	}
	b.WriteByte(',')
}

func writeU64Masked(b *strings.Builder, name string, mf *MatchField) {
	if mf.HasMask && mf.Mask == 0 {
		return
	}
	b.WriteString(name)
	b.WriteByte('=')
	b.WriteString(hex0(mf.Value))
	if mf.HasMask && mf.Mask != ^uint64(0) {
		b.WriteByte('/')
		b.WriteString(hex0(mf.Mask))
	}
	b.WriteByte(',')
}

func writeU16Masked(b *strings.Builder, name string, mf *MatchField) {
	if mf.HasMask && uint16(mf.Mask) == 0 {
		return
	}
	if !mf.HasMask || uint16(mf.Mask) == 0xffff {
		fmt.Fprintf(b, "%s=%d,", name, uint16(mf.Value))
		return
	}
	fmt.Fprintf(b, "%s=0x%x/0x%x,", name, uint16(mf.Value), uint16(mf.Mask))
}

func writeBE16Masked(b *strings.Builder, name string, mf *MatchField) {
	if mf == nil {
		return
	}
	writeU16Masked(b, name, mf)
}

func writeVlan(b *strings.Builder, mf *MatchField) {
	tci := uint16(mf.Value)
	mask := uint16(0xffff)
	if mf.HasMask {
		mask = uint16(mf.Mask)
	}
	if mask == 0 {
		return
	}
	vidMask := mask & VlanVIDMask
	pcpMask := mask & 0xe000
	cfi := mask & VlanPresent
	if cfi != 0 && tci&VlanPresent != 0 &&
		(vidMask == 0 || vidMask == VlanVIDMask) &&
		(pcpMask == 0 || pcpMask == 0xe000) &&
		(vidMask != 0 || pcpMask != 0) {
		if vidMask != 0 {
			fmt.Fprintf(b, "dl_vlan=%d,", tci&VlanVIDMask)
		}
		if pcpMask != 0 {
			fmt.Fprintf(b, "dl_vlan_pcp=%d,", tci>>13)
		}
		return
	}
	if mask == 0xffff {
		fmt.Fprintf(b, "vlan_tci=0x%04x,", tci)
		return
	}
	fmt.Fprintf(b, "vlan_tci=0x%04x/0x%04x,", tci, mask)
}

func formatMAC(v uint64) string {
	const hexd = "0123456789abcdef"
	var buf [17]byte
	for i := 0; i < 6; i++ {
		x := byte(v >> (8 * (5 - i)))
		buf[i*3] = hexd[x>>4]
		buf[i*3+1] = hexd[x&15]
		if i < 5 {
			buf[i*3+2] = ':'
		}
	}
	return string(buf[:])
}

func writeMACMasked(b *strings.Builder, name string, mf *MatchField) {
	const all = 0xffffffffffff
	if mf.HasMask && mf.Mask&all == 0 {
		return
	}
	b.WriteString(name)
	b.WriteByte('=')
	b.WriteString(formatMAC(mf.Value))
	if mf.HasMask && mf.Mask&all != all {
		b.WriteByte('/')
		b.WriteString(formatMAC(mf.Mask))
	}
	b.WriteByte(',')
}

func formatIPv4(v uint32) string {
	return netip.AddrFrom4([4]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)}).String()
}

func cidrBits32(mask uint32) (int, bool) {
	n := 0
	for n < 32 && mask&(1<<(31-n)) != 0 {
		n++
	}
	if n < 32 && mask<<n != 0 {
		return 0, false
	}
	return n, true
}

func writeIPv4Masked(b *strings.Builder, name string, mf *MatchField) {
	if mf == nil {
		return
	}
	mask := uint32(0xffffffff)
	if mf.HasMask {
		mask = uint32(mf.Mask)
	}
	if mask == 0 {
		return
	}
	b.WriteString(name)
	b.WriteByte('=')
	b.WriteString(formatIPv4(uint32(mf.Value)))
	if mask != 0xffffffff {
		if n, ok := cidrBits32(mask); ok {
			b.WriteByte('/')
			b.WriteString(strconv.Itoa(n))
		} else {
			b.WriteByte('/')
			b.WriteString(formatIPv4(mask))
		}
	}
	b.WriteByte(',')
}

func allOnes(b []byte) bool {
	for _, x := range b {
		if x != 0xff {
			return false
		}
	}
	return true
}

func allZero(b []byte) bool {
	for _, x := range b {
		if x != 0 {
			return false
		}
	}
	return true
}

func formatIPv6(a [16]byte) string { return netip.AddrFrom16(a).String() }

func writeIPv6Masked(b *strings.Builder, name string, mf *MatchField) {
	if mf == nil {
		return
	}
	mask := mf.Mask128()
	if mf.HasMask && allZero(mask[:]) {
		return
	}
	b.WriteString(name)
	b.WriteByte('=')
	b.WriteString(formatIPv6(mf.Value128()))
	if mf.HasMask && !allOnes(mask[:]) {
		n, cidr := 0, true
		for i := 0; i < 128; i++ {
			bit := mask[i/8]&(0x80>>(i%8)) != 0
			if bit {
				if n != i {
					cidr = false
					break
				}
				n++
			}
		}
		b.WriteByte('/')
		if cidr {
			b.WriteString(strconv.Itoa(n))
		} else {
			b.WriteString(formatIPv6(mask))
		}
	}
	b.WriteByte(',')
}

var ctStateNames = [8]string{"new", "est", "rel", "rpl", "inv", "trk", "snat", "dnat"}

func formatCtState(mf *MatchField) string {
	val := uint32(mf.Value)
	mask := uint32(0xff)
	if mf.HasMask {
		mask = uint32(mf.Mask) & 0xff
	}
	if mask == 0xff {
		if val&0xff == 0 {
			return "0"
		}
		var parts []string
		for i := 0; i < 8; i++ {
			if val&(1<<i) != 0 {
				parts = append(parts, ctStateNames[i])
			}
		}
		return strings.Join(parts, "|")
	}
	if mask == 0 {
		return "0/0"
	}
	var b strings.Builder
	for i := 0; i < 8; i++ {
		if mask&(1<<i) == 0 {
			continue
		}
		if val&(1<<i) != 0 {
			b.WriteByte('+')
		} else {
			b.WriteByte('-')
		}
		b.WriteString(ctStateNames[i])
	}
	return b.String()
}

// formatPort prints an OpenFlow 1.1+ port number as ovs-ofctl does.
func formatPort(p uint32) string {
	switch p {
	case PortInPort:
		return "IN_PORT"
	case 0xfffffff9:
		return "TABLE"
	case PortNormal:
		return "NORMAL"
	case 0xfffffffb:
		return "FLOOD"
	case 0xfffffffc:
		return "ALL"
	case PortController:
		return "CONTROLLER"
	case PortLocal:
		return "LOCAL"
	case 0xffffffff:
		return "ANY"
	}
	if p >= 0xffffff00 {
		// OVS maps the other reserved 32-bit numbers onto 16 bits.
		return strconv.FormatUint(uint64(p-0xffff0000), 10)
	}
	return strconv.FormatUint(uint64(p), 10)
}

// hexBytes is OVS's ds_put_hex: leading zero bytes dropped, "0" for zero.
func hexBytes(buf []byte) string {
	var b strings.Builder
	printed := false
	for _, x := range buf {
		if x == 0 && !printed {
			continue
		}
		if !printed {
			b.WriteString("0x")
			b.WriteString(strconv.FormatUint(uint64(x), 16))
			printed = true
			continue
		}
		fmt.Fprintf(&b, "%02x", x)
	}
	if !printed {
		return "0"
	}
	return b.String()
}
