package overlay

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// testHost is the loop's side of the seam for the overlay alone.
type testHost struct {
	now     time.Time
	layout  feature.BridgeLayout
	touched map[string]bool
}

func (h *testHost) Touch(owners ...string) {
	for _, o := range owners {
		h.touched[o] = true
	}
}
func (h *testHost) Layout() feature.BridgeLayout            { return h.layout }
func (h *testHost) Cookie(string) uint64                    { return 0 }
func (h *testHost) Log() *slog.Logger                       { return slog.New(slog.DiscardHandler) }
func (h *testHost) Now() time.Time                          { return h.now }
func (h *testHost) Backoff(n int) time.Duration             { return time.Duration(n) * time.Second }
func (h *testHost) ObserveRPC(string, time.Duration, error) {}
func (h *testHost) Notify(any)                              {}
func (h *testHost) reset()                                  { h.touched = map[string]bool{} }
func newHost() *testHost {
	return &testHost{now: time.Unix(1000, 0), layout: feature.BridgeLayout{Integration: "br-int", Tunnel: "br-tun"}, touched: map[string]bool{}}
}

type fakeSwitch struct {
	ports  map[string]Port
	fail   error
	nextOF int32
}

func (s *fakeSwitch) EnsureTunnelPort(_ context.Context, t Port) (Port, error) {
	if s.fail != nil {
		return Port{}, s.fail
	}
	t.Name = t.Type + "-" + t.RemoteIP
	if old, ok := s.ports[t.Name]; ok {
		return old, nil
	}
	s.nextOF++
	t.OFPort = s.nextOF
	s.ports[t.Name] = t
	return t, nil
}
func (s *fakeSwitch) DeleteTunnelPort(_ context.Context, t Port) error {
	delete(s.ports, t.Name)
	return nil
}
func (s *fakeSwitch) TunnelPorts(context.Context) ([]Port, error) {
	var out []Port
	for _, p := range s.ports {
		out = append(out, p)
	}
	return out, nil
}

type fakeServer struct {
	eps []Endpoint
	err error
}

func (s *fakeServer) TunnelSync(context.Context, string, string) ([]Endpoint, error) {
	return s.eps, s.err
}

func newOverlay(cfg Config, sw *fakeSwitch, srv *fakeServer) (*Overlay, *testHost, *pipeline.State) {
	ps := pipeline.NewState(pipeline.Config{})
	var s Switch
	if sw != nil {
		s = sw
	}
	var v Server
	if srv != nil {
		v = srv
	}
	o := New(cfg, s, v, nil, ps)
	h := newHost()
	o.Attach(h)
	return o, h, ps
}

// wireNet puts a tunnelled network in the state and wires a port on it, as
// the agent's port lifecycle does.
func wireNet(o *Overlay, ps *pipeline.State, id string, seg int) pipeline.NetKey {
	key := pipeline.Seg(id, uint32(seg))
	ps.Networks[key] = &pipeline.Network{Key: key, Type: pipeline.TypeVXLAN, LocalVLAN: 1}
	o.PortWired(feature.Port{ID: "p-" + id, Wiring: feature.WiredUp, NetworkID: id, NetworkType: "vxlan", SegmentationID: &seg})
	return key
}

// TestFoldedEvents: the events an inbox overflow folds into act like a
// resync of what they name (moved from the agent's TestFoldedEventsApplied).
func TestFoldedEvents(t *testing.T) {
	o, _, ps := newOverlay(Config{L2Population: true, TunnelTypes: []string{"vxlan", "gre"}}, nil, nil)
	o.sync["vxlan"] = &retry{failures: 3}
	o.sync["gre"] = &retry{failures: 3}
	key := pipeline.NetKey{NetworkID: "net-a", SegID: 5, HasSeg: true}
	ps.Networks[key] = &pipeline.Network{Key: key, Type: pipeline.NetworkType("vxlan")}
	o.HandleEvent(FDBRefresh{NetworkID: "net-a"})
	o.HandleEvent(FDBRefresh{NetworkID: "net-other"})
	if !o.refresh["net-a"] || o.refresh["net-other"] {
		t.Errorf("refresh %v, want net-a only", o.refresh)
	}
	o.HandleEvent(TunnelResync{Type: "vxlan"})
	if o.sync["vxlan"].failures != 0 || o.sync["gre"].failures != 3 {
		t.Errorf("tunnel_sync of vxlan not reset alone")
	}
	o.HandleEvent(TunnelResync{})
	if o.sync["gre"].failures != 0 {
		t.Errorf("tunnel_sync of gre not reset by a full tunnel resync")
	}
}

