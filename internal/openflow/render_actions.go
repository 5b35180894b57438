package openflow

import (
	"fmt"
	"strconv"
	"strings"
)

// Opaque is an action the decoder does not model; it is kept as raw bytes so
// that a dump never fails on a flow someone else installed. It renders as
// "opaque:<hex>" (which ovs-ofctl would print differently).
type Opaque struct {
	Instruction bool // a whole unknown instruction rather than an action
	Raw         []byte
}

func (Opaque) isAction() {}

// FormatActions renders an action list as ovs-ofctl prints it after "actions=".
func FormatActions(acts []Action) string {
	var b strings.Builder
	for _, a := range acts {
		if _, ok := a.(Drop); ok {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		writeAction(&b, a)
	}
	if b.Len() == 0 {
		return "drop"
	}
	return b.String()
}

// writeAction appends one action and reports whether it wrote anything.
func writeAction(b *strings.Builder, a Action) bool {
	switch a := a.(type) {
	case Output:
		if a.Port < 0xffffff00 {
			b.WriteString("output:")
		}
		b.WriteString(formatPort(a.Port))
		if a.Port == PortController {
			b.WriteString(":65535")
		}
	case *Output:
		return writeAction(b, *a)
	case Controller:
		fmt.Fprintf(b, "CONTROLLER:%d", a.MaxLen)
	case OutputReg:
		b.WriteString("output:")
		b.WriteString(formatSubfield(a.Src))
	case GotoTable:
		b.WriteString("goto_table:")
		b.WriteString(strconv.Itoa(int(a.Table)))
	case Resubmit:
		if a.InPort != nil && *a.InPort != PortInPort && a.Table == 255 {
			b.WriteString("resubmit:")
			b.WriteString(formatPort(*a.InPort))
			break
		}
		b.WriteString("resubmit(")
		if a.InPort != nil && *a.InPort != PortInPort {
			b.WriteString(formatPort(*a.InPort))
		}
		b.WriteByte(',')
		if a.Table != 255 {
			b.WriteString(strconv.Itoa(int(a.Table)))
		}
		b.WriteByte(')')
	case PushVLAN:
		et := a.EtherType
		if et == 0 {
			et = EthTypeVLAN
		}
		fmt.Fprintf(b, "push_vlan:%#x", et)
	case PopVLAN:
		b.WriteString("pop_vlan")
	case SetField:
		writeSetField(b, a.Field)
	case Load:
		fi, ok := info(a.Dst.Field, a.Dst.Reg)
		if ok && !a.RegLoad && a.Dst.Ofs == 0 && (a.Dst.NBits == 0 || int(a.Dst.NBits) == fi.nbits) {
			writeSetField(b, MatchField{Field: a.Dst.Field, Reg: a.Dst.Reg, Value: a.Value})
			break
		}
		b.WriteString("load:")
		b.WriteString(hex0(a.Value))
		b.WriteString("->")
		b.WriteString(formatSubfield(a.Dst))
	case Move:
		src, dst := moveRefs(a)
		b.WriteString("move:")
		b.WriteString(formatSubfield(src))
		b.WriteString("->")
		b.WriteString(formatSubfield(dst))
	case CT:
		writeCT(b, a)
	case CtClear:
		b.WriteString("ct_clear")
	case Conjunction:
		fmt.Fprintf(b, "conjunction(%d,%d/%d)", a.ID, a.Clause, a.NClauses)
	case Learn:
		writeLearn(b, a)
	case SetTunnel:
		b.WriteString("set_field:")
		b.WriteString(hex0(a.ID))
		b.WriteString("->tun_id")
	case Note:
		b.WriteString("note:")
		data := a.Data
		if n := (10+len(data)+7)/8*8 - 10; n > len(data) || len(data) < 6 {
			// the wire pads notes to 8 bytes and OVS prints the padding
			if n < 6 {
				n = 6
			}
			data = append(append([]byte(nil), data...), make([]byte, n-len(data))...)
		}
		for i, x := range data {
			if i > 0 {
				b.WriteByte('.')
			}
			fmt.Fprintf(b, "%02x", x)
		}
	case Drop:
		return false
	case DecTTL:
		b.WriteString("dec_ttl")
	case Meter:
		b.WriteString("meter:")
		b.WriteString(strconv.FormatUint(uint64(a.ID), 10))
	case SetQueue:
		b.WriteString("set_queue:")
		b.WriteString(strconv.FormatUint(uint64(a.Queue), 10))
	case Opaque:
		b.WriteString("opaque:")
		fmt.Fprintf(b, "%x", a.Raw)
	default:
		fmt.Fprintf(b, "unknown(%T)", a)
	}
	return true
}

func writeSetField(b *strings.Builder, f MatchField) {
	b.WriteString("set_field:")
	if f.Field == FieldVlanTCI {
		b.WriteString(strconv.FormatUint(f.Value&0x1fff, 10))
		b.WriteString("->vlan_vid")
		return
	}
	fi, ok := info(f.Field, f.Reg)
	if !ok {
		fmt.Fprintf(b, "%d->field%d", f.Value, f.Field)
		return
	}
	b.WriteString(formatValue(fi, f))
	b.WriteString("->")
	b.WriteString(fi.name)
}

// formatValue is mf_format for an unmasked value.
func formatValue(fi fieldInfo, f MatchField) string {
	switch fi.format {
	case fmtMAC:
		return formatMAC(f.Value)
	case fmtIPv4:
		return formatIPv4(uint32(f.Value))
	case fmtIPv6:
		return formatIPv6(f.Value128())
	case fmtPort:
		return formatPort(uint32(f.Value))
	case fmtDec:
		return strconv.FormatUint(f.Value, 10)
	case fmtCtState:
		return formatCtState(&MatchField{Value: f.Value})
	}
	if fi.bytes == 16 {
		v := f.Value128()
		return hexBytes(v[:])
	}
	return hex0(f.Value)
}

// formatSubfield is mf_format_subfield: NXM_NX_REG6[0..15], NXM_OF_ETH_SRC[].
func formatSubfield(r FieldRef) string {
	fi, ok := info(r.Field, r.Reg)
	if !ok {
		return "<unknown>"
	}
	n := int(r.NBits)
	if n == 0 {
		n = fi.nbits
	}
	switch {
	case r.Ofs == 0 && n == fi.nbits:
		return fi.nxm + "[]"
	case n == 1:
		return fi.nxm + "[" + strconv.Itoa(int(r.Ofs)) + "]"
	}
	return fi.nxm + "[" + strconv.Itoa(int(r.Ofs)) + ".." + strconv.Itoa(int(r.Ofs)+n-1) + "]"
}

func writeCT(out *strings.Builder, a CT) {
	var b strings.Builder
	if a.Commit {
		b.WriteString("commit,")
	}
	if a.Table != nil {
		b.WriteString("table=")
		b.WriteString(strconv.Itoa(int(*a.Table)))
		b.WriteByte(',')
	}
	if a.ZoneSrc != nil {
		b.WriteString("zone=")
		b.WriteString(formatSubfield(*a.ZoneSrc))
		b.WriteByte(',')
	} else if a.Zone != 0 {
		b.WriteString("zone=")
		b.WriteString(strconv.Itoa(int(a.Zone)))
		b.WriteByte(',')
	}
	if a.NAT {
		b.WriteString("nat,")
	}
	if len(a.Exec) > 0 {
		b.WriteString("exec(")
		b.WriteString(FormatActions(a.Exec))
		b.WriteString("),")
	}
	out.WriteString("ct(")
	out.WriteString(strings.TrimSuffix(b.String(), ","))
	out.WriteByte(')')
}

func refBits(r FieldRef) int {
	if r.NBits != 0 {
		return int(r.NBits)
	}
	fi, _ := info(r.Field, r.Reg)
	return fi.nbits
}

func writeLearn(b *strings.Builder, l Learn) {
	b.WriteString("learn(table=")
	b.WriteString(strconv.Itoa(int(l.Table)))
	if l.IdleTimeout != 0 {
		fmt.Fprintf(b, ",idle_timeout=%d", l.IdleTimeout)
	}
	if l.HardTimeout != 0 {
		fmt.Fprintf(b, ",hard_timeout=%d", l.HardTimeout)
	}
	if l.FinIdleTimeout != 0 {
		fmt.Fprintf(b, ",fin_idle_timeout=%d", l.FinIdleTimeout)
	}
	if l.FinHardTimeout != 0 {
		fmt.Fprintf(b, ",fin_hard_timeout=%d", l.FinHardTimeout)
	}
	if l.Priority != 32768 {
		fmt.Fprintf(b, ",priority=%d", l.Priority)
	}
	if l.Flags&1 != 0 {
		b.WriteString(",send_flow_rem")
	}
	if l.Flags&2 != 0 {
		b.WriteString(",delete_learned")
	}
	if l.Cookie != 0 {
		b.WriteString(",cookie=")
		b.WriteString(hex0(l.Cookie))
	}
	for _, s := range l.Specs {
		b.WriteByte(',')
		switch s.Kind {
		case LearnMatchValue:
			fi, _ := info(s.Dst.Field, s.Dst.Reg)
			if s.Dst.Ofs == 0 && refBits(s.Dst) == fi.nbits {
				b.WriteString(fi.name)
				b.WriteByte('=')
				b.WriteString(formatValue(fi, MatchField{Field: s.Dst.Field, Reg: s.Dst.Reg, Value: s.Value}))
			} else {
				b.WriteString(formatSubfield(s.Dst))
				b.WriteByte('=')
				b.WriteString(hex0(s.Value))
			}
		case LearnMatchField:
			b.WriteString(formatSubfield(s.Dst))
			if s.Src.Field != s.Dst.Field || s.Src.Reg != s.Dst.Reg || s.Src.Ofs != s.Dst.Ofs {
				b.WriteByte('=')
				b.WriteString(formatSubfield(s.Src))
			}
		case LearnLoadValue:
			b.WriteString("load:")
			b.WriteString(hex0(s.Value))
			b.WriteString("->")
			b.WriteString(formatSubfield(s.Dst))
		case LearnLoadField:
			b.WriteString("load:")
			b.WriteString(formatSubfield(s.Src))
			b.WriteString("->")
			b.WriteString(formatSubfield(s.Dst))
		case LearnOutput:
			b.WriteString("output:")
			b.WriteString(formatSubfield(s.Src))
		}
	}
	b.WriteByte(')')
}

// moveRefs gives both sides of a move the same width: the narrower one's,
// which is what goes on the wire.
func moveRefs(m Move) (FieldRef, FieldRef) {
	n := refBits(m.Src)
	if d := refBits(m.Dst); d < n {
		n = d
	}
	src, dst := m.Src, m.Dst
	src.NBits, dst.NBits = uint16(n), uint16(n)
	return normRef(src), normRef(dst)
}
