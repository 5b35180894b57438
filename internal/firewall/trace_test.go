//go:build integration

package firewall

import (
	"fmt"
	"net/netip"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// traceBridge installs the scenario's firewall plus a stand-in for the
// pipeline's table-60 entry (table 0 here) on a private OVS with the VM
// ofports as internal ports and ofport 1 as the uplink.
func traceBridge(t *testing.T, st *State) (*ovstest.OVS, string) {
	t.Helper()
	o := ovstest.Start(t)
	const br = "br-int"
	if err := o.AddBridge(br); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Vsctl("add-port", br, "uplink", "--", "set", "Interface", "uplink", "type=internal", "ofport_request=1"); err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, p := range st.Ports {
		name := fmt.Sprintf("vm%d", p.OFPort)
		if _, err := o.Vsctl("add-port", br, name, "--", "set", "Interface", name, "type=internal", fmt.Sprintf("ofport_request=%d", p.OFPort)); err != nil {
			t.Fatal(err)
		}
		next := 71
		if !p.PortSecurity {
			next = 73
		}
		lines = append(lines,
			fmt.Sprintf("table=0,priority=100,in_port=%d,actions=set_field:%d->reg5,set_field:%d->reg6,resubmit(,%d)", p.OFPort, p.OFPort, p.VLAN, next),
			fmt.Sprintf("table=0,priority=90,in_port=1,dl_vlan=%d,dl_dst=%s,actions=set_field:%d->reg5,set_field:%d->reg6,pop_vlan,resubmit(,81)", p.VLAN, p.MAC, p.OFPort, p.VLAN))
	}
	ids := AssignConjIDs(ConjIDs{}, NeededConjKeys(st))
	for _, fs := range Compute(st, ids) {
		for _, f := range fs {
			lines = append(lines, f.String())
		}
	}
	installAndDump(t, o, br, lines)
	return o, br
}

func trace(t *testing.T, o *ovstest.OVS, br, pkt string, ct ...string) string {
	t.Helper()
	args := []string{"ofproto/trace", br, pkt}
	for _, c := range ct {
		args = append(args, "--ct-next", c)
	}
	out, err := o.Appctl(args...)
	if err != nil {
		t.Fatalf("trace %s: %v\n%s", pkt, err, out)
	}
	// One "Datapath actions:" per pass (recirculation); join them.
	var acts []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "Datapath actions:") {
			acts = append(acts, strings.TrimSpace(strings.TrimPrefix(l, "Datapath actions:")))
		}
	}
	if len(acts) == 0 {
		t.Fatalf("trace %s: no datapath actions\n%s", pkt, out)
	}
	return strings.Join(acts, " | ")
}

var ctOrRecirc = regexp.MustCompile(`(ct|recirc)\([^)]*\)`)

// outputs reports whether datapath actions output the packet anywhere.
func outputs(acts string) bool {
	for _, tok := range strings.Split(ctOrRecirc.ReplaceAllString(acts, ""), ",") {
		if _, err := strconv.Atoi(strings.TrimSpace(tok)); err == nil {
			return true
		}
	}
	return false
}

type traceCase struct {
	name   string
	pkt    string
	ct     []string
	allow  bool
	commit bool // the accepted packet's connection is committed
	noCT   bool // the packet never goes through conntrack
	mark   bool // the connection is committed with ct_mark=1
}

func runTraces(t *testing.T, st *State, cases []traceCase) {
	o, br := traceBridge(t, st)
	for _, c := range cases {
		acts := trace(t, o, br, c.pkt, c.ct...)
		passes := strings.Split(acts, " | ")
		last := passes[len(passes)-1]
		allowed := outputs(last)
		if allowed != c.allow {
			t.Errorf("%s: allowed=%v, want %v (datapath: %s)", c.name, allowed, c.allow, acts)
		}
		if c.commit && !strings.Contains(acts, "ct(commit") {
			t.Errorf("%s: not committed (datapath: %s)", c.name, acts)
		}
		if c.mark && !strings.Contains(acts, "mark=0x1") {
			t.Errorf("%s: not marked invalid (datapath: %s)", c.name, acts)
		}
		if c.noCT && strings.Contains(acts, "ct(") {
			t.Errorf("%s: went through conntrack (datapath: %s)", c.name, acts)
		}
	}
}

