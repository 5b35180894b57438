package openflow

import (
	"encoding/binary"
	"net"
	"net/netip"
)

// Flow is one OpenFlow flow entry as the agent wants it installed.
//
// Two flows are the same entry when Table, Priority and Match are equal
// (that is what OpenFlow itself keys on); Cookie, timeouts and Actions are
// the entry's content.
//
// The small fields come first and rawMatch is a string: 88 bytes, not 96
// (56k flows are kept at 1,000 ports).
type Flow struct {
	Table       uint8
	Priority    uint16
	IdleTimeout uint16
	HardTimeout uint16
	Flags       uint16 // OFPFF_* (FlagResetCounts, ...); the reference firewall sets reset_counts on its base flows
	Cookie      uint64
	Match       Match
	Actions     []Action

	// rawMatch keeps the wire match of a decoded flow that has fields the
	// codec does not model, so that it can still be deleted exactly.
	rawMatch string
}

// Match is the set of fields a flow matches on. The order fields are given in
// does not matter: rendering and encoding put them in canonical order, and a
// field appears at most once.
type Match []MatchField

// FieldID names a match field. The set is what the reference pipelines and
// the OVS firewall use; each has an OXM or NXM header in the codec.
type FieldID uint8

const (
	FieldInPort FieldID = iota + 1
	FieldEthSrc
	FieldEthDst
	FieldEthType
	FieldVlanTCI // value and mask are the 16-bit OpenFlow vlan_tci (OFPVID_PRESENT = 0x1000)
	FieldIPProto
	FieldIPv4Src
	FieldIPv4Dst
	FieldIPv6Src
	FieldIPv6Dst
	FieldTCPSrc
	FieldTCPDst
	FieldUDPSrc
	FieldUDPDst
	FieldSCTPSrc
	FieldSCTPDst
	FieldICMPv4Type
	FieldICMPv4Code
	FieldICMPv6Type
	FieldICMPv6Code
	FieldARPOp
	FieldARPSpa
	FieldARPTpa
	FieldARPSha
	FieldARPTha
	FieldNDTarget
	FieldNDSll
	FieldNDTll
	FieldReg // Reg index in MatchField.Reg (0..15)
	FieldTunID
	FieldCtState
	FieldCtZone
	FieldCtMark
	FieldCtLabel
	FieldConjID
	FieldPktMark
	FieldMetadata
	FieldIPDSCP
)

// MatchField is one field with its value and an optional mask. Values are
// held as the field's natural width in the low bits of Value (integers,
// MACs as 48 bits, IPv4 as 32 bits); the 128-bit fields (IPv6 addresses,
// nd_target, ct_label) keep their high 64 bits in ValueHi/MaskHi (see
// Value128). A zero Mask with HasMask false means an exact match.
//
// 40 bytes, not 72 with [16]byte values: a flow holds five fields on
// average, 220k at 1,000 ports.
type MatchField struct {
	Field   FieldID
	Reg     uint8 // for FieldReg
	HasMask bool
	Value   uint64
	Mask    uint64
	ValueHi uint64 // 128-bit fields only
	MaskHi  uint64
}

// Value128 is a 128-bit field's value as 16 big-endian bytes.
func (m MatchField) Value128() [16]byte { return join128(m.ValueHi, m.Value) }

// Mask128 is a 128-bit field's mask as 16 big-endian bytes.
func (m MatchField) Mask128() [16]byte { return join128(m.MaskHi, m.Mask) }

// SetValue128 sets a 128-bit field's value from 16 big-endian bytes.
func (m *MatchField) SetValue128(b [16]byte) { m.ValueHi, m.Value = split128(b) }

// SetMask128 sets a 128-bit field's mask from 16 big-endian bytes.
func (m *MatchField) SetMask128(b [16]byte) { m.MaskHi, m.Mask = split128(b) }

func join128(hi, lo uint64) [16]byte {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], hi)
	binary.BigEndian.PutUint64(b[8:], lo)
	return b
}

func split128(b [16]byte) (hi, lo uint64) {
	return binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])
}

// Ethernet types the pipelines match on.
const (
	EthTypeIPv4 = 0x0800
	EthTypeARP  = 0x0806
	EthTypeRARP = 0x8035
	EthTypeIPv6 = 0x86dd
	EthTypeVLAN = 0x8100
)

// IP protocols the pipelines match on.
const (
	IPProtoICMP   = 1
	IPProtoTCP    = 6
	IPProtoUDP    = 17
	IPProtoSCTP   = 132
	IPProtoICMPv6 = 58
)

// VLAN TCI bits as OpenFlow 1.3 and NXM use them.
const (
	VlanPresent = 0x1000 // OFPVID_PRESENT
	VlanVIDMask = 0x0fff
)

