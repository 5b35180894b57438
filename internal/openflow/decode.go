package openflow

import (
	"encoding/binary"
	"errors"
	"fmt"
)

var errShort = errors.New("openflow: truncated message")

// Header is the fixed OpenFlow header.
type Header struct {
	Version uint8
	Type    uint8
	Length  uint16
	Xid     uint32
}

// ParseHeader reads the 8-byte header.
func ParseHeader(p []byte) (Header, error) {
	if len(p) < 8 {
		return Header{}, errShort
	}
	h := Header{Version: p[0], Type: p[1], Length: binary.BigEndian.Uint16(p[2:]), Xid: binary.BigEndian.Uint32(p[4:])}
	if h.Length < 8 {
		return h, fmt.Errorf("openflow: bad length %d", h.Length)
	}
	return h, nil
}

// Error is an OpenFlow error message (OFPT_ERROR), also used for
// experimenter errors (Type 0xffff, ExpType, Experimenter).
type Error struct {
	Type, Code   uint16
	Experimenter uint32
	Xid          uint32
	Data         []byte // the start of the offending request
}

func (e *Error) Error() string {
	if e.Type == 0xffff {
		return fmt.Sprintf("openflow error: experimenter 0x%x type %d", e.Experimenter, e.Code)
	}
	return fmt.Sprintf("openflow error: type %d (%s) code %d", e.Type, errTypeName(e.Type), e.Code)
}

func errTypeName(t uint16) string {
	names := []string{"HELLO_FAILED", "BAD_REQUEST", "BAD_ACTION", "BAD_INSTRUCTION", "BAD_MATCH",
		"FLOW_MOD_FAILED", "GROUP_MOD_FAILED", "PORT_MOD_FAILED", "TABLE_MOD_FAILED", "QUEUE_OP_FAILED",
		"SWITCH_CONFIG_FAILED", "ROLE_REQUEST_FAILED", "METER_MOD_FAILED", "TABLE_FEATURES_FAILED"}
	if int(t) < len(names) {
		return names[t]
	}
	return "?"
}

// DecodeError decodes an OFPT_ERROR message (whole message, header included).
func DecodeError(msg []byte) (*Error, error) {
	h, err := ParseHeader(msg)
	if err != nil {
		return nil, err
	}
	if len(msg) < 12 {
		return nil, errShort
	}
	e := &Error{Type: binary.BigEndian.Uint16(msg[8:]), Code: binary.BigEndian.Uint16(msg[10:]), Xid: h.Xid}
	data := msg[12:]
	if e.Type == 0xffff {
		if len(msg) < 16 {
			return nil, errShort
		}
		e.Experimenter = binary.BigEndian.Uint32(msg[12:])
		data = msg[16:]
	}
	e.Data = append([]byte(nil), data...)
	return e, nil
}

// DecodeFlowStatsReply decodes an OFPMP_FLOW multipart reply (header
// included) into flows; more reports OFPMPF_REPLY_MORE. Unknown match fields
// make the flow's match carry an opaque marker; unknown actions decode as Opaque.
func DecodeFlowStatsReply(msg []byte) (flows []Flow, more bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			flows, more, err = nil, false, fmt.Errorf("openflow: decode flow stats: %v", r)
		}
	}()
	h, err := ParseHeader(msg)
	if err != nil {
		return nil, false, err
	}
	if h.Type != TypeMultipartReply || int(h.Length) != len(msg) || len(msg) < 16 {
		return nil, false, fmt.Errorf("openflow: not a multipart reply")
	}
	if binary.BigEndian.Uint16(msg[8:]) != mpFlow {
		return nil, false, fmt.Errorf("openflow: multipart type %d is not flow", binary.BigEndian.Uint16(msg[8:]))
	}
	more = binary.BigEndian.Uint16(msg[10:])&mpReplyMore != 0
	p := msg[16:]
	for len(p) > 0 {
		if len(p) < 56 {
			return nil, false, errShort
		}
		n := int(binary.BigEndian.Uint16(p))
		if n < 56 || n > len(p) {
			return nil, false, fmt.Errorf("openflow: flow stats entry length %d", n)
		}
		f, err := decodeFlowStats(p[:n])
		if err != nil {
			return nil, false, err
		}
		flows = append(flows, f)
		p = p[n:]
	}
	return flows, more, nil
}

