package agent

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
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

// takeoverPuller is the server's bulk_pull for the ports of twoPortTakeover
// (p1, p2 on net-a, VXLAN 100, bound to "me"), under a real cache
// (NeutronServer): fail makes every pull fail as a timed-out call does,
// bad names ports whose object comes back undecodable, the others of the
// reply as usual.
type takeoverPuller struct {
	mu    sync.Mutex
	fail  bool
	bad   map[string]bool
	pulls int // Port pulls
}

func (p *takeoverPuller) BulkPull(_ context.Context, rtype string, f neutron.Filter) ([]neutron.Resource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if rtype == neutron.TypePort {
		p.pulls++
	}
	if p.fail {
		return nil, errors.New("fake bulk_pull: MessagingTimeout: timed out waiting for a reply")
	}
	switch rtype {
	case neutron.TypeNetwork:
		return []neutron.Resource{&neutron.Network{ID: "net-a", MTU: 1450, RevisionNumber: 1}}, nil
	case neutron.TypePort:
	default:
		return nil, nil
	}
	var out []neutron.Resource
	var bad []neutron.BadObject
	for _, id := range f["id"] {
		switch {
		case p.bad[id]:
			bad = append(bad, neutron.BadObject{ID: id, Err: errors.New("ovo: Port 1.7: fixed_ips: not a list")})
		case id == "p1" || id == "p2":
			out = append(out, takeoverPort(id))
		}
	}
	if len(bad) > 0 {
		return out, &neutron.BadObjectsError{Type: rtype, Objects: bad}
	}
	return out, nil
}

func (p *takeoverPuller) set(fn func(p *takeoverPuller)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fn(p)
}

func (p *takeoverPuller) portPulls() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.pulls
}

// takeoverPort is p1 or p2 of twoPortTakeover as the server's Port object.
func takeoverPort(id string) *neutron.Port {
	seg := 100
	n := id[len(id)-1:]
	return &neutron.Port{ID: id, NetworkID: "net-a", MACAddress: "fa:16:3e:00:00:0" + n, AdminStateUp: true,
		DeviceID: "vm-" + id, DeviceOwner: "compute:nova", Status: "DOWN", RevisionNumber: 1,
		Bindings: []neutron.PortBinding{{PortID: id, Host: "me", VIFType: "ovs", VNICType: "normal", Status: neutron.BindingActive}},
		BindingLevels: []neutron.PortBindingLevel{{PortID: id, Host: "me", Driver: "openvswitch", SegmentID: "seg-a",
			Segment: &neutron.NetworkSegment{ID: "seg-a", NetworkID: "net-a", NetworkType: "vxlan", SegmentationID: &seg}}},
		FixedIPs: []neutron.IPAllocation{{SubnetID: "s", IPAddress: "10.0.0.1" + n}}}
}

// sweepWatch records whether br-int was swept and the most refusals any
// port had after a batch.
type sweepWatch struct {
	mu          sync.Mutex
	swept       bool
	maxRefusals int
}

func (w *sweepWatch) inspect(a *Agent) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, p := range a.ports {
		w.maxRefusals = max(w.maxRefusals, p.refusals)
	}
}

func (w *sweepWatch) onSweep(br string) {
	if br == "br-int" {
		w.mu.Lock()
		w.swept = true
		w.mu.Unlock()
	}
}

func (w *sweepWatch) get() (swept bool, maxRefusals int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.swept, w.maxRefusals
}