// Conntrack state bits (NXM_NX_CT_STATE).
const (
	CtNew         = 0x01
	CtEstablished = 0x02
	CtRelated     = 0x04
	CtReply       = 0x08
	CtInvalid     = 0x10
	CtTracked     = 0x20
)

// Constructors for match fields. They exist so that the pure packages read
// like the flows they build: Match{InPort(3), DlVlan(1), EthDst(mac)}.

func InPort(port uint32) MatchField { return MatchField{Field: FieldInPort, Value: uint64(port)} }
func EthType(t uint16) MatchField   { return MatchField{Field: FieldEthType, Value: uint64(t)} }
func IPProto(p uint8) MatchField    { return MatchField{Field: FieldIPProto, Value: uint64(p)} }

func EthSrc(mac net.HardwareAddr) MatchField {
	return MatchField{Field: FieldEthSrc, Value: macBits(mac)}
}
func EthDst(mac net.HardwareAddr) MatchField {
	return MatchField{Field: FieldEthDst, Value: macBits(mac)}
}

// EthDstMasked matches dl_dst=value/mask (used for the unicast/multicast split in br-tun).
func EthDstMasked(mac, mask net.HardwareAddr) MatchField {
	return MatchField{Field: FieldEthDst, Value: macBits(mac), Mask: macBits(mask), HasMask: true}
}

// DlVlan matches frames tagged with vid (ovs-ofctl "dl_vlan=vid").
func DlVlan(vid uint16) MatchField {
	return MatchField{Field: FieldVlanTCI, Value: uint64(VlanPresent | vid&VlanVIDMask), Mask: VlanPresent | VlanVIDMask, HasMask: true}
}

// Untagged matches frames without an 802.1Q header ("vlan_tci=0x0000/0x1fff").
func Untagged() MatchField {
	return MatchField{Field: FieldVlanTCI, Value: 0, Mask: VlanPresent | VlanVIDMask, HasMask: true}
}

// VlanTCI matches vlan_tci=value/mask as given.
func VlanTCI(value, mask uint16) MatchField {
	return MatchField{Field: FieldVlanTCI, Value: uint64(value), Mask: uint64(mask), HasMask: true}
}

func Reg(n uint8, value uint32) MatchField {
	return MatchField{Field: FieldReg, Reg: n, Value: uint64(value)}
}
func RegMasked(n uint8, value, mask uint32) MatchField {
	return MatchField{Field: FieldReg, Reg: n, Value: uint64(value), Mask: uint64(mask), HasMask: true}
}

func TunID(id uint64) MatchField   { return MatchField{Field: FieldTunID, Value: id} }
func CtZone(z uint16) MatchField   { return MatchField{Field: FieldCtZone, Value: uint64(z)} }
func ConjID(id uint32) MatchField  { return MatchField{Field: FieldConjID, Value: uint64(id)} }
func PktMark(m uint32) MatchField  { return MatchField{Field: FieldPktMark, Value: uint64(m)} }
func ARPOp(op uint16) MatchField   { return MatchField{Field: FieldARPOp, Value: uint64(op)} }
func ICMPType(t uint8) MatchField  { return MatchField{Field: FieldICMPv4Type, Value: uint64(t)} }
func ICMPCode(c uint8) MatchField  { return MatchField{Field: FieldICMPv4Code, Value: uint64(c)} }
func ICMP6Type(t uint8) MatchField { return MatchField{Field: FieldICMPv6Type, Value: uint64(t)} }
func ICMP6Code(c uint8) MatchField { return MatchField{Field: FieldICMPv6Code, Value: uint64(c)} }

// CtState matches ct_state with the given bits set and the mask bits cleared
// where not in set: CtState(CtTracked|CtEstablished, CtTracked|CtEstablished|CtReply)
// is "+trk+est-rpl".
func CtState(set, mask uint32) MatchField {
	return MatchField{Field: FieldCtState, Value: uint64(set), Mask: uint64(mask), HasMask: true}
}

func CtMark(value, mask uint32) MatchField {
	return MatchField{Field: FieldCtMark, Value: uint64(value), Mask: uint64(mask), HasMask: mask != 0xffffffff}
}

// Port-range matches use value/mask pairs; see pipeline/firewall for the expansion.
func TCPDst(port, mask uint16) MatchField { return portField(FieldTCPDst, port, mask) }
func TCPSrc(port, mask uint16) MatchField { return portField(FieldTCPSrc, port, mask) }
func UDPDst(port, mask uint16) MatchField { return portField(FieldUDPDst, port, mask) }
func UDPSrc(port, mask uint16) MatchField { return portField(FieldUDPSrc, port, mask) }

func portField(f FieldID, port, mask uint16) MatchField {
	return MatchField{Field: f, Value: uint64(port), Mask: uint64(mask), HasMask: mask != 0xffff}
}

