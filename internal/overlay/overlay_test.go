package overlay_test

import (
	"context"
	"errors"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/overlay"
	"github.com/ovsagent/ovsagent/internal/pipeline"
	"github.com/ovsagent/ovsagent/internal/testing/fakes"
)

func newHost() *fakes.Host {
	return &fakes.Host{Clock: time.Unix(1000, 0), Bridges: feature.BridgeLayout{Integration: "br-int", Tunnel: "br-tun"}}
}

// newOverlay is the overlay over sw and srv (the shared fakes; nil: none).
func newOverlay(cfg overlay.Config, sw *fakes.Tunnels, srv *fakes.TunnelServer) (*overlay.Overlay, *fakes.Host, *pipeline.State) {
	ps := pipeline.NewState(pipeline.Config{})
	var s overlay.Switch
	if sw != nil {
		s = sw
	}
	var v overlay.Server
	if srv != nil {
		v = srv
	}
	o := overlay.New(cfg, s, v, nil, ps)
	h := newHost()
	o.Attach(h)
	return o, h, ps
}

// wireNet puts a tunnelled network in the state and wires a port on it, as
// the agent's port lifecycle does.
func wireNet(o *overlay.Overlay, ps *pipeline.State, id string, seg int) pipeline.NetKey {
	key := pipeline.Seg(id, uint32(seg))
	ps.Networks[key] = &pipeline.Network{Key: key, Type: pipeline.TypeVXLAN, LocalVLAN: 1}
	o.PortWired(feature.Port{ID: "p-" + id, Wiring: feature.WiredUp, NetworkID: id, NetworkType: "vxlan", SegmentationID: &seg})
	return key
}

// TestFoldedEvents: the events an inbox overflow folds into act like a
// resync of what they name (moved from the agent's TestFoldedEventsApplied).
func TestFoldedEvents(t *testing.T) {
	o, _, ps := newOverlay(overlay.Config{L2Population: true, TunnelTypes: []string{"vxlan", "gre"}}, nil, nil)
	o.SetSyncFailures("vxlan", 3)
	o.SetSyncFailures("gre", 3)
	key := pipeline.NetKey{NetworkID: "net-a", SegID: 5, HasSeg: true}
	ps.Networks[key] = &pipeline.Network{Key: key, Type: pipeline.NetworkType("vxlan")}
	o.HandleEvent(overlay.FDBRefresh{NetworkID: "net-a"})
	o.HandleEvent(overlay.FDBRefresh{NetworkID: "net-other"})
	if !o.Refreshing("net-a") || o.Refreshing("net-other") {
		t.Errorf("refresh net-a %v, net-other %v, want net-a only", o.Refreshing("net-a"), o.Refreshing("net-other"))
	}
	o.HandleEvent(overlay.TunnelResync{Type: "vxlan"})
	if o.SyncFailures("vxlan") != 0 || o.SyncFailures("gre") != 3 {
		t.Errorf("tunnel_sync of vxlan not reset alone")
	}
	o.HandleEvent(overlay.TunnelResync{})
	if o.SyncFailures("gre") != 0 {
		t.Errorf("tunnel_sync of gre not reset by a full tunnel resync")
	}
}

// TestTunnelSyncWaits: tunnel_sync pending holds the sweep (Waiting) until
// it answers; a failure is retried after the loop's back-off; without
// l2pop every endpoint but our own gets a tunnel port.
func TestTunnelSyncWaits(t *testing.T) {
	sw, srv := fakes.NewTunnels(0), &fakes.TunnelServer{}
	srv.SetDown(true)
	o, h, ps := newOverlay(overlay.Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}}, sw, srv)
	if !o.Waiting() {
		t.Fatal("not waiting before the first tunnel_sync")
	}
	o.Prefetch(context.Background())()
	if !o.Waiting() || !o.RetryAt().Equal(h.Now().Add(time.Second)) {
		t.Fatalf("after a failed tunnel_sync: waiting %v, retry at %v", o.Waiting(), o.RetryAt())
	}
	o.Prefetch(context.Background())() // not due yet: nothing sent
	if n := o.SyncFailures("vxlan"); n != 1 {
		t.Fatalf("tunnel_sync retried before its back-off: %d failures", n)
	}
	h.Advance(time.Second)
	srv.SetDown(false) // it answers ourselves (192.0.2.1) and 192.0.2.7
	srv.SetEndpoints(overlay.Endpoint{IP: "192.0.2.7"})
	o.Prefetch(context.Background())()
	if o.Waiting() {
		t.Fatal("still waiting after tunnel_sync answered")
	}
	key := wireNet(o, ps, "net-a", 5)
	h.Reset()
	if err := o.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if p, ok := sw.Port("vxlan-c0000207"); len(sw.Names()) != 1 || !ok || p.OFPort == 0 {
		t.Fatalf("tunnel ports %v, want one to 192.0.2.7", sw.Names())
	}
	if ps.Tunnels[pipeline.TunnelKey{IP: netip.MustParseAddr("192.0.2.7"), Type: pipeline.TypeVXLAN}] == nil {
		t.Error("tunnel not in the pipeline state")
	}
	if !h.Touched("tun:192.0.2.7") || !h.Touched(pipeline.OwnerNetwork(key)) {
		t.Errorf("touched %v, want the tunnel and the network's flood", h)
	}
	if o.NoPeers() {
		t.Error("noPeers with a peer")
	}
}