// TestPullOutageIsNoRefusal: the server answers tunnel_sync and
// report_state but its bulk_pulls time out (a partial outage: one server
// of several stuck, its RPC workers busy). The cache fails the ports'
// details; that is no refusal: for many more than detailsGiveUp rounds
// the ports keep their tags and the previous run's flows stay (the sweep
// is held), nobody's refusal count moves. Once the pulls answer, both are
// wired as usual and the sweep goes.
func TestPullOutageIsNoRefusal(t *testing.T) {
	sw, fl, srv := twoPortTakeover(t)
	pl := &takeoverPuller{fail: true}
	ns := &NeutronServer{Cache: neutron.NewCache(neutron.CacheOptions{Puller: pl}), Host: "me"}
	w := &sweepWatch{}
	fl.onSweep = w.onSweep
	h := startWithCache(t, sw, fl, srv, testOpts(true), nil, ns, w.inspect)
	sw.snapshot()
	rounds := 4 * detailsGiveUp
	h.waitFor("the ports' pulls failed many times", func() bool { return pl.portPulls() >= rounds })
	if srv.Calls() == 0 {
		t.Fatal("tunnel_sync not answered: the server is not partly up")
	}
	swept, refusals := w.get()
	if swept || refusals != 0 {
		t.Errorf("after %d failed pulls: br-int swept %v, refusals %d; want no sweep, no refusal", pl.portPulls(), swept, refusals)
	}
	if own := fl.owners("br-int"); own[""] != 3 {
		t.Errorf("%d of the previous run's 3 flows left during the outage:\n%s", own[""], strings.Join(fl.dump("br-int"), "\n"))
	}
	if sw.tag("tap1") != 3 || sw.tag("tap2") != 3 || sw.writes != 0 {
		t.Errorf("ports re-tagged during the outage: %d, %d (%d writes)", sw.tag("tap1"), sw.tag("tap2"), sw.writes)
	}
	if fl.has("br-int", "in_port=11 actions=drop") || fl.has("br-int", "in_port=12 actions=drop") {
		t.Errorf("a port wired dead during the outage:\n%s", strings.Join(fl.dump("br-int"), "\n"))
	}
	if h.inSync() {
		t.Errorf("in sync without details")
	}

	pl.set(func(p *takeoverPuller) { p.fail = false })
	h.waitFor("both ports wired once the pulls answer", func() bool {
		return srv.status("p1") == "ACTIVE" && srv.status("p2") == "ACTIVE" && h.inSync()
	})
	if sw.tag("tap1") != 3 || sw.tag("tap2") != 3 {
		t.Errorf("tags %d, %d after the outage, want 3", sw.tag("tap1"), sw.tag("tap2"))
	}
	own := fl.owners("br-int")
	if own[""] != 0 || own[pipeline.OwnerPort("p1")] == 0 || own[pipeline.OwnerPort("p2")] == 0 {
		t.Errorf("after the outage: owners %v", own)
	}
	if swept, refusals := w.get(); !swept || refusals != 0 {
		t.Errorf("after the outage: swept %v, refusals %d", swept, refusals)
	}
}

// TestUndecodablePortDoesNotHoldTheBatch: the server's reply to the batch's
// bulk_pull has p2's object in a form that cannot be decoded. p1, in the
// same reply, is wired; p2 is the server's answer, one without usable
// details: refused (counted as malformed), wired dead after detailsGiveUp,
// and the sweep is not held for it. Once its object decodes, it is wired.
func TestUndecodablePortDoesNotHoldTheBatch(t *testing.T) {
	sw, fl, srv := twoPortTakeover(t)
	pl := &takeoverPuller{bad: map[string]bool{"p2": true}}
	ns := &NeutronServer{Cache: neutron.NewCache(neutron.CacheOptions{Puller: pl}), Host: "me"}
	w := &sweepWatch{}
	fl.onSweep = w.onSweep
	h := startWithCache(t, sw, fl, srv, testOpts(true), nil, ns, w.inspect)
	sw.snapshot()
	// refusals is read after a batch: the one that gave p2 up has ended.
	h.waitFor("p1 wired, p2 refused detailsGiveUp times, br-int swept", func() bool {
		swept, refusals := w.get()
		return srv.status("p1") == "ACTIVE" && swept && refusals >= detailsGiveUp
	})
	if sw.tag("tap1") != 3 || sw.tag("tap2") != DeadVLAN {
		t.Errorf("tags %d, %d; want p1 on 3, p2 dead", sw.tag("tap1"), sw.tag("tap2"))
	}
	if n := h.m.AppendText(nil); !strings.Contains(string(n), `ovsagent_malformed_messages_total{reason="undecodable",topic="port-details"}`) {
		t.Errorf("the undecodable object not counted as malformed")
	}
	pl.set(func(p *takeoverPuller) { p.bad = nil })
	h.waitFor("p2 wired once its object decodes", func() bool {
		return sw.tag("tap2") == 3 && srv.status("p2") == "ACTIVE" && h.inSync()
	})
}