func decodeFlowStats(p []byte) (Flow, error) {
	f := Flow{
		Table:       p[2],
		Priority:    binary.BigEndian.Uint16(p[12:]),
		IdleTimeout: binary.BigEndian.Uint16(p[14:]),
		HardTimeout: binary.BigEndian.Uint16(p[16:]),
		Flags:       binary.BigEndian.Uint16(p[18:]),
		Cookie:      binary.BigEndian.Uint64(p[24:]),
	}
	m, n, err := decodeMatch(p[48:])
	if err != nil {
		return f, err
	}
	f.Match = m
	for _, mf := range m {
		if mf.Field == fieldUnknown {
			f.rawMatch = string(p[48 : 48+n])
			break
		}
	}
	acts, err := decodeInstructions(p[48+n:])
	if err != nil {
		return f, err
	}
	f.Actions = acts
	return f, nil
}

// DecodeFlowMod decodes an OFPT_FLOW_MOD (header included), for tests and tools.
func DecodeFlowMod(msg []byte) (fm FlowMod, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("openflow: decode flow_mod: %v", r)
		}
	}()
	h, err := ParseHeader(msg)
	if err != nil {
		return fm, err
	}
	if h.Type != TypeFlowMod || int(h.Length) > len(msg) || len(msg) < 56 {
		return fm, errors.New("openflow: not a flow_mod")
	}
	msg = msg[:h.Length]
	fm.Flow.Cookie = binary.BigEndian.Uint64(msg[8:])
	fm.CookieMask = binary.BigEndian.Uint64(msg[16:])
	fm.Flow.Table = msg[24]
	fm.Command = Command(msg[25])
	fm.Flow.IdleTimeout = binary.BigEndian.Uint16(msg[26:])
	fm.Flow.HardTimeout = binary.BigEndian.Uint16(msg[28:])
	fm.Flow.Priority = binary.BigEndian.Uint16(msg[30:])
	fm.Flow.Flags = binary.BigEndian.Uint16(msg[44:])
	m, n, err := decodeMatch(msg[48:])
	if err != nil {
		return fm, err
	}
	fm.Flow.Match = m
	fm.Flow.Actions, err = decodeInstructions(msg[48+n:])
	return fm, err
}

// decodeMatch decodes an ofp_match and returns the bytes consumed (padded).
func decodeMatch(p []byte) (Match, int, error) {
	if len(p) < 4 {
		return nil, 0, errShort
	}
	if binary.BigEndian.Uint16(p) != 1 {
		return nil, 0, fmt.Errorf("openflow: match type %d is not OXM", binary.BigEndian.Uint16(p))
	}
	ml := int(binary.BigEndian.Uint16(p[2:]))
	padded := (ml + 7) / 8 * 8
	if ml < 4 || padded > len(p) {
		return nil, 0, fmt.Errorf("openflow: match length %d", ml)
	}
	q := p[4:ml]
	m := make(Match, 0, len(q)/8)
	for len(q) > 0 {
		if len(q) < 4 {
			return nil, 0, errShort
		}
		h := binary.BigEndian.Uint32(q)
		class, field, hasMask, n := uint16(h>>16), uint8(h>>9&0x7f), h&0x100 != 0, int(h&0xff)
		hl := 4
		if class == classExper {
			hl = 8 // experimenter OXM: 4 more bytes of experimenter id
		}
		if len(q) < 4+n || n < hl-4 {
			return nil, 0, errShort
		}
		body := q[hl : 4+n]
		q = q[4+n:]
		mf, ok := decodeOXMField(class, field, hasMask, body)
		if !ok {
			// keep the flow: an unknown field becomes a marker that renders
			// and keys distinctly, so the reconciler sees it as foreign
			// (Value: the OXM header; ValueHi:MaskHi: the body's first 16 bytes)
			mf = MatchField{Field: fieldUnknown, Value: uint64(h)}
			mf.ValueHi, mf.MaskHi = split128(hash16(body))
		}
		m = append(m, mf)
	}
	return m, padded, nil
}

// fieldUnknown marks a match field the codec does not model.
const fieldUnknown FieldID = 255

