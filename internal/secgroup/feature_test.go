package secgroup

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/firewall"
)

type fakeHost struct {
	now     time.Time
	touched []string
	rpcs    []string
}

func (h *fakeHost) Touch(owners ...string) { h.touched = append(h.touched, owners...) }
func (h *fakeHost) Layout() feature.BridgeLayout {
	return feature.BridgeLayout{Integration: "br-int", PatchTun: 2}
}
func (h *fakeHost) Cookie(string) uint64        { return 0 }
func (h *fakeHost) Log() *slog.Logger           { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
func (h *fakeHost) Notify(any)                  {}
func (h *fakeHost) Now() time.Time              { return h.now }
func (h *fakeHost) Backoff(n int) time.Duration { return time.Duration(n) * time.Second }
func (h *fakeHost) ObserveRPC(m string, _ time.Duration, err error) {
	h.rpcs = append(h.rpcs, m+":"+errString(err))
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return "error"
}

var port22 = 22

type flakyGroups struct {
	fail  bool
	calls int
}

func (g *flakyGroups) SecurityGroups(_ context.Context, ids []string) (map[string]firewall.SecurityGroup, map[string][]firewall.Member, error) {
	g.calls++
	if g.fail {
		return nil, nil, errors.New("server down")
	}
	out := map[string]firewall.SecurityGroup{}
	for _, id := range ids {
		out[id] = firewall.SecurityGroup{ID: id, Rules: []firewall.Rule{{ID: "r1", Direction: firewall.Ingress, EtherType: firewall.IPv4, Protocol: "tcp", PortRangeMin: &port22, PortRangeMax: &port22}}}
	}
	return out, map[string][]firewall.Member{}, nil
}

// The firewall as a feature: a port's wiring reaches its state, a failed
// security_group_info is retried after the host's back-off while the port's
// own change still goes in, the sweep waits (Waiting) until the groups are
// read, and the port's flows are then computed on br-int.
func TestFeatureGroupsRetry(t *testing.T) {
	h := &fakeHost{now: time.Unix(1000, 0)}
	g := &flakyGroups{fail: true}
	f := New(Deps{Groups: g})
	f.Attach(h)
	f.PortWired(feature.Port{ID: "p1", Name: "tap1", OFPort: 7, MAC: "fa:16:3e:00:00:01", Wiring: feature.WiredUp,
		LocalVLAN: 3, NetworkType: "vxlan", PortSecurity: true, Filtered: true, SecurityGroups: []string{"sg1"},
		FixedIPs: []string{"10.0.0.5"}})
	if !f.Waiting() {
		t.Fatal("a port with unknown groups: not waiting for them")
	}
	if err := f.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if !f.Waiting() || !f.RetryAt().Equal(h.now.Add(time.Second)) {
		t.Fatalf("after a failed read: waiting %v, retry at %v", f.Waiting(), f.RetryAt())
	}
	if !slices.Contains(h.touched, firewall.OwnerPort("p1")) {
		t.Errorf("the port's owner not touched while the groups are missing: %v", h.touched)
	}
	if !slices.Equal(h.rpcs, []string{"security_group_info:error"}) {
		t.Errorf("rpcs observed: %v", h.rpcs)
	}

	// Before the back-off ends: no call.
	g.fail, h.touched = false, nil
	h.now = h.now.Add(500 * time.Millisecond)
	f.PortWired(feature.Port{ID: "p1", Name: "tap1", OFPort: 7, MAC: "fa:16:3e:00:00:01", Wiring: feature.WiredUp,
		LocalVLAN: 3, NetworkType: "vxlan", PortSecurity: true, Filtered: true, SecurityGroups: []string{"sg1"},
		FixedIPs: []string{"10.0.0.5"}})
	_ = f.Sync(context.Background())
	if g.calls != 1 || !f.Waiting() {
		t.Fatalf("within the back-off: %d calls, waiting %v", g.calls, f.Waiting())
	}

	h.now = h.now.Add(time.Second)
	_ = f.Sync(context.Background())
	if g.calls != 2 || f.Waiting() {
		t.Fatalf("after the back-off: %d calls, waiting %v", g.calls, f.Waiting())
	}
	if !slices.Contains(h.touched, firewall.OwnerPort("p1")) {
		t.Errorf("the port's owner not touched once its groups are read: %v", h.touched)
	}
	flows, errs := f.Flows([]string{firewall.OwnerPort("p1")})
	if len(errs) > 0 || len(flows[firewall.OwnerPort("p1")]["br-int"]) == 0 {
		t.Fatalf("port flows: %v, errs %v", flows, errs)
	}
	tcp22 := false
	for _, fl := range flows[firewall.OwnerPort("p1")]["br-int"] {
		if fl.Table == 82 && strings.Contains(fl.String(), ",tcp,") && strings.Contains(fl.String(), "tp_dst=22 ") {
			tcp22 = true
		}
	}
	if !tcp22 {
		t.Error("no ingress tcp/22 flow in table 82 for the group's rule")
	}

	// Unwired: the port leaves the firewall.
	h.touched = nil
	f.PortWired(feature.Port{ID: "p1", Wiring: feature.WiredDead, LocalVLAN: 4095})
	_ = f.Sync(context.Background())
	if len(f.Owners()) != 1 || !slices.Contains(h.touched, firewall.OwnerPort("p1")) {
		t.Errorf("dead port: owners %v, touched %v", f.Owners(), h.touched)
	}
}
