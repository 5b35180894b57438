package agent

import (
	"fmt"
	"net"
	"net/netip"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/neutron"
	of "github.com/ovsagent/ovsagent/internal/openflow"
)

// A rule whose remote_ip_prefix cannot be read must not become a rule from
// anywhere (issue 18 item 2): the decoded rule yields no accept flow.
func TestRuleOfUnreadablePrefixNeverWidens(t *testing.T) {
	p22 := 22
	for _, prefix := range []string{"10.0.0.300/24", "10.0.0.0/33", "garbage", "::ffff:10.0.0.0/200"} {
		r, ok := ruleOf(&neutron.SecurityGroupRule{ID: "r1", Direction: "ingress", Ethertype: "IPv4", Protocol: "tcp",
			PortRangeMin: &p22, PortRangeMax: &p22, RemoteIPPrefix: prefix})
		if !ok {
			continue // dropped outright: fail-closed
		}
		mac, _ := net.ParseMAC("fa:16:3e:00:00:01")
		p := firewall.Port{ID: "p1", OFPort: 7, VLAN: 5, MAC: mac, FixedIPs: []netip.Addr{netip.MustParseAddr("10.0.0.5")}, PortSecurity: true, SecurityGroupIDs: []string{"sg"}}
		st := &firewall.State{Ports: map[string]firewall.Port{"p1": p}, Groups: map[string]firewall.SecurityGroup{"sg": {ID: "sg", Rules: []firewall.Rule{r}}}}
		for _, f := range firewall.PortFlows(st, p, firewall.ConjIDs{}) {
			if f.Table != firewall.TableRulesIngress || f.Priority < 70 {
				continue
			}
			src := false
			for _, m := range f.Match {
				src = src || m.Field == of.FieldIPv4Src
			}
			if !src {
				t.Errorf("prefix %q: rule flow without the source match: %s", prefix, f)
			}
		}
	}
}

// What the firewall skips is logged and counted once while it lasts, and
// the other rules of the group are installed.
func TestFirewallSkipsAreCountedOnce(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	p22, p80, big := 22, 80, 70000
	srv.groups["sg1"] = firewall.SecurityGroup{ID: "sg1", Rules: []firewall.Rule{
		{ID: "bad", Direction: firewall.Ingress, EtherType: firewall.IPv4, Protocol: "tcp", PortRangeMin: &p22, PortRangeMax: &big},
		{ID: "good", Direction: firewall.Ingress, EtherType: firewall.IPv4, Protocol: "tcp", PortRangeMin: &p80, PortRangeMax: &p80},
	}}
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.update("p1", func(d *Device) { d.SecurityGroups = []string{"sg1"} })
	opt := testOpts(false)
	opt.Pipeline.FirewallDriver, opt.Pipeline.EnableSecurityGroup = "openvswitch", true
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })
	if !fl.has("br-int", "tp_dst=80") {
		t.Errorf("the good rule is missing:\n%s", strings.Join(fl.dump("br-int"), "\n"))
	}
	for _, l := range fl.dump("br-int") {
		if strings.Contains(l, "table=82") && strings.Contains(l, "tcp") && !strings.Contains(l, "tp_dst=") && !strings.Contains(l, "conj") && strings.Contains(l, "priority=77") {
			t.Errorf("the bad rule widened to every port: %s", l)
		}
	}
	// Another change re-reads the groups: still one count.
	h.a.Notify(SecurityGroupChanged{GroupIDs: []string{"sg1"}})
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("in sync again", func() bool { return h.inSync() })
	want := `ovsagent_firewall_skipped_total{kind="rule",reason="port-range"} 1`
	h.waitFor("skip counted", func() bool { return strings.Contains(string(h.m.AppendText(nil)), want) })
	if txt := string(h.m.AppendText(nil)); !strings.Contains(txt, want) {
		t.Errorf("metrics lack %s", want)
	}
}

// A segmentation id outside its type's range leaves the port dead, counted
// and logged, instead of wiring it into the network whose id the truncated
// value names (VLAN 4196 was VLAN 100, VNI 2^24+100 was VNI 100).
func TestOutOfRangeSegmentLeavesPortDead(t *testing.T) {
	for _, c := range []struct {
		typ   string
		seg   int
		alias string
	}{{"vlan", 4196, "dl_vlan=100"}, {"vxlan", 1<<24 + 100, "tun_id=0x64"}, {"vlan", 1<<32 + 100, "dl_vlan=100"}} {
		t.Run(fmt.Sprintf("%s-%d", c.typ, c.seg), func(t *testing.T) {
			sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
			srv.addPort("p1", "net-a", c.typ, c.seg, "fa:16:3e:00:00:01")
			h := start(t, sw, fl, srv, testOpts(false))
			sw.snapshot()
			sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
			want := `ovsagent_malformed_messages_total{reason="segmentation-id",topic="port-details"} 1`
			h.waitFor("bad segment counted", func() bool { return strings.Contains(string(h.m.AppendText(nil)), want) })
			h.waitFor("port flows computed", func() bool { return fl.owners("br-int")["port:p1"] > 0 })
			for _, br := range []string{"br-int", "br-tun", "br-phys"} {
				for _, l := range fl.dump(br) {
					if strings.Contains(l, c.alias) || strings.Contains(l, "set_field:4196") {
						t.Errorf("%s: flow of the truncated segment: %s", br, l)
					}
				}
			}
			if tag := sw.tag("tap1"); tag != DeadVLAN {
				t.Errorf("tap1 tag %d, want the dead VLAN", tag)
			}
		})
	}
}
