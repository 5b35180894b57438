package openflow

import (
	"encoding/binary"
	"fmt"
)

// OpenFlow 1.3 action and instruction types, Nicira subtypes.
const (
	atOutput    = 0
	atPushVLAN  = 17
	atPopVLAN   = 18
	atSetQueue  = 21
	atDecNwTTL  = 24
	atSetField  = 25
	atExperimen = 0xffff

	instGotoTable    = 1
	instApplyActions = 4
	instMeter        = 6

	nxastRegMove       = 6
	nxastRegLoad       = 7
	nxastNote          = 8
	nxastResubmitTable = 14
	nxastOutputReg     = 15
	nxastLearn         = 16
	nxastDecTTL        = 18
	nxastConjunction   = 34
	nxastCT            = 35
	nxastNAT           = 36
	nxastCtClear       = 43

	ctFlagCommit = 1
	ctRecircNone = 0xff
)

// appendInstructions turns the action list into meter, apply_actions and goto_table,
// in the order OpenFlow 1.3 executes instructions (each its own instruction).
func appendInstructions(b []byte, acts []Action) ([]byte, error) {
	var gotoTable *GotoTable
	var meter *Meter
	var apply []Action
	for _, a := range acts {
		switch a := a.(type) {
		case GotoTable:
			g := a
			gotoTable = &g
		case Meter:
			m := a
			meter = &m
		case Drop:
		default:
			apply = append(apply, a)
		}
	}
	if meter != nil {
		b = be16(b, instMeter)
		b = be16(b, 8)
		b = be32(b, meter.ID)
	}
	if len(apply) > 0 {
		s := len(b)
		b = be16(b, instApplyActions)
		b = be16(b, 0)
		b = pad(b, 4)
		var err error
		if b, err = appendActions(b, apply); err != nil {
			return nil, err
		}
		binary.BigEndian.PutUint16(b[s+2:], uint16(len(b)-s))
	}
	if gotoTable != nil {
		b = be16(b, instGotoTable)
		b = be16(b, 8)
		b = append(b, gotoTable.Table, 0, 0, 0)
	}
	return b, nil
}

func appendActions(b []byte, acts []Action) ([]byte, error) {
	var err error
	for _, a := range acts {
		if b, err = appendAction(b, a); err != nil {
			return nil, err
		}
	}
	return b, nil
}

// nxStart begins a Nicira vendor action; nxEnd pads it to 8 and sets its length.
func nxStart(b []byte, subtype uint16) ([]byte, int) {
	s := len(b)
	b = be16(b, atExperimen)
	b = be16(b, 0)
	b = be32(b, nxVendor)
	b = be16(b, subtype)
	return b, s
}

func actEnd(b []byte, s int) []byte {
	b = pad8(b, s)
	binary.BigEndian.PutUint16(b[s+2:], uint16(len(b)-s))
	return b
}

func ofsNbits(r FieldRef) (uint16, error) {
	n := refBits(r)
	if n <= 0 {
		return 0, fmt.Errorf("field %d: unknown width", r.Field)
	}
	fi, _ := info(r.Field, r.Reg)
	if int(r.Ofs)+n > fi.nbits {
		return 0, fmt.Errorf("%s[%d..%d] exceeds the field", fi.nxm, r.Ofs, int(r.Ofs)+n-1)
	}
	return r.Ofs<<6 | uint16(n-1), nil
}

func refHeader(r FieldRef) (uint32, error) {
	h, _, ok := headerOf(r.Field, r.Reg)
	if !ok {
		return 0, fmt.Errorf("field %d not supported in actions", r.Field)
	}
	return h, nil
}