// IPv4 matches take a prefix; a /32 is an exact match.
func IPv4Src(p netip.Prefix) MatchField { return ipv4Field(FieldIPv4Src, p) }
func IPv4Dst(p netip.Prefix) MatchField { return ipv4Field(FieldIPv4Dst, p) }
func ARPSpa(p netip.Prefix) MatchField  { return ipv4Field(FieldARPSpa, p) }
func ARPTpa(p netip.Prefix) MatchField  { return ipv4Field(FieldARPTpa, p) }

func ARPSha(mac net.HardwareAddr) MatchField {
	return MatchField{Field: FieldARPSha, Value: macBits(mac)}
}
func ARPTha(mac net.HardwareAddr) MatchField {
	return MatchField{Field: FieldARPTha, Value: macBits(mac)}
}
func NDSll(mac net.HardwareAddr) MatchField {
	return MatchField{Field: FieldNDSll, Value: macBits(mac)}
}
func NDTll(mac net.HardwareAddr) MatchField {
	return MatchField{Field: FieldNDTll, Value: macBits(mac)}
}

func ipv4Field(f FieldID, p netip.Prefix) MatchField {
	a := p.Addr().As4()
	v := uint64(a[0])<<24 | uint64(a[1])<<16 | uint64(a[2])<<8 | uint64(a[3])
	bits := p.Bits()
	if bits < 0 || bits >= 32 {
		return MatchField{Field: f, Value: v}
	}
	mask := uint64(0xffffffff) << (32 - bits) & 0xffffffff
	return MatchField{Field: f, Value: v & mask, Mask: mask, HasMask: true}
}

// IPv6 matches take a prefix; a /128 is an exact match.
func IPv6Src(p netip.Prefix) MatchField { return ipv6Field(FieldIPv6Src, p) }
func IPv6Dst(p netip.Prefix) MatchField { return ipv6Field(FieldIPv6Dst, p) }
func NDTarget(a netip.Addr) MatchField  { return ipv6Field(FieldNDTarget, netip.PrefixFrom(a, 128)) }

func ipv6Field(f FieldID, p netip.Prefix) MatchField {
	m := MatchField{Field: f}
	v := p.Addr().As16()
	bits := p.Bits()
	if bits < 0 || bits >= 128 {
		m.SetValue128(v)
		return m
	}
	var mask [16]byte
	for i := 0; i < 16; i++ {
		switch {
		case bits >= 8:
			mask[i] = 0xff
			bits -= 8
		case bits > 0:
			mask[i] = byte(0xff << (8 - bits))
			bits = 0
		}
		v[i] &= mask[i]
	}
	m.SetValue128(v)
	m.SetMask128(mask)
	m.HasMask = true
	return m
}

func macBits(mac net.HardwareAddr) uint64 {
	var v uint64
	for _, b := range mac {
		v = v<<8 | uint64(b)
	}
	return v
}

// Action is one action or instruction of a flow. Concrete types below; the
// codec encodes each and the renderer prints it as ovs-ofctl does.
type Action interface{ isAction() }

// Special output ports.
const (
	PortInPort     = 0xfffffff8
	PortNormal     = 0xfffffffa
	PortLocal      = 0xfffffffe
	PortController = 0xfffffffd
)

// Output sends the packet to a port (or NORMAL / IN_PORT / LOCAL).
type Output struct{ Port uint32 }

// OutputReg outputs to the port held in a register field (output:NXM_NX_REG5[]).
type OutputReg struct{ Src FieldRef }

// GotoTable is the OpenFlow 1.3 goto_table instruction; it must be last.
type GotoTable struct{ Table uint8 }

// Resubmit is the Nicira resubmit(,table) (InPort nil) or resubmit(port,table).
type Resubmit struct {
	InPort *uint32
	Table  uint8
}

// PushVLAN pushes an 802.1Q header (push_vlan:0x8100).
type PushVLAN struct{ EtherType uint16 }

// PopVLAN strips the outer VLAN header.
type PopVLAN struct{}

// SetField writes a value into a field (set_field:V->field). For vlan_vid the
// value includes VlanPresent as OpenFlow 1.3 requires (4098 = VLAN 2).
type SetField struct {
	Field MatchField // Field/Reg/Value/ValueHi used; masks ignored
}

// Load writes Value into bits [Ofs, Ofs+NBits) of Dst (NXAST_REG_LOAD; OVS
// prints it as set_field when it covers the whole field).
type Load struct {
	Dst   FieldRef
	Value uint64
	// RegLoad keeps a whole-field load an NXAST_REG_LOAD, as ovs-ofctl sends
	// `set_field` of an NXM-only field in OpenFlow 1.0 (the reference's ovs_lib
	// add_flow): OVS then prints it as load:V->NXM_...[] and not as set_field.
	// Decoded whole-field REG_LOADs have it set.
	RegLoad bool
}

