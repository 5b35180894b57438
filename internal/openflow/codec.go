package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// OpenFlow 1.3 message types.
const (
	Version13 = 0x04

	TypeHello           = 0
	TypeError           = 1
	TypeEchoRequest     = 2
	TypeEchoReply       = 3
	TypeExperimenter    = 4
	TypeFeaturesRequest = 5
	TypeFeaturesReply   = 6
	TypeFlowMod         = 14
	TypeMultipartReq    = 18
	TypeMultipartReply  = 19
	TypeBarrierRequest  = 20
	TypeBarrierReply    = 21
)

// ONF bundle extension for OpenFlow 1.3 (experimenter messages).
const (
	onfExperimenter   = 0x4f4e4600
	onfBundleControl  = 2300
	onfBundleAdd      = 2301
	bundleOpenReq     = 0
	bundleOpenReply   = 1
	bundleCloseReq    = 2
	bundleCommitReq   = 4
	bundleCommitReply = 5
	bundleDiscardReq  = 6
	bundleFlagAtomic  = 1
	bundleFlagOrdered = 2
)

const (
	nxVendor    = 0x00002320
	mpFlow      = 1
	mpReplyMore = 1
	ofppAny     = 0xffffffff
	ofpgAny     = 0xffffffff
	noBuffer    = 0xffffffff
	// TableAll selects every table in deletes and dumps.
	TableAll = 0xff
)

// Command is a flow_mod command.
type Command uint8

const (
	CmdAdd          Command = 0
	CmdModify       Command = 1
	CmdModifyStrict Command = 2
	CmdDelete       Command = 3
	CmdDeleteStrict Command = 4
)

func (c Command) String() string {
	switch c {
	case CmdAdd:
		return "add"
	case CmdModify:
		return "modify"
	case CmdModifyStrict:
		return "modify_strict"
	case CmdDelete:
		return "delete"
	case CmdDeleteStrict:
		return "delete_strict"
	}
	return fmt.Sprintf("command(%d)", uint8(c))
}

// FlowMod is one change to a flow table. For CmdDelete/CmdModify (non
// strict) CookieMask selects flows by Flow.Cookie; Flow.Table may be TableAll.
type FlowMod struct {
	Command    Command
	Flow       Flow
	CookieMask uint64
}

// header writes an OpenFlow header; length is patched by finish.
func appendHeader(b []byte, typ uint8, xid uint32) []byte {
	return append(b, Version13, typ, 0, 0, byte(xid>>24), byte(xid>>16), byte(xid>>8), byte(xid))
}

func finish(b []byte, start int) []byte {
	binary.BigEndian.PutUint16(b[start+2:], uint16(len(b)-start))
	return b
}

func be16(b []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(b, v) }
func be32(b []byte, v uint32) []byte { return binary.BigEndian.AppendUint32(b, v) }
func be64(b []byte, v uint64) []byte { return binary.BigEndian.AppendUint64(b, v) }
func pad(b []byte, n int) []byte {
	for i := 0; i < n; i++ {
		b = append(b, 0)
	}
	return b
}
func pad8(b []byte, start int) []byte { return pad(b, (8-(len(b)-start)%8)%8) }

// AppendHello appends a hello that offers OpenFlow 1.3 only.
func AppendHello(b []byte, xid uint32) []byte {
	s := len(b)
	b = appendHeader(b, TypeHello, xid)
	b = be16(b, 1) // OFPHET_VERSIONBITMAP
	b = be16(b, 8)
	b = be32(b, 1<<Version13)
	return finish(b, s)
}

// AppendSimple appends a header-only message (features/barrier request, echo).
func AppendSimple(b []byte, typ uint8, xid uint32, body []byte) []byte {
	s := len(b)
	b = appendHeader(b, typ, xid)
	b = append(b, body...)
	return finish(b, s)
}

// AppendFlowMod appends an OFPT_FLOW_MOD.
func AppendFlowMod(b []byte, xid uint32, fm *FlowMod) ([]byte, error) {
	s := len(b)
	f := &fm.Flow
	b = appendHeader(b, TypeFlowMod, xid)
	b = be64(b, f.Cookie)
	b = be64(b, fm.CookieMask)
	b = append(b, f.Table, uint8(fm.Command))
	b = be16(b, f.IdleTimeout)
	b = be16(b, f.HardTimeout)
	b = be16(b, f.Priority)
	b = be32(b, noBuffer)
	b = be32(b, ofppAny)
	b = be32(b, ofpgAny)
	b = be16(b, f.Flags)
	b = pad(b, 2)
	var err error
	if f.rawMatch != "" {
		b = append(b, f.rawMatch...)
	} else if b, err = appendMatch(b, f.Match); err != nil {
		return nil, err
	}
	if fm.Command != CmdDelete && fm.Command != CmdDeleteStrict {
		if b, err = appendInstructions(b, f.Actions); err != nil {
			return nil, err
		}
	}
	if len(b)-s > 0xffff {
		return nil, errors.New("flow_mod longer than 65535 bytes")
	}
	return finish(b, s), nil
}

// AppendFlowStatsRequest appends an OFPMP_FLOW request.
func AppendFlowStatsRequest(b []byte, xid uint32, table uint8, cookie, cookieMask uint64) []byte {
	s := len(b)
	b = appendHeader(b, TypeMultipartReq, xid)
	b = be16(b, mpFlow)
	b = be16(b, 0)
	b = pad(b, 4)
	b = append(b, table, 0, 0, 0)
	b = be32(b, ofppAny)
	b = be32(b, ofpgAny)
	b = pad(b, 4)
	b = be64(b, cookie)
	b = be64(b, cookieMask)
	b, _ = appendMatch(b, nil)
	return finish(b, s)
}

