package firewall

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// Problem is one rule, member, address pair or port value the translation
// skips because it cannot be represented as it is written: translating what
// is left of it (a rule without its prefix, a port range without its ports)
// would allow more than it says. The agent logs and counts each.
type Problem struct {
	Kind   string // "rule", "member", "address-pair", "port"
	Owner  string // the security group, remote group / address group or port id
	ID     string // rule id, or the offending value
	Reason string // a short, fixed label (metrics)
	Detail string
}

func (p Problem) String() string {
	return p.Kind + " " + p.ID + " of " + p.Owner + ": " + p.Detail
}

// Problem reasons.
const (
	ReasonDecode    = "unreadable"
	ReasonDirection = "direction"
	ReasonEtherType = "ethertype"
	ReasonProtocol  = "protocol"
	ReasonPrefix    = "remote-ip-prefix"
	ReasonPorts     = "port-range"
	ReasonICMP      = "icmp-type-code"
	ReasonAddress   = "address"
)

// checkRule says why a rule cannot be translated without widening it, ""
// when it can. normalise and Problems share it, so what is reported is
// exactly what is skipped.
//
// Ports follow the reference where it is unambiguous: for tcp, udp and sctp
// both bounds set and non-zero restrict, both unset (or 0, which the API
// refuses for these protocols) do not. Every other combination (one bound,
// a bound outside 0..65535, min > max, ports on a protocol OVS cannot match
// ports of, ICMP type or code outside 0..255, a code without a type, an
// ICMPv6 type on IPv4) has no exact flow form and is refused.
func checkRule(r Rule) (reason, detail string) {
	if r.Invalid != "" {
		return ReasonDecode, r.Invalid
	}
	if r.Direction != Ingress && r.Direction != Egress {
		return ReasonDirection, fmt.Sprintf("direction %d", r.Direction)
	}
	if r.EtherType != IPv4 && r.EtherType != IPv6 {
		return ReasonEtherType, fmt.Sprintf("ethertype %d", r.EtherType)
	}
	num, has, err := protocolNumber(r.Protocol, r.EtherType)
	if err != nil {
		return ReasonProtocol, err.Error()
	}
	if r.RemoteIPPrefix.IsValid() && r.RemoteIPPrefix.Addr().Is4() != (r.EtherType == IPv4) {
		return ReasonPrefix, fmt.Sprintf("remote_ip_prefix %s is not %s", r.RemoteIPPrefix, r.EtherType)
	}
	set := func(p *int) bool { return p != nil && *p != 0 }
	switch {
	case has && hasPorts(num):
		if !set(r.PortRangeMin) && !set(r.PortRangeMax) {
			return "", ""
		}
		lo, hi := r.PortRangeMin, r.PortRangeMax
		if !set(lo) || !set(hi) || *lo < 0 || *lo > 65535 || *hi < 0 || *hi > 65535 || *lo > *hi {
			return ReasonPorts, "port range " + optInt(lo) + ":" + optInt(hi)
		}
	case has && isICMP(num):
		typ, code := r.PortRangeMin, r.PortRangeMax
		if typ == nil && code != nil {
			return ReasonICMP, "icmp code " + optInt(code) + " without a type"
		}
		if (typ != nil && (*typ < 0 || *typ > 255)) || (code != nil && (*code < 0 || *code > 255)) {
			return ReasonICMP, "icmp type/code " + optInt(typ) + "/" + optInt(code)
		}
		if typ != nil && (num == of.IPProtoICMPv6) != (r.EtherType == IPv6) {
			return ReasonICMP, fmt.Sprintf("icmp type of protocol %d on %s", num, r.EtherType)
		}
	default:
		if set(r.PortRangeMin) || set(r.PortRangeMax) {
			return ReasonPorts, fmt.Sprintf("port range %s:%s on protocol %q", optInt(r.PortRangeMin), optInt(r.PortRangeMax), r.Protocol)
		}
	}
	return "", ""
}

// checkMember says why a remote group / address group member is skipped.
func checkMember(m Member) string {
	if m.Invalid != "" {
		return m.Invalid
	}
	if !m.IP.IsValid() {
		return "no address"
	}
	return ""
}

// Problems lists everything in st the translation skips (rules of the
// groups, members of the remotes, address pairs and values of the ports),
// sorted. It is cheap (no flows are built): the agent calls it whenever the
// state changes and reports what is new.
func Problems(st *State) []Problem {
	var out []Problem
	for gid, g := range st.Groups {
		for _, r := range g.Rules {
			if reason, detail := checkRule(r); reason != "" {
				out = append(out, Problem{Kind: "rule", Owner: gid, ID: r.ID, Reason: reason, Detail: detail})
			}
		}
	}
	for rid, ms := range st.Members {
		for _, m := range ms {
			if d := checkMember(m); d != "" {
				out = append(out, Problem{Kind: "member", Owner: rid, ID: memberID(m), Reason: ReasonAddress, Detail: d})
			}
		}
	}
	for pid, p := range st.Ports {
		for _, ap := range p.AllowedAddressPairs {
			if ap.Invalid != "" || !ap.IP.IsValid() {
				d := ap.Invalid
				if d == "" {
					d = "no address"
				}
				id := d
				if ap.IP.IsValid() {
					id = ap.IP.String()
				}
				out = append(out, Problem{Kind: "address-pair", Owner: pid, ID: id, Reason: ReasonAddress, Detail: d})
			}
		}
		for _, v := range p.Invalid {
			out = append(out, Problem{Kind: "port", Owner: pid, ID: v, Reason: ReasonDecode, Detail: v})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		if a.Owner != b.Owner {
			return a.Owner < b.Owner
		}
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Detail < b.Detail
	})
	return out
}

func memberID(m Member) string {
	if m.IP.IsValid() {
		return m.IP.String()
	}
	return m.Invalid
}

// memberPrefix is the address a member contributes to the address flows of
// ethertype et, ok false when it contributes none. An IPv4-mapped IPv6
// address is IPv6 (the reference files members by netaddr's version and
// matches ipv6_src=::ffff:a.b.c.d), never turned into an IPv4 match nor
// into no match at all.
func memberPrefix(m Member, et EtherType) (netip.Prefix, bool) {
	if checkMember(m) != "" || m.IP.Addr().Is4() != (et == IPv4) {
		return netip.Prefix{}, false
	}
	p := m.IP.Masked()
	return p, p.IsValid()
}

// ParsePrefix reads an address or prefix as the server sends it (a fixed IP,
// an allowed address pair, a member, a remote_ip_prefix): an address is a
// host prefix, a prefix is masked. ok false means unparsable: the caller
// marks the value Invalid, which the translation skips and never widens.
func ParsePrefix(s string) (netip.Prefix, bool) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err == nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, false
	}
	return netip.PrefixFrom(a, a.BitLen()), true
}