// Move copies Src into Dst (move:NXM_OF_ETH_SRC[]->NXM_OF_ETH_DST[]).
type Move struct{ Src, Dst FieldRef }

// FieldRef is a bit range of a field: NXM_NX_REG6[0..15].
// NBits zero means the whole field.
type FieldRef struct {
	Field FieldID
	Reg   uint8
	Ofs   uint16
	NBits uint16
}

// CT sends the packet through conntrack (ct(commit,zone=...,table=...,exec(...))).
type CT struct {
	Commit  bool
	Table   *uint8    // recirculate to this table; nil = no recirculation
	Zone    uint16    // immediate zone when ZoneSrc is nil
	ZoneSrc *FieldRef // zone=NXM_NX_REG6[0..15]
	Exec    []Action  // only SetField/Load on ct_mark / ct_label
	NAT     bool
}

// CtClear clears conntrack state from the packet.
type CtClear struct{}

// Conjunction is one clause of a conjunctive match: conjunction(ID, Clause/NClauses), Clause 1-based.
type Conjunction struct {
	ID       uint32
	Clause   uint8
	NClauses uint8
}

// Learn installs a flow from the packet (br-tun table 10, the ARP responder).
type Learn struct {
	Table          uint8
	Priority       uint16
	Cookie         uint64
	IdleTimeout    uint16
	HardTimeout    uint16
	FinHardTimeout uint16
	FinIdleTimeout uint16
	Flags          uint16
	Specs          []LearnSpec
}

// LearnSpec is one spec of a learn action. Kind selects the form:
//
//	LearnMatchField:  Dst[...] = Src[...]           (match on a field copied from the packet)
//	LearnMatchValue:  Dst[...] = Value              (match on an immediate)
//	LearnLoadField:   load:Src[...]->Dst[...]
//	LearnLoadValue:   load:Value->Dst[...]
//	LearnOutput:      output:Src[...]
type LearnSpec struct {
	Kind  LearnSpecKind
	Src   FieldRef
	Dst   FieldRef
	Value uint64
}

type LearnSpecKind uint8

const (
	LearnMatchField LearnSpecKind = iota + 1
	LearnMatchValue
	LearnLoadField
	LearnLoadValue
	LearnOutput
)

// SetTunnel sets the tunnel id (set_field:0x..->tun_id).
type SetTunnel struct{ ID uint64 }

// Note carries opaque bytes; the agent uses it nowhere on the data path.
type Note struct{ Data []byte }

// Drop is explicit "actions=drop" (an empty action list renders the same).
type Drop struct{}

// Controller sends the packet to the controller.
type Controller struct{ MaxLen uint16 }

// DecTTL decrements the IP TTL.
type DecTTL struct{}

// Meter is the OpenFlow 1.3 meter instruction (meter:ID): the packet goes through the
// meter before the actions; the reference's QoS puts it in the rate-limit tables.
type Meter struct{ ID uint32 }

// SetQueue is the OpenFlow 1.3 set_queue action (the queue of the output port's QoS).
type SetQueue struct{ Queue uint32 }

func (Output) isAction()      {}
func (OutputReg) isAction()   {}
func (GotoTable) isAction()   {}
func (Resubmit) isAction()    {}
func (PushVLAN) isAction()    {}
func (PopVLAN) isAction()     {}
func (SetField) isAction()    {}
func (Load) isAction()        {}
func (Move) isAction()        {}
func (CT) isAction()          {}
func (CtClear) isAction()     {}
func (Conjunction) isAction() {}
func (Learn) isAction()       {}
func (SetTunnel) isAction()   {}
func (Note) isAction()        {}
func (Drop) isAction()        {}
func (Controller) isAction()  {}
func (DecTTL) isAction()      {}
func (Meter) isAction()       {}
func (SetQueue) isAction()    {}

// SetVLANVID is the action the reference renders as set_field:(4096+vid)->vlan_vid.
func SetVLANVID(vid uint16) SetField {
	return SetField{Field: MatchField{Field: FieldVlanTCI, Value: uint64(VlanPresent | vid&VlanVIDMask)}}
}

// SetReg loads value into a whole register (rendered set_field:0x3->reg5).
func SetReg(n uint8, value uint32) SetField {
	return SetField{Field: MatchField{Field: FieldReg, Reg: n, Value: uint64(value)}}
}

// ResubmitTable is resubmit(,t).
func ResubmitTable(t uint8) Resubmit { return Resubmit{Table: t} }

// RegRef is NXM_NX_REGn[ofs..ofs+nbits-1].
func RegRef(n uint8, ofs, nbits uint16) FieldRef {
	return FieldRef{Field: FieldReg, Reg: n, Ofs: ofs, NBits: nbits}
}