func hash16(b []byte) [16]byte {
	var out [16]byte
	copy(out[:], b)
	return out
}

func decodeOXMField(class uint16, field uint8, hasMask bool, body []byte) (MatchField, bool) {
	if class == classOXM && field == 6 { // OXM_OF_VLAN_VID
		if (!hasMask && len(body) != 2) || (hasMask && len(body) != 4) {
			return MatchField{}, false
		}
		mf := MatchField{Field: FieldVlanTCI, Value: readUint(body[:2]), Mask: 0x1fff, HasMask: true}
		if hasMask {
			mf.Mask = readUint(body[2:4])
		}
		return mf, true
	}
	if class == classOXM && field == 7 { // OXM_OF_VLAN_PCP: not modelled
		return MatchField{}, false
	}
	id, reg, ok := fieldByHeader(class, field)
	if !ok {
		return MatchField{}, false
	}
	fi, _ := info(id, reg)
	w := fi.bytes
	if (!hasMask && len(body) != w) || (hasMask && len(body) != 2*w) {
		return MatchField{}, false
	}
	mf := MatchField{Field: id, Reg: reg, HasMask: hasMask}
	if w == 16 {
		mf.SetValue128([16]byte(body[:16]))
		if hasMask {
			mf.SetMask128([16]byte(body[16:32]))
		}
		return mf, true
	}
	mf.Value = readUint(body[:w])
	if hasMask {
		mf.Mask = readUint(body[w:])
	}
	return mf, true
}

func decodeInstructions(p []byte) ([]Action, error) {
	var acts []Action
	var gotoTable *GotoTable
	var meter *Meter
	for len(p) > 0 {
		if len(p) < 4 {
			return nil, errShort
		}
		t, n := binary.BigEndian.Uint16(p), int(binary.BigEndian.Uint16(p[2:]))
		if n < 4 || n > len(p) {
			return nil, fmt.Errorf("openflow: instruction length %d", n)
		}
		body := p[:n]
		p = p[n:]
		switch t {
		case instGotoTable:
			if n < 8 {
				return nil, errShort
			}
			gotoTable = &GotoTable{Table: body[4]}
		case instMeter:
			if n < 8 {
				return nil, errShort
			}
			meter = &Meter{ID: binary.BigEndian.Uint32(body[4:])}
		case instApplyActions:
			if n < 8 {
				return nil, errShort
			}
			a, err := decodeActions(body[8:])
			if err != nil {
				return nil, err
			}
			acts = append(acts, a...)
		default:
			acts = append(acts, Opaque{Instruction: true, Raw: append([]byte(nil), body...)})
		}
	}
	if meter != nil {
		// ovs-ofctl prints the meter first; it runs before the actions
		acts = append([]Action{*meter}, acts...)
	}
	if gotoTable != nil {
		acts = append(acts, *gotoTable)
	}
	return acts, nil
}

func decodeActions(p []byte) ([]Action, error) {
	var acts []Action
	for len(p) > 0 {
		if len(p) < 8 {
			return nil, errShort
		}
		n := int(binary.BigEndian.Uint16(p[2:]))
		if n < 8 || n%8 != 0 || n > len(p) {
			return nil, fmt.Errorf("openflow: action length %d", n)
		}
		a, err := decodeAction(p[:n])
		if err != nil {
			return nil, err
		}
		acts = append(acts, a)
		p = p[n:]
	}
	return acts, nil
}

func opaque(p []byte) Action { return Opaque{Raw: append([]byte(nil), p...)} }

