package openflow

import "net/netip"

// extraFlows cover the fields and actions the reference dumps do not use.
// Their expected text is our renderer's; OVS must decode our bytes to it.
func extraFlows() []Flow {
	p3 := uint32(3)
	var label MatchField
	label.Field = FieldCtLabel
	label.Value = 0x5 // the last of the 16 bytes
	label.HasMask = true
	label.Mask = 0xff
	return []Flow{
		{Table: 21, Priority: 1, Match: Match{DlVlan(5), EthType(EthTypeARP), ARPTpa(pfx("10.0.0.5")), ARPOp(1)},
			Actions: []Action{
				SetField{Field: MatchField{Field: FieldARPOp, Value: 2}},
				Move{Src: FieldRef{Field: FieldARPSha}, Dst: FieldRef{Field: FieldARPTha}},
				Move{Src: FieldRef{Field: FieldARPSpa}, Dst: FieldRef{Field: FieldARPTpa}},
				SetField{Field: ARPSha(mac("fa:16:3e:00:00:01"))},
				SetField{Field: MatchField{Field: FieldARPSpa, Value: 0x0a000005}},
				Move{Src: FieldRef{Field: FieldEthSrc}, Dst: FieldRef{Field: FieldEthDst}},
				SetField{Field: EthSrc(mac("fa:16:3e:00:00:01"))},
				Output{PortInPort}}},
		{Table: 22, Priority: 1, Match: Match{DlVlan(5)}, Actions: []Action{PopVLAN{}, SetTunnel{ID: 0x64}, Output{2}, Output{3}}},
		{Table: 20, Priority: 2, IdleTimeout: 30, HardTimeout: 60, Match: Match{DlVlan(5), EthDst(mac("fa:16:3e:00:00:02"))}, Actions: []Action{PopVLAN{}, SetField{Field: TunID(0x64)}, Output{4}}},
		{Table: 1, Priority: 5, Match: Match{EthType(EthTypeIPv4), IPProto(IPProtoICMP), ICMPType(8), ICMPCode(0), IPv4Dst(pfx("192.168.0.0/16"))}, Actions: []Action{DecTTL{}, Controller{MaxLen: 128}}},
		{Table: 1, Priority: 6, Match: Match{EthType(EthTypeIPv4), IPProto(IPProtoTCP), TCPDst(0x1000, 0xf000), TCPSrc(80, 0xffff), MatchField{Field: FieldIPDSCP, Value: 46}}, Actions: []Action{Output{PortLocal}}},
		{Table: 1, Priority: 7, Match: Match{EthType(EthTypeIPv4), IPProto(IPProtoSCTP), MatchField{Field: FieldSCTPDst, Value: 9}}, Actions: []Action{Output{PortController}}},
		{Table: 1, Priority: 8, Match: Match{EthType(EthTypeIPv6), IPProto(IPProtoICMPv6), ICMP6Type(135), NDTarget(netip.MustParseAddr("2001:db8::1")), NDSll(mac("fa:16:3e:00:00:03"))}, Actions: []Action{Resubmit{InPort: &p3, Table: 9}}},
		{Table: 1, Priority: 9, Match: Match{EthType(EthTypeIPv6), IPProto(IPProtoICMPv6), ICMP6Type(136), NDTll(mac("fa:16:3e:00:00:04")), IPv6Dst(pfx("2001:db8::/32"))}, Actions: []Action{Resubmit{InPort: &p3, Table: 255}}},
		{Table: 1, Priority: 10, Match: Match{PktMark(0x10), RegMasked(3, 0x10, 0xf0), MatchField{Field: FieldMetadata, Value: 0x5, Mask: 0xff, HasMask: true}, label},
			Actions: []Action{Load{Dst: RegRef(6, 0, 16), Value: 7}, Load{Dst: RegRef(7, 4, 4), Value: 1}, OutputReg{Src: RegRef(5, 0, 16)}, Note{Data: []byte{1, 2, 3}}}},
		{Table: 1, Priority: 11, Match: Match{EthType(EthTypeIPv4), IPProto(IPProtoUDP), UDPDst(53, 0xffff)},
			Actions: []Action{CT{Commit: true, Zone: 7, NAT: true, Table: u8(2)}, CT{ZoneSrc: &zoneReg6, Exec: []Action{Load{Dst: FieldRef{Field: FieldCtMark, Ofs: 0, NBits: 1}, Value: 1}, SetField{Field: MatchField{Field: FieldCtLabel, Value: 1}}}, Commit: true}}},
		{Table: 10, Priority: 2, Actions: []Action{Learn{Table: 20, IdleTimeout: 10, Priority: 3, FinIdleTimeout: 2, FinHardTimeout: 4, Specs: []LearnSpec{
			{Kind: LearnMatchValue, Dst: FieldRef{Field: FieldEthType}, Value: EthTypeIPv4},
			{Kind: LearnMatchValue, Dst: RegRef(1, 0, 8), Value: 5},
			{Kind: LearnMatchField, Src: RegRef(2, 0, 32), Dst: RegRef(3, 0, 32)},
			{Kind: LearnLoadValue, Dst: RegRef(4, 8, 8), Value: 0x7f},
		}}}},
		{Table: 3, Priority: 1, Flags: FlagSendFlowRem | FlagCheckOverlap, Match: Match{EthType(EthTypeIPv4), IPv4Src(pfx("10.0.0.0/8")), ConjID(9), CtZone(5)}, Actions: []Action{Drop{}}},
		{Table: 3, Priority: 2, Match: Match{EthType(0x88cc)}, Actions: []Action{}},
		{Table: 4, Priority: 1, Match: Match{EthType(EthTypeARP), ARPSha(mac("fa:16:3e:00:00:05")), ARPTha(mac("00:00:00:00:00:00")), ARPSpa(pfx("10.1.0.0/16"))}, Actions: []Action{Output{1}}},
		{Table: 4, Priority: 2, Match: Match{EthType(EthTypeIPv4), IPProto(IPProtoSCTP), MatchField{Field: FieldSCTPSrc, Value: 0x100, Mask: 0xff00, HasMask: true}}, Actions: []Action{Output{1}}},
		{Table: 4, Priority: 3, Match: Match{EthType(EthTypeIPv6), IPProto(IPProtoICMPv6), ICMP6Type(1), ICMP6Code(4), IPv6Src(pfx("fe80::/10"))}, Actions: []Action{Output{1}}},
		{Table: 4, Priority: 4, Match: Match{EthType(EthTypeIPv6), IPProto(IPProtoTCP), TCPSrc(1024, 0xfc00)}, Actions: []Action{Output{1}}},
		{Table: 3, Priority: 3, Match: Match{EthType(EthTypeIPv4), IPProto(47)}, Actions: []Action{Move{Src: RegRef(0, 0, 16), Dst: FieldRef{Field: FieldVlanTCI, NBits: 12}}}},
		// the reference QoS's minimum-bandwidth mark, as ovs-ofctl (OpenFlow 1.0) installs it:
		// reset_counts and a whole-field REG_LOAD that OVS prints as load:
		{Table: 0, Priority: 200, Flags: FlagResetCounts, Match: Match{InPort(5), Reg(4, 0)},
			Actions: []Action{Load{Dst: FieldRef{Field: FieldPktMark}, Value: 5, RegLoad: true}, Load{Dst: RegRef(4, 0, 1), Value: 1}, ResubmitTable(0)}},
	}
}
