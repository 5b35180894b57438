//go:build integration

package agent

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/ovsagent/ovsagent/internal/firewall"
	"github.com/ovsagent/ovsagent/internal/metrics"
	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// metricValue is the value of the exposition's sample line starting with
// sample (name and labels), -1 when there is none.
func metricValue(m *metrics.Metrics, sample string) float64 {
	for _, l := range strings.Split(string(m.AppendText(nil)), "\n") {
		if v, ok := strings.CutPrefix(l, sample+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}

// TestRejectedOwnerDoesNotStopOtherPorts: the switch refuses one port's
// flows. The other port is wired and reported; the refused one is counted,
// retried with back-off, kept on the dead VLAN and not reported up, and
// the agent is not in sync; once the switch takes its flows it is wired.
func TestRejectedOwnerDoesNotStopOtherPorts(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.addPort("p2", "net-a", "vxlan", 100, "fa:16:3e:00:00:02")
	fl.reject = func(owner string) bool { return owner == "port:p2" }
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")

	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	if sw.tag("tap1") != 1 || fl.owners("br-int")["port:p1"] == 0 {
		t.Errorf("p1: tag %d, %d flows; want VLAN 1 and its flows", sw.tag("tap1"), fl.owners("br-int")["port:p1"])
	}
	h.waitFor("port:p2 retried", func() bool { return fl.rejected("port:p2") >= 3 })
	if st := srv.status("p2"); st == "ACTIVE" {
		t.Errorf("p2 reported ACTIVE while the switch refuses its flows")
	}
	if got := sw.tag("tap2"); got != DeadVLAN {
		t.Errorf("p2 tag %d, want the dead VLAN while it has none of its flows", got)
	}
	if n := fl.owners("br-int")["port:p2"]; n != 0 {
		t.Errorf("p2 has %d flows installed", n)
	}
	if v := metricValue(h.m, `ovsagent_flow_owner_rejected_total{bridge="br-int",kind="port"}`); v < 3 {
		t.Errorf("rejections counted: %v, want ≥ 3", v)
	}
	if v := metricValue(h.m, `ovsagent_flow_owners_rejected{bridge="br-int"}`); v != 1 {
		t.Errorf("owners held back: %v, want 1", v)
	}
	if h.inSync() {
		t.Errorf("in sync while an owner's flows are refused")
	}
	e, err := h.a.Explain(context.Background(), "p2")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := e.Write(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"local VLAN  4095 (dead)", "rejected    port:p2"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("explain p2 lacks %q:\n%s", want, b.String())
		}
	}

	fl.setReject(nil)
	h.waitFor("p2 ACTIVE on VLAN 1", func() bool { return srv.status("p2") == "ACTIVE" && sw.tag("tap2") == 1 })
	h.waitFor("in sync", h.inSync)
	if v := metricValue(h.m, `ovsagent_flow_owners_rejected{bridge="br-int"}`); v != 0 {
		t.Errorf("owners held back after the switch took them: %v", v)
	}
}

// TestRejectedOwnerKeepsItsEarlierFlows: a wired port whose new flows the
// switch refuses keeps its earlier ones and its VLAN (not opened, not cut
// off), and gets the new ones once the switch takes them.
func TestRejectedOwnerKeepsItsEarlierFlows(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(false))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	h.waitFor("in sync", h.inSync)
	if !fl.has("br-int", "10.0.0.2") {
		t.Fatalf("no anti-spoofing flow for p1's address:\n%s", strings.Join(fl.dump("br-int"), "\n"))
	}

	fl.setReject(func(owner string) bool { return owner == "port:p1" })
	srv.update("p1", func(d *Device) { d.FixedIPs = []FixedIP{{SubnetID: "s", IP: "10.0.0.77"}} })
	h.a.Notify(PortChanged{PortID: "p1"})
	h.waitFor("port:p1 retried", func() bool { return fl.rejected("port:p1") >= 2 })
	if !fl.has("br-int", "10.0.0.2") || fl.has("br-int", "10.0.0.77") {
		t.Errorf("p1 is not on its earlier flows:\n%s", strings.Join(fl.dump("br-int"), "\n"))
	}
	if got := sw.tag("tap1"); got != 1 {
		t.Errorf("p1 tag %d, want its VLAN 1 (it keeps its earlier flows)", got)
	}

	fl.setReject(nil)
	h.waitFor("p1's new flows", func() bool { return fl.has("br-int", "10.0.0.77") && !fl.has("br-int", "10.0.0.2") })
	h.waitFor("in sync", h.inSync)
}

