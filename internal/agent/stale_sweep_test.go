package agent

import (
	"strings"
	"sync"
	"testing"

	"github.com/ovsagent/ovsagent/internal/openflow"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// staleAllow is an allow rule of the previous run that the security groups
// no longer have: tcp/22 to the port with that ofport.
func staleAllow(ofport uint32) openflow.Flow {
	return openflow.Flow{Table: 82, Priority: 70, Cookie: 0xdead,
		Match:   openflow.Match{openflow.Reg(5, ofport), openflow.EthType(openflow.EthTypeIPv4), openflow.IPProto(6), openflow.TCPDst(22, 0xffff)},
		Actions: []openflow.Action{openflow.Output{Port: ofport}}}
}

// twoPortTakeover is a host an earlier run wired: p1 (ofport 11) and p2
// (ofport 12) on net-a, VLAN 3, and br-int holding that run's flows,
// among them an allow rule per port the groups no longer have.
func twoPortTakeover(t *testing.T) (*fakeSwitch, *fakeFlows, *fakeServer) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	oc := func() map[string]string {
		return map[string]string{"net_uuid": "net-a", "network_type": "vxlan", "physical_network": "None", "segmentation_id": "100", "tag": "3"}
	}
	for i, id := range []string{"p1", "p2"} {
		mac := "fa:16:3e:00:00:0" + string(rune('1'+i))
		srv.addPort(id, "net-a", "vxlan", 100, mac)
		srv.update(id, func(d *Device) { d.Status = "ACTIVE" })
		name := "tap" + id[1:]
		sw.rows[name] = &VIF{PortID: id, Name: name, MAC: mac, OFPort: int32(11 + i), Tag: 3, UUID: "u" + id, OtherConfig: oc()}
	}
	fl.tables["br-int"] = map[string]fakeEntry{}
	for _, f := range []openflow.Flow{staleAllow(11), staleAllow(12),
		{Table: 60, Priority: 100, Cookie: 0xdead, Match: openflow.Match{openflow.InPort(12)}, Actions: []openflow.Action{openflow.SetReg(5, 12), openflow.ResubmitTable(71)}},
	} {
		fl.tables["br-int"][f.Key()] = fakeEntry{flow: f}
	}
	return sw, fl, srv
}

func ovsFirewallOpts() Options {
	opt := testOpts(true)
	opt.Pipeline.FirewallDriver = "openvswitch"
	opt.Pipeline.EnableSecurityGroup = true
	return opt
}

// TestStaleAllowFlowsGoWhileOnePortsDetailsFail: after a restart, one port
// whose details the server keeps refusing does not keep the previous run's
// flows (allow rules the groups no longer have) in place: they are swept
// by the time the server refused it detailsGiveUp times, and that port is
// wired dead meanwhile (its own stale allow rule goes too, nothing passes
// it unfiltered). Once its details come, it is wired as usual.
func TestStaleAllowFlowsGoWhileOnePortsDetailsFail(t *testing.T) {
	sw, fl, srv := twoPortTakeover(t)
	srv.setRefuse("p2", true)
	var mu sync.Mutex
	refusedAtSweep := -1
	fl.onSweep = func(br string) {
		if br == "br-int" {
			mu.Lock()
			refusedAtSweep = srv.refusedCount("p2")
			mu.Unlock()
		}
	}
	swept := func() int {
		mu.Lock()
		defer mu.Unlock()
		return refusedAtSweep
	}
	h := start(t, sw, fl, srv, ovsFirewallOpts())
	sw.snapshot()
	// Bounded: today's code never sweeps; 20 refusals are ample to see it.
	h.waitFor("br-int swept, or p2 refused 20 times", func() bool { return swept() >= 0 || srv.refusedCount("p2") >= 20 })
	if n := swept(); n < 0 || n > detailsGiveUp {
		t.Fatalf("br-int swept after %d refusals of p2 (-1: not swept after %d), want at most %d; stale flows:\n%s",
			n, srv.refusedCount("p2"), detailsGiveUp, strings.Join(fl.dump("br-int"), "\n"))
	}
	if own := fl.owners("br-int"); own[""] != 0 {
		t.Errorf("%d flows of the previous run left on br-int:\n%s", own[""], strings.Join(fl.dump("br-int"), "\n"))
	}
	for _, f := range []openflow.Flow{staleAllow(11), staleAllow(12)} {
		if fl.has("br-int", strings.TrimSpace(f.String())) {
			t.Errorf("stale allow rule left: %s", f.String())
		}
	}
	// p2: fail closed, on the dead VLAN with its drop flow and no firewall.
	if sw.tag("tap2") != DeadVLAN || !fl.has("br-int", "priority=2,in_port=12 actions=drop") {
		t.Errorf("p2 not dead: tag %d\n%s", sw.tag("tap2"), strings.Join(fl.dump("br-int"), "\n"))
	}
	if fl.owners("br-int")["fw:port:p2"] != 0 {
		t.Errorf("p2 has firewall flows without details")
	}
	// p1 kept its VLAN and its place.
	if sw.tag("tap1") != 3 || fl.owners("br-int")[pipeline.OwnerPort("p1")] == 0 || srv.status("p1") != "ACTIVE" {
		t.Errorf("p1: tag %d, status %s, owners %v", sw.tag("tap1"), srv.status("p1"), fl.owners("br-int"))
	}
	if h.inSync() {
		t.Errorf("in sync while p2 has no details")
	}

	srv.setRefuse("p2", false)
	h.waitFor("p2 wired once its details come", func() bool {
		return sw.tag("tap2") == 3 && srv.status("p2") == "ACTIVE" && h.inSync()
	})
	if fl.has("br-int", "priority=2,in_port=12 actions=drop") || fl.owners("br-int")["fw:port:p2"] == 0 {
		t.Errorf("p2 not wired up:\n%s", strings.Join(fl.dump("br-int"), "\n"))
	}
}

// TestTakeoverServerDownKeepsDataplane: a server that answers nothing (the
// cache then fails every port without an error) is not a port refusing
// its details: nothing is swept or wired dead, the previous run's flows
// keep forwarding until the server is back.
func TestTakeoverServerDownKeepsDataplane(t *testing.T) {
	sw, fl, srv := twoPortTakeover(t)
	srv.downAsFailed = true
	srv.setDown(true) // tunnel_sync too: the shared fakes.TunnelServer has its own switch
	calls := 0
	srv.onDevices = func() { calls++ } // under srv.mu
	devCalls := func() int {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return calls
	}
	h := start(t, sw, fl, srv, ovsFirewallOpts())
	sw.snapshot()
	h.waitFor("10 details calls", func() bool { return devCalls() >= 10 })
	if own := fl.owners("br-int"); own[""] != 3 {
		t.Errorf("%d of the previous run's 3 flows left while the server answered nothing:\n%s", own[""], strings.Join(fl.dump("br-int"), "\n"))
	}
	if sw.tag("tap1") != 3 || sw.tag("tap2") != 3 || sw.writes != 0 {
		t.Errorf("ports re-tagged while the server answered nothing: %d, %d (%d writes)", sw.tag("tap1"), sw.tag("tap2"), sw.writes)
	}
	srv.setDown(false)
	h.waitFor("in sync once the server is back", h.inSync)
	if own := fl.owners("br-int"); own[""] != 0 {
		t.Errorf("%d stale flows left", own[""])
	}
}