// TestTunnelPortsFollowFDB: with l2pop the tunnel ports are the FDB's
// remote agents; one that leaves loses its port only after the sweep, and
// adopted ports nobody claims go after it.
func TestTunnelPortsFollowFDB(t *testing.T) {
	sw := fakes.NewTunnels(9)
	sw.Add(overlay.Port{Name: "vxlan-c0000209", Type: "vxlan", RemoteIP: "192.0.2.9", OFPort: 9})
	o, h, ps := newOverlay(overlay.Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}, L2Population: true}, sw, &fakes.TunnelServer{})
	o.AdoptBridges(context.Background(), false)
	if len(ps.Tunnels) != 1 {
		t.Fatalf("adopted %d tunnels, want 1", len(ps.Tunnels))
	}
	wireNet(o, ps, "net-a", 5)
	if got := o.RefreshNetworks(); !slices.Equal(got, []string{"net-a"}) {
		t.Fatalf("refresh %v, want net-a", got)
	}
	o.HandleEvent(overlay.FDBAdd{Entries: overlay.FDBEntries{"net-a": {Ports: map[string][][2]string{
		"192.0.2.5": {{"00:00:00:00:00:00", "0.0.0.0"}, {"fa:16:3e:00:00:05", "10.0.0.5"}},
		"192.0.2.1": {{"00:00:00:00:00:00", "0.0.0.0"}}, // ourselves: ignored
		"bad":       {{"00:00:00:00:00:00", "0.0.0.0"}},
	}}}})
	if err := o.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := sw.Port("vxlan-c0000205"); !ok || len(sw.Names()) != 2 {
		t.Fatalf("tunnel ports %v, want the adopted one and 192.0.2.5", sw.Names())
	}
	o.HandleEvent(overlay.FDBRemove{Entries: overlay.FDBEntries{"net-a": {Ports: map[string][][2]string{
		"192.0.2.5": {{"00:00:00:00:00:00", "0.0.0.0"}}}}}})
	if err := o.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sw.Names()) != 2 {
		t.Fatalf("tunnel ports deleted before the sweep: %v", sw.Names())
	}
	h.Reset()
	o.Swept()
	if !h.Touched("tun:192.0.2.5") || !h.Touched("tun:192.0.2.9") {
		t.Errorf("after the sweep touched %v, want both unclaimed tunnels", h)
	}
	if err := o.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sw.Names()) != 0 || len(ps.Tunnels) != 0 {
		t.Errorf("after the sweep: ports %v, state %v, want none", sw.Names(), ps.Tunnels)
	}
}

// TestTunnelPortFailure: a tunnel port not created is Sync's error (the
// loop's back-off retries it) and is created on the next Sync.
func TestTunnelPortFailure(t *testing.T) {
	sw, srv := fakes.NewTunnels(0), &fakes.TunnelServer{}
	sw.SetFail(errors.New("ovsdb gone"))
	srv.SetEndpoints(overlay.Endpoint{IP: "192.0.2.7"})
	o, _, ps := newOverlay(overlay.Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}}, sw, srv)
	o.Prefetch(context.Background())()
	if err := o.Sync(context.Background()); err == nil {
		t.Fatal("Sync succeeded without the tunnel port")
	}
	sw.SetFail(nil)
	if err := o.Sync(context.Background()); err != nil || len(ps.Tunnels) != 1 {
		t.Fatalf("retry: err %v, tunnels %d", err, len(ps.Tunnels))
	}
}