// TestTunnelSyncWaits: tunnel_sync pending holds the sweep (Waiting) until
// it answers; a failure is retried after the loop's back-off; without
// l2pop every endpoint but our own gets a tunnel port.
func TestTunnelSyncWaits(t *testing.T) {
	sw := &fakeSwitch{ports: map[string]Port{}}
	srv := &fakeServer{err: errors.New("down")}
	o, h, ps := newOverlay(Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}}, sw, srv)
	if !o.Waiting() {
		t.Fatal("not waiting before the first tunnel_sync")
	}
	o.Prefetch(context.Background())()
	if !o.Waiting() || !o.RetryAt().Equal(h.now.Add(time.Second)) {
		t.Fatalf("after a failed tunnel_sync: waiting %v, retry at %v", o.Waiting(), o.RetryAt())
	}
	o.Prefetch(context.Background())() // not due yet: nothing sent
	if o.sync["vxlan"].failures != 1 {
		t.Fatalf("tunnel_sync retried before its back-off: %d failures", o.sync["vxlan"].failures)
	}
	h.now = h.now.Add(time.Second)
	srv.err, srv.eps = nil, []Endpoint{{IP: "192.0.2.1"}, {IP: "192.0.2.7"}}
	o.Prefetch(context.Background())()
	if o.Waiting() {
		t.Fatal("still waiting after tunnel_sync answered")
	}
	key := wireNet(o, ps, "net-a", 5)
	h.reset()
	if err := o.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sw.ports) != 1 || sw.ports["vxlan-192.0.2.7"].OFPort == 0 {
		t.Fatalf("tunnel ports %v, want one to 192.0.2.7", sw.ports)
	}
	if ps.Tunnels[pipeline.TunnelKey{IP: netip.MustParseAddr("192.0.2.7"), Type: pipeline.TypeVXLAN}] == nil {
		t.Error("tunnel not in the pipeline state")
	}
	if !h.touched["tun:192.0.2.7"] || !h.touched[pipeline.OwnerNetwork(key)] {
		t.Errorf("touched %v, want the tunnel and the network's flood", h.touched)
	}
	if o.noPeers() {
		t.Error("noPeers with a peer")
	}
}

// TestTunnelPortsFollowFDB: with l2pop the tunnel ports are the FDB's
// remote agents; one that leaves loses its port only after the sweep, and
// adopted ports nobody claims go after it.
func TestTunnelPortsFollowFDB(t *testing.T) {
	sw := &fakeSwitch{ports: map[string]Port{"vxlan-192.0.2.9": {Name: "vxlan-192.0.2.9", Type: "vxlan", RemoteIP: "192.0.2.9", OFPort: 9}}, nextOF: 9}
	o, h, ps := newOverlay(Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}, L2Population: true}, sw, &fakeServer{})
	o.AdoptBridges(context.Background(), false)
	if len(ps.Tunnels) != 1 {
		t.Fatalf("adopted %d tunnels, want 1", len(ps.Tunnels))
	}
	wireNet(o, ps, "net-a", 5)
	if got := o.RefreshNetworks(); !slices.Equal(got, []string{"net-a"}) {
		t.Fatalf("refresh %v, want net-a", got)
	}
	o.HandleEvent(FDBAdd{Entries: FDBEntries{"net-a": {Ports: map[string][][2]string{
		"192.0.2.5": {{"00:00:00:00:00:00", "0.0.0.0"}, {"fa:16:3e:00:00:05", "10.0.0.5"}},
		"192.0.2.1": {{"00:00:00:00:00:00", "0.0.0.0"}}, // ourselves: ignored
		"bad":       {{"00:00:00:00:00:00", "0.0.0.0"}},
	}}}})
	if err := o.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, ok := sw.ports["vxlan-192.0.2.5"]; !ok || len(sw.ports) != 2 {
		t.Fatalf("tunnel ports %v, want the adopted one and 192.0.2.5", sw.ports)
	}
	o.HandleEvent(FDBRemove{Entries: FDBEntries{"net-a": {Ports: map[string][][2]string{
		"192.0.2.5": {{"00:00:00:00:00:00", "0.0.0.0"}}}}}})
	if err := o.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sw.ports) != 2 {
		t.Fatalf("tunnel ports deleted before the sweep: %v", sw.ports)
	}
	h.reset()
	o.Swept()
	if !h.touched["tun:192.0.2.5"] || !h.touched["tun:192.0.2.9"] {
		t.Errorf("after the sweep touched %v, want both unclaimed tunnels", h.touched)
	}
	if err := o.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if len(sw.ports) != 0 || len(ps.Tunnels) != 0 {
		t.Errorf("after the sweep: ports %v, state %v, want none", sw.ports, ps.Tunnels)
	}
}

