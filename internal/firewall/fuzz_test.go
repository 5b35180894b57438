package firewall

import (
	"net/netip"
	"strconv"
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// oracle is what one rule allows, worked out from the rule alone (not
// from checkRule): valid false means no flow may come from it.
type oracle struct {
	valid    bool
	eth      uint16
	proto    int // -1 any
	lo, hi   int // allowed destination ports (tcp/udp/sctp)
	icmpType int // -1 any
	icmpCode int // -1 any
	prefix   netip.Prefix
	members  []netip.Prefix // remote rules: the allowed remote addresses
}

func ruleOracle(r Rule, members []Member) oracle {
	o := oracle{valid: r.Invalid == "", eth: of.EthTypeIPv4, proto: -1, lo: 0, hi: 65535, icmpType: -1, icmpCode: -1}
	v6 := r.EtherType == IPv6
	if v6 {
		o.eth = of.EthTypeIPv6
	}
	p := strings.ToLower(r.Protocol)
	switch n, err := strconv.Atoi(p); {
	case p == "" || p == "any":
	case err == nil:
		o.proto = n
		if n < 0 || n > 255 {
			o.valid = false
		}
	default:
		n, ok := protocolNumbers[p]
		if !ok {
			o.valid = false
		}
		o.proto = int(n)
	}
	if v6 && (o.proto == 1 || p == "icmp") {
		o.proto = 58
	}
	nz := func(x *int) bool { return x != nil && *x != 0 }
	switch o.proto {
	case 6, 17, 132:
		if nz(r.PortRangeMin) || nz(r.PortRangeMax) {
			if !nz(r.PortRangeMin) || !nz(r.PortRangeMax) {
				o.valid = false
				break
			}
			o.lo, o.hi = *r.PortRangeMin, *r.PortRangeMax
			if o.lo < 1 || o.hi > 65535 || o.lo > o.hi {
				o.valid = false
			}
		}
	case 1, 58:
		if r.PortRangeMin != nil {
			o.icmpType = *r.PortRangeMin
		}
		if r.PortRangeMax != nil {
			o.icmpCode = *r.PortRangeMax
		}
		if o.icmpType > 255 || o.icmpType < -1 || o.icmpCode > 255 || o.icmpCode < -1 ||
			(r.PortRangeMin == nil && r.PortRangeMax != nil) ||
			(r.PortRangeMin != nil && (o.proto == 58) != v6) {
			o.valid = false
		}
	default:
		if nz(r.PortRangeMin) || nz(r.PortRangeMax) {
			o.valid = false
		}
	}
	if r.RemoteIPPrefix.IsValid() {
		if r.RemoteIPPrefix.Addr().Is4() == v6 {
			o.valid = false
		}
		o.prefix = r.RemoteIPPrefix.Masked()
	}
	for _, m := range members {
		if m.Invalid == "" && m.IP.IsValid() && m.IP.Addr().Is4() != v6 {
			o.members = append(o.members, m.IP.Masked())
		}
	}
	return o
}

// within reports whether the addresses a match field covers lie inside p.
func within(f of.MatchField, p netip.Prefix) bool {
	var fp netip.Prefix
	switch f.Field {
	case of.FieldIPv4Src, of.FieldIPv4Dst:
		a := netip.AddrFrom4([4]byte{byte(f.Value >> 24), byte(f.Value >> 16), byte(f.Value >> 8), byte(f.Value)})
		bits := 32
		if f.HasMask {
			bits = onesPrefix(f.Mask, 32)
		}
		fp = netip.PrefixFrom(a, bits)
	case of.FieldIPv6Src, of.FieldIPv6Dst:
		bits := 128
		if f.HasMask {
			m := f.Mask128()
			bits = onesPrefix(uint64(m[0])<<56|uint64(m[1])<<48|uint64(m[2])<<40|uint64(m[3])<<32|uint64(m[4])<<24|uint64(m[5])<<16|uint64(m[6])<<8|uint64(m[7]), 64)
			if bits == 64 {
				bits += onesPrefix(uint64(m[8])<<56|uint64(m[9])<<48|uint64(m[10])<<40|uint64(m[11])<<32|uint64(m[12])<<24|uint64(m[13])<<16|uint64(m[14])<<8|uint64(m[15]), 64)
			}
		}
		fp = netip.PrefixFrom(netip.AddrFrom16(f.Value128()), bits)
	default:
		return false
	}
	if !fp.IsValid() || !p.IsValid() || fp.Addr().Is4() != p.Addr().Is4() {
		return false
	}
	return fp.Bits() >= p.Bits() && p.Contains(fp.Addr())
}

// onesPrefix counts the leading ones of a width-bit mask; -1 when the mask
// is not a prefix.
func onesPrefix(m uint64, width int) int {
	n := 0
	for i := width - 1; i >= 0; i-- {
		if m>>uint(i)&1 == 0 {
			break
		}
		n++
	}
	if n < width && m&(1<<uint(width-n)-1) != 0 {
		return -1
	}
	return n
}

func fieldOf(f of.Flow, id of.FieldID) (of.MatchField, bool) {
	for _, m := range f.Match {
		if m.Field == id {
			return m, true
		}
	}
	return of.MatchField{}, false
}

func clauseOf(f of.Flow) uint8 {
	for _, a := range f.Actions {
		if c, ok := a.(of.Conjunction); ok {
			return c.Clause
		}
	}
	return 0
}

// checkL4 asserts that a rule flow (plain or port clause) matches no more
// than the rule's protocol, ports or ICMP type/code, with OVS's
// prerequisites met.
func checkL4(t *testing.T, f of.Flow, o oracle) {
	t.Helper()
	if e, ok := fieldOf(f, of.FieldEthType); !ok || uint16(e.Value) != o.eth {
		t.Fatalf("flow without the rule's ethertype %#x: %s", o.eth, f)
	}
	pf, hasProto := fieldOf(f, of.FieldIPProto)
	if o.proto >= 0 && (!hasProto || int(pf.Value) != o.proto) {
		t.Fatalf("flow without the rule's protocol %d: %s", o.proto, f)
	}
	portField := map[int]of.FieldID{6: of.FieldTCPDst, 17: of.FieldUDPDst, 132: of.FieldSCTPDst}
	if id, ok := portField[o.proto]; ok && (o.lo > 1 || o.hi < 65535) {
		pm, ok := fieldOf(f, id)
		if !ok {
			t.Fatalf("flow without the rule's ports %d-%d: %s", o.lo, o.hi, f)
		}
		mask := uint64(0xffff)
		if pm.HasMask {
			mask = pm.Mask
		}
		first, last := int(pm.Value&mask), int(pm.Value&mask|^mask&0xffff)
		if first < o.lo || last > o.hi {
			t.Fatalf("ports %d-%d outside the rule's %d-%d: %s", first, last, o.lo, o.hi, f)
		}
	}
	typ, code := of.FieldICMPv4Type, of.FieldICMPv4Code
	if o.eth == of.EthTypeIPv6 {
		typ, code = of.FieldICMPv6Type, of.FieldICMPv6Code
	}
	if o.icmpType >= 0 {
		if m, ok := fieldOf(f, typ); !ok || int(m.Value) != o.icmpType {
			t.Fatalf("flow without the rule's icmp type %d: %s", o.icmpType, f)
		}
	}
	if o.icmpCode >= 0 {
		if m, ok := fieldOf(f, code); !ok || int(m.Value) != o.icmpCode {
			t.Fatalf("flow without the rule's icmp code %d: %s", o.icmpCode, f)
		}
	}
	for _, m := range f.Match {
		switch m.Field {
		case of.FieldICMPv4Type, of.FieldICMPv4Code:
			if o.eth != of.EthTypeIPv4 || !hasProto || pf.Value != 1 {
				t.Fatalf("icmp match without its prerequisites: %s", f)
			}
		case of.FieldICMPv6Type, of.FieldICMPv6Code:
			if o.eth != of.EthTypeIPv6 || !hasProto || pf.Value != 58 {
				t.Fatalf("icmpv6 match without its prerequisites: %s", f)
			}
		}
	}
}

// FuzzRuleTranslation: no rule, remote prefix or member, however malformed,
// yields a firewall flow that allows more than the rule says. One port, one
// rule, two members, one allowed address pair per execution.
func FuzzRuleTranslation(f *testing.F) {
	seeds := []struct {
		ingress, v6 bool
		proto       string
		hasMin      bool
		min         int
		hasMax      bool
		max         int
		prefix      string
		remote      uint8
		m1, m2, aap string
	}{
		{true, false, "tcp", true, 22, true, 22, "10.0.0.0/24", 0, "", "", ""},
		{true, true, "tcp", true, 22, true, 22, "", 1, "::ffff:10.0.0.9", "2001:db8::9", "::ffff:10.0.0.7"},
		{true, false, "tcp", true, 22, true, 22, "", 1, "::ffff:10.0.0.9", "10.0.0.8", ""},
		{true, false, "tcp", true, 22, true, 70000, "", 0, "", "", ""},
		{true, false, "udp", true, -65514, true, 53, "", 0, "", "", ""},
		{true, false, "icmp", true, 264, false, 0, "", 0, "", "", ""},
		{true, true, "1", true, 128, true, 0, "", 0, "", "", ""},
		{false, true, "icmp", true, 135, false, 0, "2001:db8::/32", 0, "", "", ""},
		{true, false, "tcp", true, 1000, true, 1999, "not-a-prefix", 0, "", "", ""},
		{true, false, "6", true, 0, true, 22, "", 2, "0.0.0.0/0", "bad", "10.9.0.0/16"},
		{false, false, "gre", true, 5, true, 5, "", 0, "", "", ""},
		{true, false, "ipv6-icmp", true, 1, false, 0, "", 0, "", "", ""},
		{false, false, "sctp", true, 100, true, 99, "", 1, "10.0.0.0/8", "", ""},
		{true, false, "", true, 22, true, 22, "", 0, "", "", ""},
	}
	for _, s := range seeds {
		f.Add(s.ingress, s.v6, s.proto, s.hasMin, s.min, s.hasMax, s.max, s.prefix, s.remote, s.m1, s.m2, s.aap)
	}
	f.Fuzz(func(t *testing.T, ingress, v6 bool, proto string, hasMin bool, min int, hasMax bool, max int, prefix string, remote uint8, m1, m2, aap string) {
		r := Rule{ID: "r", Direction: Egress, EtherType: IPv4, Protocol: proto}
		if ingress {
			r.Direction = Ingress
		}
		if v6 {
			r.EtherType = IPv6
		}
		if hasMin {
			r.PortRangeMin = &min
		}
		if hasMax {
			r.PortRangeMax = &max
		}
		if prefix != "" {
			if p, ok := ParsePrefix(prefix); ok {
				r.RemoteIPPrefix = p
			} else {
				r.Invalid = "remote_ip_prefix " + prefix
			}
		}
		var members []Member
		for _, s := range []string{m1, m2} {
			if p, ok := ParsePrefix(s); ok {
				members = append(members, Member{IP: p, MAC: mac("fa:16:3e:00:00:09")})
			} else if s != "" {
				members = append(members, Member{Invalid: s})
			}
		}
		switch remote % 3 {
		case 1:
			r.RemoteGroupID = sgB
		case 2:
			r.RemoteAddressGroupID = agX
		}
		st := onePort(SecurityGroup{ID: sgA, Rules: []Rule{r}}, func(p *Port) {
			p.FixedIPs = append(p.FixedIPs, ip("2001:db8::5"))
			if ap, ok := ParsePrefix(aap); ok {
				p.AllowedAddressPairs = []AddressPair{{IP: ap}}
			} else if aap != "" {
				p.AllowedAddressPairs = []AddressPair{{Invalid: aap}}
			}
		})
		st.Members[sgB], st.Members[agX] = members, members
		o := ruleOracle(r, members)
		ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
		port := st.Ports["p1"]
		flows := append(PortFlows(st, port, ids), ConjFlows(st, ids, port.VLAN)...)

		src, dst := of.FieldIPv4Src, of.FieldIPv4Dst
		if v6 {
			src, dst = of.FieldIPv6Src, of.FieldIPv6Dst
		}
		remoteField := dst
		if ingress {
			remoteField = src
		}
		for _, fl := range flows {
			if fl.Table == TableBaseEgress {
				checkSource(t, fl, port)
			}
			if fl.Table != TableRulesEgress && fl.Table != TableRulesIngress || fl.Priority < 70 {
				continue
			}
			if _, ok := fieldOf(fl, of.FieldConjID); ok {
				continue // accept on a conjunction: both clauses are checked
			}
			if !o.valid {
				t.Fatalf("flow from a rule that cannot be represented (%+v): %s", r, fl)
			}
			if (fl.Table == TableRulesIngress) != ingress {
				t.Fatalf("flow in the other direction's table: %s", fl)
			}
			switch clauseOf(fl) {
			case 1: // the address half: one member's address, never more
				if e, ok := fieldOf(fl, of.FieldEthType); !ok || uint16(e.Value) != o.eth {
					t.Fatalf("address flow without the rule's ethertype: %s", fl)
				}
				am, has := fieldOf(fl, remoteField)
				ok := false
				for _, mp := range o.members {
					if (has && within(am, mp)) || (!has && mp.Bits() == 0) {
						ok = true
					}
				}
				if !ok {
					t.Fatalf("address flow covers no member of %v: %s", o.members, fl)
				}
			default: // the port half, or a plain rule
				checkL4(t, fl, o)
				if clauseOf(fl) == 0 && o.prefix.IsValid() && o.prefix.Bits() > 0 {
					am, has := fieldOf(fl, remoteField)
					if !has || !within(am, o.prefix) {
						t.Fatalf("flow wider than remote_ip_prefix %s: %s", o.prefix, fl)
					}
				}
			}
		}
	})
}

// checkSource: every source address the port may send from (table 71) is
// one of its fixed IPs, link-local address, readable allowed address pairs
// or the DHCP client's 0.0.0.0, in its own family.
func checkSource(t *testing.T, fl of.Flow, p Port) {
	t.Helper()
	allowed := []netip.Prefix{pfx("0.0.0.0/32"), hostPrefix(linkLocal(p.MAC))}
	for _, a := range p.FixedIPs {
		allowed = append(allowed, hostPrefix(a))
	}
	for _, ap := range p.AllowedAddressPairs {
		if ap.Invalid == "" && ap.IP.IsValid() {
			allowed = append(allowed, ap.IP.Masked())
		}
	}
	for _, id := range []of.FieldID{of.FieldIPv4Src, of.FieldIPv6Src} {
		m, ok := fieldOf(fl, id)
		if !ok {
			continue
		}
		inside := false
		for _, a := range allowed {
			if within(m, a) {
				inside = true
			}
		}
		if !inside {
			t.Fatalf("port may send from an address it does not own: %s", fl)
		}
	}
	if fl.Priority == 65 {
		if _, ok4 := fieldOf(fl, of.FieldIPv4Src); !ok4 {
			if _, ok6 := fieldOf(fl, of.FieldIPv6Src); !ok6 {
				t.Fatalf("egress flow without a source address: %s", fl)
			}
		}
	}
}
