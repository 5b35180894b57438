package agent

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/openflow"
)

// takeoverFixture is a host another agent wired: port p1 tagged 3 with the
// reference's other_config, its flows (of no owner of ours) on every
// bridge, optionally a tunnel port to a peer.
func takeoverFixture(t *testing.T, tunnel bool) (*fakeSwitch, *fakeFlows, *fakeServer) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.update("p1", func(d *Device) { d.Status = "ACTIVE" })
	sw.rows["tap1"] = &VIF{PortID: "p1", Name: "tap1", MAC: "fa:16:3e:00:00:01", OFPort: 11, Tag: 3, UUID: "u1",
		OtherConfig: map[string]string{"net_uuid": "net-a", "network_type": "vxlan", "physical_network": "None", "segmentation_id": "100", "tag": "3"}}
	if tunnel {
		sw.Tunnels.Add(TunnelPort{Name: "vxlan-c0000202", Type: "vxlan", RemoteIP: "192.0.2.2", LocalIP: "192.0.2.1", OFPort: 5})
	}
	for _, br := range []string{"br-int", "br-tun", "br-phys"} {
		fl.tables[br] = map[string]fakeEntry{}
		for i := 0; i < 3; i++ {
			f := openflow.Flow{Table: 0, Priority: uint16(200 + i), Cookie: 0xdead, Match: openflow.Match{openflow.InPort(uint32(90 + i))}, Actions: []openflow.Action{openflow.Drop{}}}
			fl.tables[br][f.Key()] = fakeEntry{flow: f}
		}
	}
	return sw, fl, srv
}

// TestTakeoverOneBundlePerBridge: on a single host (no tunnel port, so no
// l2pop FDB can come), the takeover is one bundle per bridge: ours in and
// every foreign flow out together, in sync without waiting for FDBWait,
// the port keeping its VLAN and staying ACTIVE without a Port write.
func TestTakeoverOneBundlePerBridge(t *testing.T) {
	sw, fl, srv := takeoverFixture(t, false)
	opt := testOpts(true)
	opt.FDBWait = time.Hour
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	h.waitFor("in sync", h.inSync)
	if fl.bundles != 3 {
		t.Errorf("%d bundles until in sync, want one per bridge (3)", fl.bundles)
	}
	for _, br := range []string{"br-int", "br-tun", "br-phys"} {
		if own := fl.owners(br); own[""] != 0 {
			t.Errorf("%s: %d foreign flows left", br, own[""])
		}
	}
	if sw.writes != 0 || sw.tag("tap1") != 3 {
		t.Errorf("port re-tagged: %d writes, tag %d", sw.writes, sw.tag("tap1"))
	}
	if srv.status("p1") != "ACTIVE" {
		t.Errorf("p1 %s", srv.status("p1"))
	}
}

// TestTakeoverAdoptsTunnelPorts: br-tun's tunnel ports are adopted at
// start (their table-0 flow is ours from the first bundle), and with a
// peer the br-tun sweep waits for the FDB while br-int's does not.
func TestTakeoverAdoptsTunnelPorts(t *testing.T) {
	sw, fl, srv := takeoverFixture(t, true)
	opt := testOpts(true)
	opt.FDBWait = time.Hour
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	h.waitFor("br-int swept", func() bool { return fl.owners("br-int")[""] == 0 && fl.has("br-tun", "in_port=5") })
	if fl.owners("br-tun")[""] == 0 {
		t.Errorf("br-tun swept before the FDB arrived (peer 192.0.2.2 has a tunnel port)")
	}
	h.a.Notify(FDBAdd{Entries: FDBEntries{"net-a": {SegmentID: intp(100), NetworkType: "vxlan",
		Ports: map[string][][2]string{"192.0.2.2": {{floodMAC, "0.0.0.0"}, {"fa:16:3e:00:00:99", "10.0.0.99"}}}}}})
	h.waitFor("in sync", h.inSync)
	if own := fl.owners("br-tun"); own[""] != 0 {
		t.Errorf("br-tun: %d foreign flows left", own[""])
	}
	if names := sw.Tunnels.Names(); len(names) != 1 || names[0] != "vxlan-c0000202" {
		t.Errorf("tunnel ports %v, want the adopted vxlan-c0000202 only", names)
	}
}