// AppendBundleControl appends an ONF BUNDLE_CONTROL message.
func AppendBundleControl(b []byte, xid, bundleID uint32, typ, flags uint16) []byte {
	s := len(b)
	b = appendHeader(b, TypeExperimenter, xid)
	b = be32(b, onfExperimenter)
	b = be32(b, onfBundleControl)
	b = be32(b, bundleID)
	b = be16(b, typ)
	b = be16(b, flags)
	return finish(b, s)
}

// AppendBundleAddFlowMod appends an ONF BUNDLE_ADD_MESSAGE carrying a
// flow_mod whose xid equals the bundle_add's (OVS requires it).
func AppendBundleAddFlowMod(b []byte, xid, bundleID uint32, flags uint16, fm *FlowMod) ([]byte, error) {
	s := len(b)
	b = appendHeader(b, TypeExperimenter, xid)
	b = be32(b, onfExperimenter)
	b = be32(b, onfBundleAdd)
	b = be32(b, bundleID)
	b = pad(b, 2)
	b = be16(b, flags)
	var err error
	if b, err = AppendFlowMod(b, xid, fm); err != nil {
		return nil, err
	}
	if len(b)-s > 0xffff {
		return nil, errors.New("bundle_add longer than 65535 bytes")
	}
	return finish(b, s), nil
}

// appendMatch appends an OXM ofp_match, padded to 8 bytes.
func appendMatch(b []byte, m Match) ([]byte, error) {
	s := len(b)
	b = be16(b, 1) // OFPMT_OXM
	b = be16(b, 0)
	var err error
	if b, err = appendOXMs(b, m); err != nil {
		return nil, err
	}
	binary.BigEndian.PutUint16(b[s+2:], uint16(len(b)-s))
	return pad8(b, s), nil
}

// canonical order: prerequisites (eth_type, ip_proto, icmp type) before the
// fields that need them, as OVS checks them while parsing.
var oxmOrder = []FieldID{
	FieldInPort, FieldMetadata, FieldTunID, FieldPktMark, FieldConjID, FieldCtState, FieldCtZone, FieldCtMark, FieldCtLabel,
	FieldReg, FieldEthDst, FieldEthSrc, FieldEthType, FieldVlanTCI, FieldIPDSCP, FieldIPProto,
	FieldIPv4Src, FieldIPv4Dst, FieldIPv6Src, FieldIPv6Dst, FieldARPOp, FieldARPSpa, FieldARPTpa, FieldARPSha, FieldARPTha,
	FieldTCPSrc, FieldTCPDst, FieldUDPSrc, FieldUDPDst, FieldSCTPSrc, FieldSCTPDst,
	FieldICMPv4Type, FieldICMPv4Code, FieldICMPv6Type, FieldICMPv6Code, FieldNDTarget, FieldNDSll, FieldNDTll,
}

func appendOXMs(b []byte, m Match) ([]byte, error) {
	for _, id := range oxmOrder {
		for i := range m {
			mf := &m[i]
			if mf.Field != id {
				continue
			}
			var err error
			if b, err = appendOXM(b, mf); err != nil {
				return nil, err
			}
		}
	}
	if len(m) > 0 {
		for i := range m {
			if _, ok := info(m[i].Field, m[i].Reg); !ok {
				return nil, fmt.Errorf("match field %d not supported", m[i].Field)
			}
		}
	}
	return b, nil
}

func appendOXM(b []byte, mf *MatchField) ([]byte, error) {
	fi, ok := info(mf.Field, mf.Reg)
	if !ok {
		return nil, fmt.Errorf("match field %d not supported", mf.Field)
	}
	value, mask, hasMask := mf.Value, mf.Mask, mf.HasMask
	if mf.Field == FieldVlanTCI {
		m := uint64(0xffff)
		if hasMask {
			m = mask
		}
		if m&^0x1fff == 0 {
			// OXM_OF_VLAN_VID covers CFI+VID; OVS answers in it too.
			fi = vlanVIDInfo
			value &= 0x1fff
			mask = m
			hasMask = m != 0x1fff
		}
	}
	if hasMask && fi.bytes < 16 {
		full := uint64(1)<<(8*fi.bytes) - 1
		if fi.bytes == 8 {
			full = ^uint64(0)
		}
		if mask&full == full {
			hasMask = false
		}
	}
	if hasMask && fi.bytes == 16 && mf.Mask == ^uint64(0) && mf.MaskHi == ^uint64(0) {
		hasMask = false
	}
	n := fi.bytes
	if hasMask {
		n *= 2
	}
	b = be32(b, nxmHeader(fi.class, fi.field, hasMask, n))
	if fi.bytes == 16 {
		hi, lo := mf.ValueHi, mf.Value
		if hasMask {
			hi, lo = hi&mf.MaskHi, lo&mf.Mask
		}
		b = binary.BigEndian.AppendUint64(b, hi)
		b = binary.BigEndian.AppendUint64(b, lo)
		if hasMask {
			b = binary.BigEndian.AppendUint64(b, mf.MaskHi)
			b = binary.BigEndian.AppendUint64(b, mf.Mask)
		}
		return b, nil
	}
	if hasMask {
		value &= mask
	}
	b = appendUint(b, value, fi.bytes)
	if hasMask {
		b = appendUint(b, mask, fi.bytes)
	}
	return b, nil
}

func appendUint(b []byte, v uint64, n int) []byte {
	for i := n - 1; i >= 0; i-- {
		b = append(b, byte(v>>(8*i)))
	}
	return b
}

func readUint(p []byte) uint64 {
	var v uint64
	for _, x := range p {
		v = v<<8 | uint64(x)
	}
	return v
}
