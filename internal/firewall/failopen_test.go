//go:build integration

package firewall

import (
	"strings"
	"testing"

	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// mappedState: ingress tcp/22 over IPv6 and IPv4 from remote group sgB,
// whose only member is written as an IPv4-mapped IPv6 address; the port
// has an IPv4-mapped allowed address pair and may send any IPv6.
func mappedState() *State {
	st := onePort(SecurityGroup{ID: sgA, Rules: []Rule{
		{Direction: Ingress, EtherType: IPv6, Protocol: "tcp", PortRangeMin: iptr(22), PortRangeMax: iptr(22), RemoteGroupID: sgB},
		{Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(22), PortRangeMax: iptr(22), RemoteGroupID: sgB},
		{Direction: Egress, EtherType: IPv6},
	}}, func(p *Port) {
		p.FixedIPs = append(p.FixedIPs, ip("2001:db8::5"))
		p.AllowedAddressPairs = []AddressPair{{IP: pfx("::ffff:10.0.0.7/128")}}
	})
	st.Members[sgB] = []Member{{IP: pfx("::ffff:10.0.0.9/128"), MAC: mac("fa:16:3e:00:00:09")}}
	return st
}

// An IPv4-mapped member is an IPv6 member (as in the reference, which files
// members by netaddr's version): its address flows match ipv6_src on it, and
// no address flow of the firewall goes without an address match.
func TestMappedIPv4MemberKeepsSourceMatch(t *testing.T) {
	ls := computeLines(mappedState())
	var clause1 []string
	for _, l := range only(ls, "82") {
		if strings.Contains(l, ",1/2)") {
			clause1 = append(clause1, l)
		}
	}
	if len(clause1) == 0 {
		t.Fatalf("no address flows:\n%s", strings.Join(only(ls, "82"), "\n"))
	}
	for _, l := range clause1 {
		if !strings.Contains(l, "ipv6_src=::ffff:10.0.0.9") || !strings.Contains(l, "ipv6") {
			t.Errorf("address flow without the member's IPv6 source: %s", l)
		}
	}
	// The mapped pair is an IPv6 source of the port, never "any" nor IPv4.
	for _, l := range only(ls, "71") {
		if strings.Contains(l, "ipv6_src=::,") || strings.Contains(l, "nw_src=10.0.0.7") {
			t.Errorf("mapped pair turned into a wider or IPv4 match: %s", l)
		}
	}
	if !containsLine(only(ls, "71"), "ipv6_src=::ffff:10.0.0.7") {
		t.Errorf("mapped pair not allowed as an IPv6 source:\n%s", strings.Join(only(ls, "71"), "\n"))
	}
}

func containsLine(ls []string, sub string) bool {
	for _, l := range ls {
		if strings.Contains(l, sub) {
			return true
		}
	}
	return false
}

// TestTraceMappedIPv4Member: issue 18 item 1 on a real OVS.
func TestTraceMappedIPv4Member(t *testing.T) {
	in := "in_port=1,dl_vlan=5,dl_dst=fa:16:3e:00:00:01,dl_src=fa:16:3e:00:00:09,"
	vm := "in_port=7,dl_src=fa:16:3e:00:00:01,dl_dst=fa:16:3e:00:00:99,"
	runTraces(t, mappedState(), []traceCase{
		{name: "tcp/22 from a non-member IPv6", pkt: in + "tcp6,ipv6_src=2001:db8::99,ipv6_dst=2001:db8::5,tp_dst=22", ct: []string{"trk,new"}},
		{name: "tcp/22 from the mapped member", pkt: in + "tcp6,ipv6_src=::ffff:10.0.0.9,ipv6_dst=2001:db8::5,tp_dst=22", ct: []string{"trk,new"}, allow: true, commit: true},
		{name: "tcp/22 from the member's IPv4 (not a member for IPv4)", pkt: in + "tcp,nw_src=10.0.0.9,nw_dst=10.0.0.5,tp_dst=22", ct: []string{"trk,new"}},
		{name: "egress from the mapped pair", pkt: vm + "tcp6,ipv6_src=::ffff:10.0.0.7,ipv6_dst=2001:db8::1,tp_dst=80", ct: []string{"trk,new"}, allow: true},
		{name: "egress from an unowned IPv6 source", pkt: vm + "tcp6,ipv6_src=2001:db8::77,ipv6_dst=2001:db8::1,tp_dst=80", ct: []string{"trk,new"}},
		{name: "egress from the unspecified IPv6 source", pkt: vm + "tcp6,ipv6_src=::,ipv6_dst=2001:db8::1,tp_dst=80", ct: []string{"trk,new"}},
	})
}

// badValuesState holds rules whose values do not fit their fields next to
// one good rule (tcp/80) that must survive them.
func badValuesState() *State {
	return onePort(SecurityGroup{ID: sgA, Rules: []Rule{
		{ID: "big", Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(22), PortRangeMax: iptr(70000)},
		{ID: "neg", Direction: Ingress, EtherType: IPv4, Protocol: "udp", PortRangeMin: iptr(-65514), PortRangeMax: iptr(53)},
		{ID: "icmp", Direction: Ingress, EtherType: IPv4, Protocol: "icmp", PortRangeMin: iptr(264)},
		{ID: "code", Direction: Ingress, EtherType: IPv4, Protocol: "icmp", PortRangeMin: iptr(0), PortRangeMax: iptr(-256)},
		{ID: "good", Direction: Ingress, EtherType: IPv4, Protocol: "tcp", PortRangeMin: iptr(80), PortRangeMax: iptr(80)},
	}})
}

// Values that do not fit a field never widen a match nor wrap: the rule is
// left out, the others stay.
func TestUnrepresentableValuesAreSkipped(t *testing.T) {
	ls := only(computeLines(badValuesState()), "82")
	for _, l := range ls {
		if !strings.Contains(l, "priority=7") {
			continue
		}
		if !strings.Contains(l, "tp_dst=80") {
			t.Errorf("flow of a rule that cannot be represented: %s", l)
		}
	}
	if !containsLine(ls, "tcp,reg5=0x7,tp_dst=80") {
		t.Errorf("the good rule is gone:\n%s", strings.Join(ls, "\n"))
	}
}

// TestTraceUnrepresentableValues: issue 18 item 2 on a real OVS.
func TestTraceUnrepresentableValues(t *testing.T) {
	in := "in_port=1,dl_vlan=5,dl_dst=fa:16:3e:00:00:01,dl_src=fa:16:3e:00:00:09,"
	runTraces(t, badValuesState(), []traceCase{
		{name: "tcp/23 (rule 22-70000)", pkt: in + "tcp,nw_src=1.2.3.4,nw_dst=10.0.0.5,tp_dst=23", ct: []string{"trk,new"}},
		{name: "tcp/443 (rule 22-70000)", pkt: in + "tcp,nw_src=1.2.3.4,nw_dst=10.0.0.5,tp_dst=443", ct: []string{"trk,new"}},
		{name: "udp/30 (rule -65514..53)", pkt: in + "udp,nw_src=1.2.3.4,nw_dst=10.0.0.5,udp_dst=30", ct: []string{"trk,new"}},
		{name: "icmp echo (rule type 264)", pkt: in + "icmp,nw_src=1.2.3.4,nw_dst=10.0.0.5,icmp_type=8,icmp_code=0", ct: []string{"trk,new"}},
		{name: "icmp echo reply code 0 (rule type 0 code -256)", pkt: in + "icmp,nw_src=1.2.3.4,nw_dst=10.0.0.5,icmp_type=0,icmp_code=0", ct: []string{"trk,new"}},
		{name: "tcp/80 (the good rule)", pkt: in + "tcp,nw_src=1.2.3.4,nw_dst=10.0.0.5,tp_dst=80", ct: []string{"trk,new"}, allow: true, commit: true},
	})
}

// legacyICMPv6State: IPv6 rules in the forms old database rows carry.
func legacyICMPv6State() *State {
	return onePort(SecurityGroup{ID: sgA, Rules: []Rule{
		{Direction: Ingress, EtherType: IPv6, Protocol: "1", PortRangeMin: iptr(128), PortRangeMax: iptr(0)},
		{Direction: Ingress, EtherType: IPv6, Protocol: "icmp", PortRangeMin: iptr(129)},
		{Direction: Ingress, EtherType: IPv6, Protocol: "icmpv6", PortRangeMin: iptr(1)},
	}}, func(p *Port) { p.FixedIPs = append(p.FixedIPs, ip("2001:db8::5")) })
}

// Issue 18 item 5 (normalisation): IPv6 with protocol "1", "icmp" or
// "icmpv6" is ipv6-icmp, as neutron's server rewrites such rules.
func TestLegacyIPv6ICMPIsICMPv6(t *testing.T) {
	st := legacyICMPv6State()
	p := st.Ports["p1"]
	var n int
	for _, f := range PortFlows(st, p, AssignConjIDs(ConjIDs{}, NeededConjKeys(st))) {
		if f.Table != TableRulesIngress || f.Priority < 70 {
			continue
		}
		n++
		for _, m := range f.Match {
			if m.Field == of.FieldICMPv4Type || m.Field == of.FieldICMPv4Code || (m.Field == of.FieldIPProto && m.Value != of.IPProtoICMPv6) {
				t.Errorf("IPv6 rule flow with an ICMPv4 match: %s", f)
			}
		}
	}
	if n != 6 {
		t.Errorf("%d rule flows, want 6 (3 rules x 2 conntrack variants)", n)
	}
}

// TestTraceLegacyIPv6ICMP: OVS accepts the flows and echo requests pass.
func TestTraceLegacyIPv6ICMP(t *testing.T) {
	in := "in_port=1,dl_vlan=5,dl_dst=fa:16:3e:00:00:01,dl_src=fa:16:3e:00:00:09,"
	runTraces(t, legacyICMPv6State(), []traceCase{
		{name: "echo request", pkt: in + "icmp6,ipv6_src=2001:db8::9,ipv6_dst=2001:db8::5,icmpv6_type=128,icmpv6_code=0", ct: []string{"trk,new"}, allow: true, commit: true},
		{name: "echo reply", pkt: in + "icmp6,ipv6_src=2001:db8::9,ipv6_dst=2001:db8::5,icmpv6_type=129,icmpv6_code=0", ct: []string{"trk,new"}, allow: true, commit: true},
		{name: "destination unreachable", pkt: in + "icmp6,ipv6_src=2001:db8::9,ipv6_dst=2001:db8::5,icmpv6_type=1,icmpv6_code=3", ct: []string{"trk,new"}, allow: true, commit: true},
		{name: "packet too big (no rule)", pkt: in + "icmp6,ipv6_src=2001:db8::9,ipv6_dst=2001:db8::5,icmpv6_type=2,icmpv6_code=0", ct: []string{"trk,new"}},
	})
}