func decodeAction(p []byte) (Action, error) {
	t := binary.BigEndian.Uint16(p)
	switch t {
	case atOutput:
		if len(p) < 16 {
			return nil, errShort
		}
		port := binary.BigEndian.Uint32(p[4:])
		if port == PortController {
			ml := binary.BigEndian.Uint16(p[8:])
			if ml != 0xffff {
				return Controller{MaxLen: ml}, nil
			}
		}
		return Output{Port: port}, nil
	case atPushVLAN:
		return PushVLAN{EtherType: binary.BigEndian.Uint16(p[4:])}, nil
	case atPopVLAN:
		return PopVLAN{}, nil
	case atDecNwTTL:
		return DecTTL{}, nil
	case atSetQueue:
		return SetQueue{Queue: binary.BigEndian.Uint32(p[4:])}, nil
	case atSetField:
		h := binary.BigEndian.Uint32(p[4:])
		class, field, hasMask, n := uint16(h>>16), uint8(h>>9&0x7f), h&0x100 != 0, int(h&0xff)
		if hasMask || 8+n > len(p) {
			return opaque(p), nil
		}
		mf, ok := decodeOXMField(class, field, false, p[8:8+n])
		if !ok {
			return opaque(p), nil
		}
		if mf.Field == FieldVlanTCI {
			mf.Mask, mf.HasMask = 0, false
		}
		return SetField{Field: mf}, nil
	case atExperimen:
		if binary.BigEndian.Uint32(p[4:]) != nxVendor || len(p) < 10 {
			return opaque(p), nil
		}
		return decodeNX(p)
	}
	return opaque(p), nil
}

func decodeRef(h uint32, ofsNbits uint16) (FieldRef, bool) {
	id, reg, ok := fieldByHeader(uint16(h>>16), uint8(h>>9&0x7f))
	if !ok {
		return FieldRef{}, false
	}
	r := FieldRef{Field: id, Reg: reg, Ofs: ofsNbits >> 6, NBits: ofsNbits&0x3f + 1}
	return normRef(r), true
}

// normRef writes whole-field references with NBits 0, as constructors do.
func normRef(r FieldRef) FieldRef {
	fi, _ := info(r.Field, r.Reg)
	if r.Ofs == 0 && int(r.NBits) == fi.nbits {
		r.NBits = 0
	}
	return r
}

func decodeNX(p []byte) (Action, error) {
	sub := binary.BigEndian.Uint16(p[8:])
	switch sub {
	case nxastResubmitTable:
		if len(p) < 16 {
			return nil, errShort
		}
		r := Resubmit{Table: p[12]}
		if port := binary.BigEndian.Uint16(p[10:]); port != 0xfff8 {
			pp := uint32(port)
			if pp >= 0xff00 {
				pp += 0xffff0000
			}
			r.InPort = &pp
		}
		return r, nil
	case nxastRegLoad:
		if len(p) < 24 {
			return nil, errShort
		}
		r, ok := decodeRef(binary.BigEndian.Uint32(p[12:]), binary.BigEndian.Uint16(p[10:]))
		if !ok {
			return opaque(p), nil
		}
		// a whole-field REG_LOAD stays one (OVS prints it as load:, not set_field)
		return Load{Dst: r, Value: binary.BigEndian.Uint64(p[16:]), RegLoad: r.Ofs == 0 && r.NBits == 0}, nil
	case nxastRegMove:
		if len(p) < 24 {
			return nil, errShort
		}
		n := binary.BigEndian.Uint16(p[10:])
		if n == 0 || n > 64*8 {
			return opaque(p), nil
		}
		src, ok1 := decodeRef(binary.BigEndian.Uint32(p[16:]), binary.BigEndian.Uint16(p[12:])<<6|(n-1)&0x3f)
		dst, ok2 := decodeRef(binary.BigEndian.Uint32(p[20:]), binary.BigEndian.Uint16(p[14:])<<6|(n-1)&0x3f)
		if !ok1 || !ok2 || n > 128 {
			return opaque(p), nil
		}
		src.NBits, dst.NBits = n, n
		return Move{Src: normRef(src), Dst: normRef(dst)}, nil
	case nxastOutputReg:
		if len(p) < 24 {
			return nil, errShort
		}
		r, ok := decodeRef(binary.BigEndian.Uint32(p[12:]), binary.BigEndian.Uint16(p[10:]))
		if !ok {
			return opaque(p), nil
		}
		return OutputReg{Src: r}, nil
	case nxastConjunction:
		if len(p) < 16 {
			return nil, errShort
		}
		return Conjunction{Clause: p[10] + 1, NClauses: p[11], ID: binary.BigEndian.Uint32(p[12:])}, nil
	case nxastCtClear:
		return CtClear{}, nil
	case nxastDecTTL:
		return DecTTL{}, nil
	case nxastNote:
		return Note{Data: append([]byte(nil), p[10:]...)}, nil
	case nxastCT:
		return decodeCT(p)
	case nxastLearn:
		return decodeLearn(p)
	}
	return opaque(p), nil
}