// TestTraceReferenceScenario runs packets through the reference scenario's
// firewall in a real OVS (ofproto/trace, conntrack states given per pass).
func TestTraceReferenceScenario(t *testing.T) {
	vm1 := "in_port=3,dl_src=fa:16:3e:18:c9:a5,dl_dst=fa:16:3e:00:00:99,"
	in := "in_port=1,dl_vlan=1,dl_dst=fa:16:3e:18:c9:a5,dl_src=fa:16:3e:00:00:99,"
	runTraces(t, scenarioState(t), []traceCase{
		{name: "egress new tcp", pkt: vm1 + "tcp,nw_src=10.100.0.72,nw_dst=8.8.8.8,tp_dst=80", ct: []string{"trk,new"}, allow: true, commit: true},
		{name: "egress spoofed IPv4 source", pkt: vm1 + "tcp,nw_src=10.100.0.99,nw_dst=8.8.8.8,tp_dst=80", ct: []string{"trk,new"}},
		{name: "egress spoofed MAC", pkt: "in_port=3,dl_src=fa:16:3e:00:00:01,dl_dst=fa:16:3e:00:00:99,tcp,nw_src=10.100.0.72,nw_dst=8.8.8.8,tp_dst=80", ct: []string{"trk,new"}},
		{name: "egress ARP own address", pkt: vm1 + "arp,arp_spa=10.100.0.72,arp_tpa=10.100.0.1,arp_op=1", allow: true},
		{name: "egress ARP spoofed", pkt: vm1 + "arp,arp_spa=10.100.0.1,arp_tpa=10.100.0.2,arp_op=1"},
		// The announcement QEMU sends for a live-migrated VM: RARP request,
		// broadcast, sender = target = the VM's MAC (2024.1+ passes it).
		{name: "egress RARP announcement", pkt: "in_port=3,dl_src=fa:16:3e:18:c9:a5,dl_dst=ff:ff:ff:ff:ff:ff,rarp,arp_op=3,arp_sha=fa:16:3e:18:c9:a5,arp_tha=fa:16:3e:18:c9:a5", allow: true, noCT: true},
		{name: "egress RARP from a foreign MAC", pkt: "in_port=3,dl_src=fa:16:3e:00:00:01,dl_dst=ff:ff:ff:ff:ff:ff,rarp,arp_op=3,arp_sha=fa:16:3e:00:00:01,arp_tha=fa:16:3e:00:00:01"},
		{name: "egress DHCP discover", pkt: vm1 + "udp,nw_src=0.0.0.0,nw_dst=255.255.255.255,udp_src=68,udp_dst=67", allow: true},
		{name: "egress DHCP server", pkt: vm1 + "udp,nw_src=10.100.0.72,nw_dst=10.100.0.9,udp_src=67,udp_dst=68"},
		{name: "egress router advertisement", pkt: vm1 + "icmp6,ipv6_src=fe80::f816:3eff:fe18:c9a5,ipv6_dst=ff02::1,icmpv6_type=134"},
		{name: "egress NS from LLA", pkt: vm1 + "icmp6,ipv6_src=fe80::f816:3eff:fe18:c9a5,ipv6_dst=ff02::1:ff00:1,icmpv6_type=135,nd_target=fe80::1", allow: true},
		{name: "egress established", pkt: vm1 + "tcp,nw_src=10.100.0.72,nw_dst=8.8.8.8,tp_dst=80", ct: []string{"trk,est"}, allow: true},
		{name: "ingress tcp/22 from the /24", pkt: in + "tcp,nw_src=10.100.0.5,nw_dst=10.100.0.72,tp_dst=22", ct: []string{"trk,new"}, allow: true, commit: true},
		{name: "ingress tcp/23 from the /24", pkt: in + "tcp,nw_src=10.100.0.5,nw_dst=10.100.0.72,tp_dst=23", ct: []string{"trk,new"}},
		{name: "ingress tcp/22 from outside the /24", pkt: in + "tcp,nw_src=10.99.0.5,nw_dst=10.100.0.72,tp_dst=22", ct: []string{"trk,new"}},
		{name: "ingress from a remote group member (conjunction)", pkt: in + "tcp,nw_src=10.102.0.29,nw_dst=10.100.0.72,tp_dst=23", ct: []string{"trk,new"}, allow: true, commit: true},
		{name: "ingress reply of an egress connection", pkt: in + "tcp,nw_src=8.8.8.8,nw_dst=10.100.0.72,tp_src=80", ct: []string{"trk,est,rpl"}, allow: true},
		{name: "ingress established but no longer allowed: marked invalid", pkt: in + "tcp,nw_src=10.100.0.5,nw_dst=10.100.0.72,tp_dst=23", ct: []string{"trk,est"}, commit: true, mark: true},
		{name: "ingress invalid", pkt: in + "tcp,nw_src=10.102.0.29,nw_dst=10.100.0.72,tp_dst=23", ct: []string{"trk,inv"}},
		{name: "ingress ARP", pkt: in + "arp,arp_spa=10.100.0.1,arp_tpa=10.100.0.72,arp_op=1", allow: true},
	})
}

func TestTraceStatelessAndUnfiltered(t *testing.T) {
	st := goldenCases()["stateless"]
	st.Ports["p9"] = Port{ID: "p9", OFPort: 9, VLAN: 6, MAC: mac("fa:16:3e:00:00:09"), FixedIPs: []netip.Addr{ip("10.6.0.9")}}
	vm := "in_port=7,dl_src=fa:16:3e:00:00:01,dl_dst=fa:16:3e:00:00:99,"
	in := "in_port=1,dl_vlan=5,dl_dst=fa:16:3e:00:00:01,dl_src=fa:16:3e:00:00:99,"
	runTraces(t, st, []traceCase{
		{name: "stateless egress", pkt: vm + "udp,nw_src=10.0.0.5,nw_dst=8.8.8.8,udp_dst=53", allow: true, noCT: true},
		{name: "stateless egress spoofed", pkt: vm + "udp,nw_src=10.0.0.6,nw_dst=8.8.8.8,udp_dst=53"},
		{name: "stateless ingress tcp/80", pkt: in + "tcp,nw_src=1.2.3.4,nw_dst=10.0.0.5,tp_dst=80", allow: true, noCT: true},
		{name: "stateless ingress tcp/81", pkt: in + "tcp,nw_src=1.2.3.4,nw_dst=10.0.0.5,tp_dst=81", noCT: true},
		{name: "stateless ingress from group member (conjunction)", pkt: in + "udp,nw_src=10.0.0.5,nw_dst=10.0.0.5,udp_dst=9", allow: true, noCT: true},
		{name: "port security disabled: anything goes", pkt: "in_port=9,dl_src=fa:16:3e:00:00:42,dl_dst=fa:16:3e:00:00:99,udp,nw_src=1.1.1.1,nw_dst=8.8.8.8,udp_src=67,udp_dst=68", allow: true, noCT: true},
	})
}