// poisonFlows is the real OpenFlow adapter with a flow OVS rejects added
// to the owners named in poison: what a security group rule the switch
// cannot match (IPv6, protocol 1, an ICMP type) made of a port's flows.
type poisonFlows struct {
	*OFBridges
	mu     sync.Mutex
	poison map[string]bool
	sent   map[string]int
}

func (f *poisonFlows) Apply(ctx context.Context, br string, ch FlowChange) error {
	f.mu.Lock()
	if len(f.poison) > 0 {
		set := make(map[string][]openflow.Flow, len(ch.Set))
		for owner, fs := range ch.Set {
			if f.poison[owner] && len(fs) > 0 {
				bad := openflow.Flow{Table: 72, Priority: 70,
					Match:   openflow.Match{openflow.EthType(openflow.EthTypeIPv6), openflow.IPProto(1), openflow.ICMPType(8)},
					Actions: []openflow.Action{openflow.ResubmitTable(73)}}
				fs = append(slices.Clone(fs), bad)
				f.sent[owner]++
			}
			set[owner] = fs
		}
		ch.Set = set
	}
	f.mu.Unlock()
	return f.OFBridges.Apply(ctx, br, ch)
}

func (f *poisonFlows) sends(owner string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.sent[owner]
}

func (f *poisonFlows) cure() {
	f.mu.Lock()
	defer f.mu.Unlock()
	clear(f.poison)
}

// agentTrace runs a packet through the bridge (each conntrack pass sees a
// new connection) and returns the last pass's datapath actions.
func agentTrace(t *testing.T, o *ovstest.OVS, br, pkt string) string {
	t.Helper()
	out, err := o.Appctl("ofproto/trace", br, pkt, "--ct-next", "trk,new", "--ct-next", "trk,new", "--ct-next", "trk,new")
	if err != nil {
		t.Fatalf("trace %s: %v\n%s", pkt, err, out)
	}
	last := ""
	for _, l := range strings.Split(out, "\n") {
		if a, ok := strings.CutPrefix(l, "Datapath actions:"); ok {
			last = strings.TrimSpace(a)
		}
	}
	return last
}

// dpPort is the datapath port number of an interface (dpif/show's
// "name ofport/dpport").
func dpPort(t *testing.T, o *ovstest.OVS, name string) string {
	t.Helper()
	out, err := o.Appctl("dpif/show")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) >= 2 && f[0] == name {
			if _, dp, ok := strings.Cut(strings.TrimSuffix(f[1], ":"), "/"); ok {
				return dp
			}
		}
	}
	t.Fatalf("%s not in dpif/show:\n%s", name, out)
	return ""
}

func outputsTo(acts, dp string) bool {
	for _, tok := range strings.Split(acts, ",") {
		if strings.TrimSpace(tok) == dp {
			return true
		}
	}
	return false
}

