package firewall

import (
	"fmt"
	of "github.com/ovsagent/ovsagent/internal/openflow"
	"net"
	"net/netip"
	"testing"
)

// benchState: n ports (4 VLANs) in one group with r rules: r-1 plain rules
// (tcp single ports, a port range, udp, icmp, both directions, prefixes)
// and one ingress remote-group rule referencing the group itself; every
// port is a member.
func benchState(n, r int) *State {
	const sg = "bench-sg"
	g := SecurityGroup{ID: sg}
	g.Rules = append(g.Rules, Rule{Direction: Ingress, EtherType: IPv4, RemoteGroupID: sg})
	for i := 0; len(g.Rules) < r; i++ {
		switch i % 4 {
		case 0:
			g.Rules = append(g.Rules, Rule{Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(1000 + i), PortRangeMax: iptr(1000 + i), RemoteIPPrefix: netip.MustParsePrefix(fmt.Sprintf("10.%d.0.0/16", i))})
		case 1:
			g.Rules = append(g.Rules, Rule{Direction: Egress, EtherType: IPv4, Protocol: "udp", PortRangeMin: iptr(2000 + i), PortRangeMax: iptr(2000 + i)})
		case 2:
			g.Rules = append(g.Rules, Rule{Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(8000), PortRangeMax: iptr(8000 + i)})
		case 3:
			g.Rules = append(g.Rules, Rule{Direction: Ingress, EtherType: IPv4, Protocol: "icmp", PortRangeMin: iptr(8), PortRangeMax: iptr(0), RemoteIPPrefix: netip.MustParsePrefix(fmt.Sprintf("192.168.%d.0/24", i))})
		}
	}
	st := &State{Ports: map[string]Port{}, Groups: map[string]SecurityGroup{sg: g}, Members: map[string][]Member{}}
	for i := 0; i < n; i++ {
		m := net.HardwareAddr{0xfa, 0x16, 0x3e, 0, byte(i >> 8), byte(i)}
		a := netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)})
		p := Port{ID: fmt.Sprintf("port-%04d", i), OFPort: uint32(10 + i), VLAN: uint16(1 + i%4), MAC: m, FixedIPs: []netip.Addr{a}, PortSecurity: true, SecurityGroupIDs: []string{sg}}
		st.Ports[p.ID] = p
		st.Members[sg] = append(st.Members[sg], Member{IP: hostPrefix(a), MAC: m})
	}
	return st
}

// BenchmarkCompute100x20: all firewall flows for 100 ports x 20 rules.
func BenchmarkCompute100x20(b *testing.B) {
	st := benchState(100, 20)
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	b.ReportAllocs()
	var n int
	for i := 0; i < b.N; i++ {
		n = 0
		for _, fs := range Compute(st, ids) {
			n += len(fs)
		}
	}
	b.ReportMetric(float64(n), "flows")
}

// BenchmarkRuleChange100: one rule added to the group of 100 ports: find
// the changed owners and recompute them.
func BenchmarkRuleChange100(b *testing.B) {
	st := benchState(100, 20)
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	next := cloneState(st)
	g := next.Groups["bench-sg"]
	g.Rules = append(g.Rules, Rule{Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(443), PortRangeMax: iptr(443)})
	next.Groups["bench-sg"] = g
	b.ReportAllocs()
	var owners, n int
	for i := 0; i < b.N; i++ {
		nids, changed := Update(st, next, ids)
		owners, n = len(changed), 0
		for _, o := range changed {
			fs, _ := FlowsFor(next, nids, o)
			n += len(fs)
		}
	}
	b.ReportMetric(float64(owners), "owners")
	b.ReportMetric(float64(n), "flows")
}

// BenchmarkMemberChange100: one member added to the remote group.
func BenchmarkMemberChange100(b *testing.B) {
	st := benchState(100, 20)
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	next := cloneState(st)
	next.Members["bench-sg"] = append(next.Members["bench-sg"], Member{IP: netip.MustParsePrefix("10.201.0.1/32")})
	b.ReportAllocs()
	var owners, n int
	for i := 0; i < b.N; i++ {
		nids, changed := Update(st, next, ids)
		owners, n = len(changed), 0
		for _, o := range changed {
			fs, _ := FlowsFor(next, nids, o)
			n += len(fs)
		}
	}
	b.ReportMetric(float64(owners), "owners")
	b.ReportMetric(float64(n), "flows")
}

// referenceFlowCount is the reference driver's flow count for a stateful
// port set without AAPs (n4 = IPv4 addresses, n6 = IPv6 addresses + the
// link-local one, m = MACs), read off firewall.py:
//
//	71: 3*n4 + 6*n6 + 5 + r  (ARP+IP per v4 pair, 3 ICMPv6 + NA + IPv6 per v6 pair,
//	                          DHCP per pair + DHCP from 0.0.0.0, 3 anti-server, catch-all;
//	                          r: one RARP flow when the MAC has a v4 pair, 2024.1+)
//	73: m + 3                 81: 10      72+82 conntrack: 12
//	plain rule: 2 per distinct value/mask flow; remote rule: 2 clause flows + 2 accept flows
//	address side: per VLAN, per member, per priority used: 2
//	base: 10 defaults + "+inv+trk" in 72 and 82
func referenceFlowCount(st *State) int {
	n := 12
	vlans := map[uint16]bool{}
	for _, p := range st.Ports {
		n4, n6 := 0, 1
		for _, a := range p.FixedIPs {
			if a.Is4() {
				n4++
			} else {
				n6++
			}
		}
		n += 3*n4 + 6*n6 + 5 + 1 + 3 + 10 + 12
		if n4 > 0 {
			n++ // RARP
		}
		plain, remote := portRules(p, st.Groups)
		// Identical matches from overlapping rules are one OpenFlow entry
		// (the reference re-adds them; OVS keeps one).
		distinct := map[string]bool{}
		for _, r := range plain {
			for _, l4 := range l4Matches(r, r.min, r.max) {
				distinct[of.Match(append(matchTemplate(r, p.OFPort), l4...)).Key()] = true
			}
		}
		n += 2 * len(distinct)
		n += 4 * len(remote) // one remote rule, no merging needed
		vlans[p.VLAN] = true
	}
	for range vlans {
		n += 2 * len(st.Members["bench-sg"])
	}
	return n
}

func TestFlowCountFormula(t *testing.T) {
	st := benchState(100, 20)
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	got := 0
	for _, fs := range Compute(st, ids) {
		got += len(fs)
	}
	want := referenceFlowCount(st)
	t.Logf("100 ports x 20 rules (1 remote group): %d flows (reference formula %d)", got, want)
	if got != want {
		t.Fatalf("flows %d, reference formula %d", got, want)
	}
}