func appendAction(b []byte, a Action) ([]byte, error) {
	switch a := a.(type) {
	case Output:
		b = be16(b, atOutput)
		b = be16(b, 16)
		b = be32(b, a.Port)
		if a.Port == PortController {
			b = be16(b, 0xffff)
		} else {
			b = be16(b, 0)
		}
		b = pad(b, 6)
	case Controller:
		b = be16(b, atOutput)
		b = be16(b, 16)
		b = be32(b, PortController)
		b = be16(b, a.MaxLen)
		b = pad(b, 6)
	case PushVLAN:
		et := a.EtherType
		if et == 0 {
			et = EthTypeVLAN
		}
		b = be16(b, atPushVLAN)
		b = be16(b, 8)
		b = be16(b, et)
		b = pad(b, 2)
	case PopVLAN:
		b = be16(b, atPopVLAN)
		b = be16(b, 8)
		b = pad(b, 4)
	case SetQueue:
		b = be16(b, atSetQueue)
		b = be16(b, 8)
		b = be32(b, a.Queue)
	case DecTTL:
		b = be16(b, atDecNwTTL)
		b = be16(b, 8)
		b = pad(b, 4)
	case SetField:
		return appendSetField(b, a.Field)
	case SetTunnel:
		return appendSetField(b, MatchField{Field: FieldTunID, Value: a.ID})
	case Load:
		fi, ok := info(a.Dst.Field, a.Dst.Reg)
		if !ok {
			return nil, fmt.Errorf("load: field %d not supported", a.Dst.Field)
		}
		if !a.RegLoad && a.Dst.Ofs == 0 && (a.Dst.NBits == 0 || int(a.Dst.NBits) == fi.nbits) {
			// a whole-field load is a set_field in OF1.3; OVS prints it so
			return appendSetField(b, MatchField{Field: a.Dst.Field, Reg: a.Dst.Reg, Value: a.Value})
		}
		on, err := ofsNbits(a.Dst)
		if err != nil {
			return nil, err
		}
		h, err := refHeader(a.Dst)
		if err != nil {
			return nil, err
		}
		var s int
		b, s = nxStart(b, nxastRegLoad)
		b = be16(b, on)
		b = be32(b, h)
		b = be64(b, a.Value)
		b = actEnd(b, s)
	case Move:
		hs, err := refHeader(a.Src)
		if err != nil {
			return nil, err
		}
		hd, err := refHeader(a.Dst)
		if err != nil {
			return nil, err
		}
		src, _ := moveRefs(a)
		n := refBits(src)
		fs, _ := info(a.Src.Field, a.Src.Reg)
		fd, _ := info(a.Dst.Field, a.Dst.Reg)
		if int(a.Src.Ofs)+n > fs.nbits || int(a.Dst.Ofs)+n > fd.nbits {
			return nil, fmt.Errorf("move: range exceeds the field")
		}
		var s int
		b, s = nxStart(b, nxastRegMove)
		b = be16(b, uint16(n))
		b = be16(b, a.Src.Ofs)
		b = be16(b, a.Dst.Ofs)
		b = be32(b, hs)
		b = be32(b, hd)
		b = actEnd(b, s)
	case OutputReg:
		on, err := ofsNbits(a.Src)
		if err != nil {
			return nil, err
		}
		h, err := refHeader(a.Src)
		if err != nil {
			return nil, err
		}
		var s int
		b, s = nxStart(b, nxastOutputReg)
		b = be16(b, on)
		b = be32(b, h)
		b = be16(b, 0)
		b = pad(b, 6)
		b = actEnd(b, s)
	case Resubmit:
		port := uint16(0xfff8) // OFPP_IN_PORT: keep the packet's in_port
		if a.InPort != nil {
			p := *a.InPort
			if p >= 0xffffff00 {
				p -= 0xffff0000
			}
			port = uint16(p)
		}
		var s int
		b, s = nxStart(b, nxastResubmitTable)
		b = be16(b, port)
		b = append(b, a.Table)
		b = pad(b, 3)
		b = actEnd(b, s)
	case CT:
		var s int
		b, s = nxStart(b, nxastCT)
		flags := uint16(0)
		if a.Commit {
			flags |= ctFlagCommit
		}
		b = be16(b, flags)
		if a.ZoneSrc != nil {
			h, err := refHeader(*a.ZoneSrc)
			if err != nil {
				return nil, err
			}
			on, err := ofsNbits(*a.ZoneSrc)
			if err != nil {
				return nil, err
			}
			b = be32(b, h)
			b = be16(b, on)
		} else {
			b = be32(b, 0)
			b = be16(b, a.Zone)
		}
		table := uint8(ctRecircNone)
		if a.Table != nil {
			table = *a.Table
		}
		b = append(b, table, 0, 0, 0)
		b = be16(b, 0) // alg
		if a.NAT {
			var ns int
			b, ns = nxStart(b, nxastNAT)
			b = pad(b, 2)
			b = be16(b, 0)
			b = be16(b, 0)
			b = actEnd(b, ns)
		}
		var err error
		if b, err = appendActions(b, a.Exec); err != nil {
			return nil, err
		}
		b = actEnd(b, s)
	case CtClear:
		var s int
		b, s = nxStart(b, nxastCtClear)
		b = actEnd(b, s)
	case Conjunction:
		if a.Clause == 0 || a.Clause > a.NClauses {
			return nil, fmt.Errorf("conjunction(%d,%d/%d): clause out of range", a.ID, a.Clause, a.NClauses)
		}
		var s int
		b, s = nxStart(b, nxastConjunction)
		b = append(b, a.Clause-1, a.NClauses)
		b = be32(b, a.ID)
		b = actEnd(b, s)
	case Note:
		var s int
		b, s = nxStart(b, nxastNote)
		b = append(b, a.Data...)
		if len(b)-s < 16 {
			b = pad(b, 16-(len(b)-s))
		}
		b = actEnd(b, s)
	case Learn:
		return appendLearn(b, a)
	case Opaque:
		if a.Instruction {
			return nil, fmt.Errorf("opaque instruction cannot be re-sent")
		}
		b = append(b, a.Raw...)
	case GotoTable, Drop, Meter:
		return nil, fmt.Errorf("%T not allowed inside an action list", a)
	default:
		return nil, fmt.Errorf("action %T not supported", a)
	}
	return b, nil
}