// TestTakeoverInSyncWithoutPeers: tunnel_sync names no other host and
// br-tun has no tunnel port, so no FDB can come: the agent is in sync
// without waiting for the l2pop refresh's reply.
func TestTakeoverInSyncWithoutPeers(t *testing.T) {
	sw, fl, srv := takeoverFixture(t, false)
	srv.gate = make(chan struct{}) // update_device_list never answers
	opt := testOpts(true)
	opt.FDBWait = time.Hour
	h := start(t, sw, fl, srv, opt)
	defer close(srv.gate)
	sw.snapshot()
	h.waitFor("in sync", h.inSync)
}

// waiter is a feature whose state waits on the server until released.
type waiter struct{ released atomic.Bool }

func (w *waiter) Name() string                 { return "dvr" }
func (w *waiter) Waiting() bool                { return !w.released.Load() }
func (w *waiter) RetryAt() time.Time           { return time.Time{} }
func (w *waiter) Unrebuilt(HostState) []string { return nil }

// TestTakeoverDVRSweep: with DVR (Pipeline.Distributed) the start-up sweep
// waits while a feature waits on the server (internal/dvr until this host's
// DVR MAC and its router interfaces' subnets are known), then removes the
// reference's flows in DVR's br-int tables, 3 and 4 included (the
// reference's own INT_BR_ALL_TABLES leaves them out, so its stale
// ARP_DVR_MAC_TO_DST_MAC flows would outlive the takeover); without DVR,
// tables 3 and 4 are not swept (no more than the reference would).
func TestTakeoverDVRSweep(t *testing.T) {
	for _, distributed := range []bool{true, false} {
		sw, fl, srv := takeoverFixture(t, false)
		for _, f := range []openflow.Flow{
			{Table: 1, Priority: 20, Cookie: 0xdead, Match: openflow.Match{openflow.DlVlan(3)}, Actions: []openflow.Action{openflow.GotoTable{Table: 58}}},
			{Table: 3, Priority: 5, Cookie: 0xdead, Match: openflow.Match{openflow.DlVlan(3)}, Actions: []openflow.Action{openflow.PopVLAN{}, openflow.Output{Port: 99}}},
			{Table: 4, Priority: 5, Cookie: 0xdead, Match: openflow.Match{openflow.DlVlan(3)}, Actions: []openflow.Action{openflow.PopVLAN{}, openflow.Output{Port: 98}}},
		} {
			fl.tables["br-int"][f.Key()] = fakeEntry{flow: f}
		}
		opt := testOpts(true)
		opt.Pipeline.Distributed = distributed
		w := &waiter{}
		h := startFeatures(t, sw, fl, srv, opt, w)
		sw.snapshot()
		// the first batches go in (ours beside the reference's), nothing swept
		h.waitFor("our br-int flows", func() bool { return fl.owners("br-int")["base"] > 0 })
		if n := fl.owners("br-int")[""]; n != 6 || h.inSync() {
			t.Fatalf("distributed %v: %d foreign br-int flows while a feature waits (want all 6), in sync %v", distributed, n, h.inSync())
		}
		w.released.Store(true)
		h.a.Notify(Resync{Reason: "test"})
		h.waitFor("in sync", h.inSync)
		left := 0
		for _, l := range fl.dump("br-int") {
			if strings.Contains(l, "cookie=0xdead") {
				left++
			}
		}
		if want := map[bool]int{true: 0, false: 2}[distributed]; left != want {
			t.Errorf("distributed %v: %d reference flows left on br-int, want %d:\n%s", distributed, left, want, strings.Join(fl.dump("br-int"), "\n"))
		}
		h.stop()
	}
}