func decodeCT(p []byte) (Action, error) {
	if len(p) < 24 {
		return nil, errShort
	}
	flags := binary.BigEndian.Uint16(p[10:])
	if flags&^ctFlagCommit != 0 || binary.BigEndian.Uint16(p[20:]) != 0 {
		return opaque(p), nil // force, alg: not modelled
	}
	ct := CT{Commit: flags&ctFlagCommit != 0}
	if zs := binary.BigEndian.Uint32(p[12:]); zs != 0 {
		r, ok := decodeRef(zs, binary.BigEndian.Uint16(p[16:]))
		if !ok {
			return opaque(p), nil
		}
		ct.ZoneSrc = &r
	} else {
		ct.Zone = binary.BigEndian.Uint16(p[16:])
	}
	if t := p[18]; t != ctRecircNone {
		ct.Table = &t
	}
	inner, err := decodeActions(p[24:])
	if err != nil {
		return nil, err
	}
	for i, a := range inner {
		if o, ok := a.(Opaque); ok && i == 0 && len(o.Raw) >= 16 &&
			binary.BigEndian.Uint16(o.Raw) == atExperimen && binary.BigEndian.Uint16(o.Raw[8:]) == nxastNAT &&
			binary.BigEndian.Uint16(o.Raw[12:]) == 0 && binary.BigEndian.Uint16(o.Raw[14:]) == 0 {
			ct.NAT = true
			continue
		}
		ct.Exec = append(ct.Exec, a)
	}
	return ct, nil
}

func decodeLearn(p []byte) (Action, error) {
	if len(p) < 32 {
		return nil, errShort
	}
	l := Learn{
		IdleTimeout:    binary.BigEndian.Uint16(p[10:]),
		HardTimeout:    binary.BigEndian.Uint16(p[12:]),
		Priority:       binary.BigEndian.Uint16(p[14:]),
		Cookie:         binary.BigEndian.Uint64(p[16:]),
		Flags:          binary.BigEndian.Uint16(p[24:]),
		Table:          p[26],
		FinIdleTimeout: binary.BigEndian.Uint16(p[28:]),
		FinHardTimeout: binary.BigEndian.Uint16(p[30:]),
	}
	q := p[32:]
	for len(q) >= 2 {
		hdr := binary.BigEndian.Uint16(q)
		if hdr == 0 {
			break
		}
		q = q[2:]
		n := int(hdr & 0x3ff)
		srcImm := hdr&(1<<13) != 0
		dst := hdr >> 11 & 3
		var sp LearnSpec
		if srcImm {
			nb := 2 * ((n + 15) / 16)
			if len(q) < nb {
				return nil, errShort
			}
			v := q[:nb]
			if len(v) > 8 {
				v = v[len(v)-8:]
			}
			sp.Value = readUint(v)
			q = q[nb:]
		} else {
			if len(q) < 6 {
				return nil, errShort
			}
			r, ok := decodeRef(binary.BigEndian.Uint32(q), binary.BigEndian.Uint16(q[4:])<<6|uint16(n-1)&0x3f)
			if !ok || n == 0 {
				return opaque(p), nil
			}
			r.NBits = uint16(n)
			sp.Src = normRef(r)
			q = q[6:]
		}
		if dst == 0 || dst == 1 {
			if len(q) < 6 {
				return nil, errShort
			}
			r, ok := decodeRef(binary.BigEndian.Uint32(q), binary.BigEndian.Uint16(q[4:])<<6|uint16(n-1)&0x3f)
			if !ok || n == 0 {
				return opaque(p), nil
			}
			r.NBits = uint16(n)
			sp.Dst = normRef(r)
			q = q[6:]
		}
		switch {
		case dst == 0 && !srcImm:
			sp.Kind = LearnMatchField
		case dst == 0:
			sp.Kind = LearnMatchValue
		case dst == 1 && !srcImm:
			sp.Kind = LearnLoadField
		case dst == 1:
			sp.Kind = LearnLoadValue
		case dst == 2 && !srcImm:
			sp.Kind = LearnOutput
		default:
			return opaque(p), nil
		}
		l.Specs = append(l.Specs, sp)
	}
	return l, nil
}