// TestFDBAwaited: br-tun with tunnel ports keeps its stale flows until the
// FDB asked for came or FDBWait passed; an FDB that came before the reply
// counts.
func TestFDBAwaited(t *testing.T) {
	sw := fakes.NewTunnels(9)
	sw.Add(overlay.Port{Name: "vxlan-c0000209", Type: "vxlan", RemoteIP: "192.0.2.9", OFPort: 9})
	o, h, ps := newOverlay(overlay.Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}, L2Population: true, FDBWait: 2 * time.Second}, sw, &fakes.TunnelServer{})
	o.AdoptBridges(context.Background(), false)
	wireNet(o, ps, "net-a", 5)
	wireNet(o, ps, "net-b", 6)
	if !o.HoldSweep("br-tun") || o.HoldSweep("br-int") || o.Complete() {
		t.Fatal("refresh not asked yet: br-tun must wait, br-int not")
	}
	sent := h.Now()
	h.Advance(time.Second)
	o.HandleEvent(overlay.FDBAdd{Entries: overlay.FDBEntries{"net-b": {Ports: map[string][][2]string{"192.0.2.9": {{"00:00:00:00:00:00", "0.0.0.0"}}}}}})
	h.Advance(time.Second)
	o.RefreshReplied([]string{"net-a", "net-b"}, sent, h.Now())
	if len(o.RefreshNetworks()) != 0 {
		t.Fatalf("refresh %v after the reply", o.RefreshNetworks())
	}
	if o.AwaitingFDB("net-b") {
		t.Error("net-b waits for an FDB that came before the reply")
	}
	if !o.HoldSweep("br-tun") || !o.CompleteBy().Equal(h.Now().Add(2*time.Second)) {
		t.Fatalf("net-a's FDB: hold %v, complete by %v", o.HoldSweep("br-tun"), o.CompleteBy())
	}
	h.Advance(2 * time.Second)
	if o.HoldSweep("br-tun") || !o.Complete() {
		t.Error("still held after FDBWait")
	}
}

// TestNetworkLeaves: a network that left the host loses its FDB; back, it
// starts from nothing and is asked for it again.
func TestNetworkLeaves(t *testing.T) {
	o, _, ps := newOverlay(overlay.Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}, L2Population: true}, nil, nil)
	key := wireNet(o, ps, "net-a", 5)
	o.HandleEvent(overlay.FDBAdd{Entries: overlay.FDBEntries{"net-a": {Ports: map[string][][2]string{"192.0.2.9": {{"00:00:00:00:00:00", "0.0.0.0"}}}}}})
	o.RefreshReplied([]string{"net-a"}, time.Time{}, time.Time{})
	if len(ps.Networks[key].FDB) != 1 {
		t.Fatal("FDB not in the network's mapping")
	}
	delete(ps.Networks, key) // released by the agent
	key = wireNet(o, ps, "net-a", 5)
	if len(ps.Networks[key].FDB) != 0 {
		t.Errorf("stale FDB kept across a release: %v", ps.Networks[key].FDB)
	}
	if got := o.RefreshNetworks(); !slices.Equal(got, []string{"net-a"}) {
		t.Errorf("refresh %v, want net-a again", got)
	}
	delete(ps.Networks, key)
	if o.RefreshNetworks(); o.FDBNetworks() != 0 {
		t.Errorf("FDB of a gone network kept: %d networks", o.FDBNetworks())
	}
}

// TestFirstPortAsksDespiteEarlyEntries: another host's first-port cast can
// reach a mapping before its first port is wired up; that is part of the
// network's FDB only, so the first wired port still asks for all of it, and
// a second port does not ask again.
func TestFirstPortAsksDespiteEarlyEntries(t *testing.T) {
	o, _, ps := newOverlay(overlay.Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"gre"}, L2Population: true}, nil, nil)
	seg := 645
	key := pipeline.Seg("net-d", uint32(seg))
	ps.Networks[key] = &pipeline.Network{Key: key, Type: pipeline.TypeGRE, LocalVLAN: 5}
	// the network node's first port on net-d, cast to every agent
	o.HandleEvent(overlay.FDBAdd{Entries: overlay.FDBEntries{"net-d": {SegmentID: &seg, Ports: map[string][][2]string{
		"192.0.2.9": {{"00:00:00:00:00:00", "0.0.0.0"}, {"fa:16:3e:00:00:09", "10.120.4.3"}}}}}})
	if len(ps.Networks[key].FDB) != 1 {
		t.Fatalf("the early entries not applied: %v", ps.Networks[key].FDB)
	}
	port := feature.Port{ID: "qr-d", Wiring: feature.WiredUp, NetworkID: "net-d", NetworkType: "gre", SegmentationID: &seg}
	o.PortWired(port)
	if got := o.RefreshNetworks(); !slices.Equal(got, []string{"net-d"}) {
		t.Fatalf("refresh %v after the first port, want net-d", got)
	}
	if len(ps.Networks[key].FDB) != 1 {
		t.Errorf("the early entries lost: %v", ps.Networks[key].FDB)
	}
	o.RefreshReplied([]string{"net-d"}, time.Time{}, time.Time{})
	port.ID = "vm-d"
	o.PortWired(port)
	if got := o.RefreshNetworks(); len(got) != 0 {
		t.Errorf("refresh %v after a second port, want none", got)
	}
}