// TestRealOVSRejectedOwnerDoesNotStopOtherPorts: on a real OVS, one port's
// firewall flows carry a flow ovs-vswitchd rejects. The other port is
// wired and reported ACTIVE; the rejected owner is counted and retried;
// its port is not reported, and neither sends nor receives (a trace from
// the other port does not reach it, its own packets are dropped); once its
// flows are acceptable it is wired and reachable.
func TestRealOVSRejectedOwnerDoesNotStopOtherPorts(t *testing.T) {
	o := ovstest.Start(t)
	if err := o.AddBridge("br-phys"); err != nil {
		t.Fatal(err)
	}
	srv := newFakeServer()
	srv.groups["sg1"] = firewall.SecurityGroup{ID: "sg1", Rules: []firewall.Rule{
		{ID: "e4", Direction: firewall.Egress, EtherType: firewall.IPv4},
		{ID: "icmp", Direction: firewall.Ingress, EtherType: firewall.IPv4, Protocol: "icmp"},
	}}
	for i, id := range []string{"p1", "p2"} {
		srv.addPort(id, "net-a", "vxlan", 100, "fa:16:3e:00:00:0"+strconv.Itoa(i+1))
		srv.update(id, func(d *Device) { d.SecurityGroups = []string{"sg1"} })
	}
	var pf *poisonFlows
	h, _ := runRealAgentWith(t, o, srv, func(of *OFBridges) Flows {
		pf = &poisonFlows{OFBridges: of, poison: map[string]bool{firewall.OwnerPort("p2"): true}, sent: map[string]int{}}
		return pf
	})
	for i, id := range []string{"p2", "p1"} {
		name, mac := "tap"+id, "fa:16:3e:00:00:0"+strconv.Itoa(2-i)
		if _, err := o.Vsctl("add-port", "br-int", name, "--", "set", "Interface", name, "type=internal",
			"external_ids:iface-id="+id, "external_ids:attached-mac="+mac); err != nil {
			t.Fatal(err)
		}
	}
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	h.waitFor("p2's owner retried", func() bool { return pf.sends(firewall.OwnerPort("p2")) >= 3 })
	if st := srv.status("p2"); st == "ACTIVE" {
		t.Errorf("p2 reported ACTIVE while its firewall flows are rejected")
	}
	if v := metricValue(h.m, `ovsagent_flow_owner_rejected_total{bridge="br-int",kind="fw:port"}`); v < 2 {
		t.Errorf("rejections counted: %v, want ≥ 2", v)
	}
	if h.inSync() {
		t.Errorf("in sync while p2's flows are rejected")
	}
	flows := dumpFlows(t, o, "br-int")
	if count(flows, "table=73, priority=100,reg6=0x1,dl_dst=fa:16:3e:00:00:01") != 1 || count(flows, "table=73, priority=100,reg6=0x1,dl_dst=fa:16:3e:00:00:02") != 0 {
		t.Errorf("br-int: p1's firewall flows missing or some of p2's in:\n%s", strings.Join(flows, "\n"))
	}
	ofp := func(name string) string {
		out, err := o.Vsctl("get", "Interface", name, "ofport")
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(out)
	}
	p1to2 := "in_port=" + ofp("tapp1") + ",dl_src=fa:16:3e:00:00:01,dl_dst=fa:16:3e:00:00:02,icmp,nw_src=10.0.0.2,nw_dst=10.0.0.3,icmp_type=8"
	p2to1 := "in_port=" + ofp("tapp2") + ",dl_src=fa:16:3e:00:00:02,dl_dst=fa:16:3e:00:00:01,icmp,nw_src=10.0.0.3,nw_dst=10.0.0.2,icmp_type=8"
	dp1, dp2 := dpPort(t, o, "tapp1"), dpPort(t, o, "tapp2")
	if acts := agentTrace(t, o, "br-int", p1to2); outputsTo(acts, dp2) {
		t.Errorf("p1 → p2 reaches p2 (dp port %s) while p2's firewall flows are rejected: %s", dp2, acts)
	}
	if acts := agentTrace(t, o, "br-int", p2to1); outputsTo(acts, dp1) {
		t.Errorf("p2 → p1 leaves p2 while its firewall flows are rejected: %s", acts)
	}

	pf.cure()
	h.waitFor("p2 ACTIVE", func() bool { return srv.status("p2") == "ACTIVE" })
	h.waitFor("in sync", h.inSync)
	if acts := agentTrace(t, o, "br-int", p1to2); !outputsTo(acts, dp2) {
		t.Errorf("p1 → p2 (allowed ICMP) does not reach p2 (dp port %s) once its flows are in: %s", dp2, acts)
	}
}

func TestOwnerKind(t *testing.T) {
	for owner, want := range map[string]string{
		"base": "base", "port:p1": "port", "net:n1/100": "net", "tun:fd00::1": "tun",
		"fw:base": "fw:base", "fw:port:p1": "fw:port", "fw:conj:12": "fw:conj", "physnet:physnet1": "physnet",
	} {
		if got := ownerKind(owner); got != want {
			t.Errorf("ownerKind(%q) = %q, want %q", owner, got, want)
		}
	}
}

// TestRejectedAfterRestartReportsDown: after a restart the agent cannot
// tell which of the earlier run's flows were a port's; a port whose flows
// the switch now rejects is moved to the dead VLAN and reported DOWN (the
// server had it ACTIVE), and is ACTIVE again once the switch takes them.
func TestRejectedAfterRestartReportsDown(t *testing.T) {
	sw, fl, srv := wiredThenStopped(t, "p1", "p2")
	fl.newRound()
	fl.reject = func(owner string) bool { return owner == "port:p2" }
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	h.waitFor("p2 DOWN on the dead VLAN", func() bool { return srv.status("p2") == "DOWN" && sw.tag("tapp2") == DeadVLAN })
	if srv.status("p1") != "ACTIVE" || sw.tag("tapp1") != 1 {
		t.Errorf("p1: %s on VLAN %d, want ACTIVE on 1", srv.status("p1"), sw.tag("tapp1"))
	}
	fl.setReject(nil)
	h.waitFor("p2 ACTIVE on VLAN 1", func() bool { return srv.status("p2") == "ACTIVE" && sw.tag("tapp2") == 1 })
	h.waitFor("in sync", h.inSync)
}