func appendSetField(b []byte, f MatchField) ([]byte, error) {
	s := len(b)
	b = be16(b, atSetField)
	b = be16(b, 0)
	fi, ok := info(f.Field, f.Reg)
	if !ok {
		return nil, fmt.Errorf("set_field: field %d not supported", f.Field)
	}
	v := f.Value
	if f.Field == FieldVlanTCI {
		fi = vlanVIDInfo
		v &= 0x1fff
	}
	b = be32(b, nxmHeader(fi.class, fi.field, false, fi.bytes))
	if fi.bytes == 16 {
		v := f.Value128()
		b = append(b, v[:]...)
	} else {
		b = appendUint(b, v, fi.bytes)
	}
	return actEnd(b, s), nil
}

func appendLearn(b []byte, l Learn) ([]byte, error) {
	var s int
	b, s = nxStart(b, nxastLearn)
	b = be16(b, l.IdleTimeout)
	b = be16(b, l.HardTimeout)
	b = be16(b, l.Priority)
	b = be64(b, l.Cookie)
	b = be16(b, l.Flags)
	b = append(b, l.Table, 0)
	b = be16(b, l.FinIdleTimeout)
	b = be16(b, l.FinHardTimeout)
	for _, sp := range l.Specs {
		var n int
		var hdr uint16
		switch sp.Kind {
		case LearnMatchField:
			n, hdr = refBits(sp.Dst), 0
		case LearnMatchValue:
			n, hdr = refBits(sp.Dst), 1<<13
		case LearnLoadField:
			n, hdr = refBits(sp.Dst), 1<<11
		case LearnLoadValue:
			n, hdr = refBits(sp.Dst), 1<<13|1<<11
		case LearnOutput:
			n, hdr = refBits(sp.Src), 2<<11
		default:
			return nil, fmt.Errorf("learn: spec kind %d", sp.Kind)
		}
		if n <= 0 || n > 0x3ff {
			return nil, fmt.Errorf("learn: bad spec width %d", n)
		}
		b = be16(b, hdr|uint16(n))
		if hdr&(1<<13) == 0 {
			h, err := refHeader(sp.Src)
			if err != nil {
				return nil, err
			}
			b = be32(b, h)
			b = be16(b, sp.Src.Ofs)
		} else {
			nb := 2 * ((n + 15) / 16)
			if nb > 8 {
				b = pad(b, nb-8)
				nb = 8
			}
			b = appendUint(b, sp.Value, nb)
		}
		if sp.Kind != LearnOutput {
			h, err := refHeader(sp.Dst)
			if err != nil {
				return nil, err
			}
			b = be32(b, h)
			b = be16(b, sp.Dst.Ofs)
		}
	}
	return actEnd(b, s), nil
}
