package agent

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/neutron"
)

// pullLog is a neutron.Puller that answers from fixed resources and
// records what was asked.
type pullLog struct {
	mu    sync.Mutex
	asked []string
	res   map[string][]neutron.Resource
}

func (p *pullLog) BulkPull(_ context.Context, rtype string, _ neutron.Filter) ([]neutron.Resource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.asked = append(p.asked, rtype)
	return p.res[rtype], nil
}

func (p *pullLog) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.asked)
}

// A port pushed as bound to this host gets its security group (rules,
// remote members) fetched before it is plugged; wiring it then asks the
// server nothing. Ports of other hosts and the agent's own fills do not.
func TestWarmFromEventPrefetchesSecurityGroups(t *testing.T) {
	sg := &neutron.SecurityGroup{ID: "sg1", Stateful: true, Rules: []neutron.SecurityGroupRule{
		{ID: "r1", SecurityGroupID: "sg1", Direction: "ingress", Ethertype: "IPv4", RemoteGroupID: "sg1"}}}
	pl := &pullLog{res: map[string][]neutron.Resource{neutron.TypeSecurityGroup: {sg}}}
	cache := neutron.NewCache(neutron.CacheOptions{Puller: pl})
	s := &NeutronServer{Cache: cache, Host: "me"}
	port := func(id, host string) *neutron.Port {
		return &neutron.Port{ID: id, NetworkID: "n", SecurityGroupIDs: []string{"sg1"},
			Bindings: []neutron.PortBinding{{PortID: id, Host: host}}}
	}
	ctx := context.Background()
	s.WarmFromEvent(ctx, neutron.Event{Type: neutron.TypePort, Kind: neutron.Updated, ID: "p0", New: port("p0", "other")})
	s.WarmFromEvent(ctx, neutron.Event{Type: neutron.TypePort, Kind: neutron.Updated, ID: "p1", New: port("p1", "me"), AgentRestarted: true})
	time.Sleep(50 * time.Millisecond) // nothing may start; there is no event to wait for
	if n := pl.count(); n != 0 {
		t.Fatalf("pulled %v for a foreign port / the agent's own fill", pl.asked)
	}
	s.WarmFromEvent(ctx, neutron.Event{Type: neutron.TypePort, Kind: neutron.Updated, ID: "p2", New: port("p2", "me")})
	s.WarmFromEvent(ctx, neutron.Event{Type: neutron.TypePort, Kind: neutron.Updated, ID: "p3", New: port("p3", "me")})
	deadline := time.Now().Add(5 * time.Second)
	for pl.count() < 3 && time.Now().Before(deadline) { // group, rules, members
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(20 * time.Millisecond) // a second fetch for p3 would show now
	if n := pl.count(); n != 3 {
		t.Fatalf("warm-up pulls %v, want SecurityGroup, SecurityGroupRule, Port once", pl.asked)
	}
	groups, _, err := s.SecurityGroups(ctx, []string{"sg1"})
	if err != nil || len(groups["sg1"].Rules) != 1 {
		t.Fatalf("SecurityGroups = %v, %v", groups, err)
	}
	if n := pl.count(); n != 3 {
		t.Errorf("wiring after the warm-up pulled again: %v", pl.asked)
	}
}