// TestTunnelPortFailure: a tunnel port not created is Sync's error (the
// loop's back-off retries it) and is created on the next Sync.
func TestTunnelPortFailure(t *testing.T) {
	sw := &fakeSwitch{ports: map[string]Port{}, fail: errors.New("ovsdb gone")}
	o, _, ps := newOverlay(Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}}, sw, &fakeServer{eps: []Endpoint{{IP: "192.0.2.7"}}})
	o.Prefetch(context.Background())()
	if err := o.Sync(context.Background()); err == nil {
		t.Fatal("Sync succeeded without the tunnel port")
	}
	sw.fail = nil
	if err := o.Sync(context.Background()); err != nil || len(ps.Tunnels) != 1 {
		t.Fatalf("retry: err %v, tunnels %d", err, len(ps.Tunnels))
	}
}

// TestFDBAwaited: br-tun with tunnel ports keeps its stale flows until the
// FDB asked for came or FDBWait passed; an FDB that came before the reply
// counts.
func TestFDBAwaited(t *testing.T) {
	sw := &fakeSwitch{ports: map[string]Port{"vxlan-192.0.2.9": {Name: "vxlan-192.0.2.9", Type: "vxlan", RemoteIP: "192.0.2.9", OFPort: 9}}}
	o, h, ps := newOverlay(Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}, L2Population: true, FDBWait: 2 * time.Second}, sw, &fakeServer{})
	o.AdoptBridges(context.Background(), false)
	wireNet(o, ps, "net-a", 5)
	wireNet(o, ps, "net-b", 6)
	if !o.HoldSweep("br-tun") || o.HoldSweep("br-int") || o.Complete() {
		t.Fatal("refresh not asked yet: br-tun must wait, br-int not")
	}
	sent := h.now
	h.now = h.now.Add(time.Second)
	o.HandleEvent(FDBAdd{Entries: FDBEntries{"net-b": {Ports: map[string][][2]string{"192.0.2.9": {{"00:00:00:00:00:00", "0.0.0.0"}}}}}})
	h.now = h.now.Add(time.Second)
	o.RefreshReplied([]string{"net-a", "net-b"}, sent, h.now)
	if len(o.RefreshNetworks()) != 0 {
		t.Fatalf("refresh %v after the reply", o.RefreshNetworks())
	}
	if _, ok := o.fdbAwait["net-b"]; ok {
		t.Error("net-b waits for an FDB that came before the reply")
	}
	if !o.HoldSweep("br-tun") || !o.CompleteBy().Equal(h.now.Add(2*time.Second)) {
		t.Fatalf("net-a's FDB: hold %v, complete by %v", o.HoldSweep("br-tun"), o.CompleteBy())
	}
	h.now = h.now.Add(2 * time.Second)
	if o.HoldSweep("br-tun") || !o.Complete() {
		t.Error("still held after FDBWait")
	}
}

// TestNetworkLeaves: a network that left the host loses its FDB; back, it
// starts from nothing and is asked for it again.
func TestNetworkLeaves(t *testing.T) {
	o, _, ps := newOverlay(Config{LocalIP: "192.0.2.1", TunnelTypes: []string{"vxlan"}, L2Population: true}, nil, nil)
	key := wireNet(o, ps, "net-a", 5)
	o.HandleEvent(FDBAdd{Entries: FDBEntries{"net-a": {Ports: map[string][][2]string{"192.0.2.9": {{"00:00:00:00:00:00", "0.0.0.0"}}}}}})
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
	if o.RefreshNetworks(); len(o.fdb) != 0 {
		t.Errorf("FDB of a gone network kept: %v", o.fdb)
	}
}
