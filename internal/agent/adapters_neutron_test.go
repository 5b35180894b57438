package agent

import (
	"context"
	"errors"
	"fmt"
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

// portPuller answers Port pulls by id or by security group from a fixed set
// and counts the ports it returned.
type portPuller struct {
	mu       sync.Mutex
	ports    []*neutron.Port
	sg       *neutron.SecurityGroup
	returned int
	bad      map[string]bool // ports whose object comes back undecodable
}

func (p *portPuller) BulkPull(_ context.Context, rtype string, f neutron.Filter) ([]neutron.Resource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	switch rtype {
	case neutron.TypeSecurityGroup:
		return []neutron.Resource{p.sg}, nil
	case neutron.TypePort:
		var out []neutron.Resource
		var bad []neutron.BadObject
		for _, port := range p.ports {
			cp := *port
			if ids, ok := f["id"]; ok && hasString(ids, port.ID) ||
				f["security_group_ids"] != nil && hasString(f["security_group_ids"], port.SecurityGroupIDs[0]) {
				if p.bad[port.ID] {
					bad = append(bad, neutron.BadObject{ID: port.ID, Err: errors.New("unknown field")})
					continue
				}
				out = append(out, &cp)
			}
		}
		p.returned += len(out)
		if len(bad) > 0 {
			return out, &neutron.BadObjectsError{Type: rtype, Objects: bad}
		}
		return out, nil
	}
	return nil, nil
}

// selfReferencingGroup is a puller holding n local ports ("me") in group
// default, whose ingress rule names default itself: every port is a
// member the firewall asks for.
func selfReferencingGroup(n int) (*portPuller, []string) {
	sg := &neutron.SecurityGroup{ID: "default", Stateful: true, Rules: []neutron.SecurityGroupRule{
		{ID: "r1", SecurityGroupID: "default", Direction: "ingress", Ethertype: "IPv4", RemoteGroupID: "default"}}}
	pp := &portPuller{sg: sg}
	var ids []string
	for i := 0; i < n; i++ {
		id := "p" + hex2(i)
		pp.ports = append(pp.ports, &neutron.Port{ID: id, NetworkID: "n", SecurityGroupIDs: []string{"default"},
			Bindings: []neutron.PortBinding{{PortID: id, Host: "me"}}})
		ids = append(ids, id)
	}
	return pp, ids
}

// After a start, the local ports of a remote group are not pulled twice
// (by id and again as the group's members).
func TestRefreshPortsPullsEachPortOnce(t *testing.T) {
	pp, ids := selfReferencingGroup(100)
	// a local port of another group without remote-group rules, and a
	// member of the group on another host
	pp.ports = append(pp.ports, &neutron.Port{ID: "other-sg", NetworkID: "n", SecurityGroupIDs: []string{"web"}},
		&neutron.Port{ID: "remote", NetworkID: "n", SecurityGroupIDs: []string{"default"}})
	ids = append(ids, "other-sg")
	s := &NeutronServer{Cache: neutron.NewCache(neutron.CacheOptions{Puller: pp}), Host: "me"}
	if err := s.refreshPorts(context.Background(), ids); err != nil {
		t.Fatal(err)
	}
	for _, id := range append(ids, "remote") {
		if s.Cache.Port(id) == nil {
			t.Fatalf("%s not cached after the refresh", id)
		}
	}
	// 10 sampled by id, 101 members of default, then other-sg by id.
	if pp.returned != refreshSample+101+1 {
		t.Errorf("server returned %d ports for 101 local ones + 1 remote member, want %d", pp.returned, refreshSample+101+1)
	}
	if _, _, err := s.SecurityGroups(context.Background(), []string{"default"}); err != nil || pp.returned != refreshSample+102 {
		t.Errorf("the firewall's member lookup pulled again (%d ports, %v)", pp.returned, err)
	}
}

// The agent's start (a cold cache, no resync) also loads each port once:
// the first batch's details and the firewall's member lookup after it.
func TestColdDevicesPullEachPortOnce(t *testing.T) {
	pp, ids := selfReferencingGroup(100)
	pp.ports = append(pp.ports, &neutron.Port{ID: "remote", NetworkID: "n", SecurityGroupIDs: []string{"default"}})
	s := &NeutronServer{Cache: neutron.NewCache(neutron.CacheOptions{Puller: pp}), Host: "me"}
	devs, failed, err := s.Devices(context.Background(), append(ids, "gone"), false)
	if err != nil || len(devs) != 101 || devs["gone"].Bound || devs["p00"].PortID != "p00" || len(failed) != 0 {
		t.Fatalf("Devices: %d devices, failed %v, %v", len(devs), failed, err)
	}
	if _, _, err := s.SecurityGroups(context.Background(), []string{"default"}); err != nil {
		t.Fatal(err)
	}
	// 10 sampled by id, then the 101 members of default (the sample again
	// among them); "gone" is asked for by id and not found. Pulled by id
	// first, the 100 would have been loaded twice (201).
	if pp.returned != refreshSample+101 {
		t.Errorf("server returned %d ports for 100 local ones + 1 remote member, want %d", pp.returned, refreshSample+101)
	}
	// A warm cache asks nothing.
	before := pp.returned
	if _, _, err := s.Devices(context.Background(), ids, false); err != nil || pp.returned != before {
		t.Errorf("warm Devices pulled %d ports (%v)", pp.returned-before, err)
	}
}

// A port whose refreshed object cannot be decoded fails, and keeps failing
// until the server sends one that decodes: its older cached copy is not used
// when the next round asks for it without a refresh (review finding: the
// stale copy was wired one round later).
func TestUndecodableRefreshForgetsTheOldCopy(t *testing.T) {
	pp, ids := selfReferencingGroup(2)
	s := &NeutronServer{Cache: neutron.NewCache(neutron.CacheOptions{Puller: pp}), Host: "me"}
	if devs, failed, err := s.Devices(context.Background(), ids, false); err != nil || len(devs) != 2 || len(failed) != 0 {
		t.Fatalf("warm-up: %d devices, failed %v, %v", len(devs), failed, err)
	}
	pp.mu.Lock()
	pp.bad = map[string]bool{"p00": true}
	pp.mu.Unlock()
	devs, failed, err := s.Devices(context.Background(), ids, true)
	if err != nil || !errors.Is(failed["p00"], ErrDetailsUndecodable) || devs["p01"].PortID != "p01" {
		t.Fatalf("fresh: devices %v, failed %v, %v; want p00 undecodable, p01 wired", devs, failed, err)
	}
	devs, failed, err = s.Devices(context.Background(), []string{"p00"}, false)
	if err != nil || failed["p00"] == nil || devs["p00"].PortID != "" {
		t.Fatalf("next round: devices %v, failed %v, %v; want p00 failed again, not its old copy", devs, failed, err)
	}
	pp.mu.Lock()
	pp.bad = nil
	pp.mu.Unlock()
	if devs, failed, err := s.Devices(context.Background(), []string{"p00"}, false); err != nil || len(failed) != 0 || devs["p00"].PortID != "p00" {
		t.Errorf("decodable again: devices %v, failed %v, %v", devs, failed, err)
	}
}

// meetPuller is portPuller whose pulls of two paired types wait for each
// other: a pull whose partner is not out at the same time gives up after
// a while and records it. It proves two pulls are out at once.
type meetPuller struct {
	*portPuller
	pairs   map[string]string // type -> the type that must be out with it
	mu      sync.Mutex
	arrived map[string]chan struct{}
	alone   []string
}

func (m *meetPuller) arrive(rtype string) chan struct{} {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.arrived[rtype]
	if c == nil {
		c = make(chan struct{})
		m.arrived[rtype] = c
	}
	return c
}

func (m *meetPuller) BulkPull(ctx context.Context, rtype string, f neutron.Filter) ([]neutron.Resource, error) {
	if partner, ok := m.pairs[rtype]; ok {
		select {
		case <-m.arrive(rtype):
		default:
			close(m.arrive(rtype))
		}
		select {
		case <-m.arrive(partner):
		case <-time.After(2 * time.Second):
			m.mu.Lock()
			m.alone = append(m.alone, rtype+" without "+partner)
			m.mu.Unlock()
		}
	}
	return m.portPuller.BulkPull(ctx, rtype, f)
}

// The pulls of a restart that do not depend on each other are out at the
// same time (the server overlaps them): a group and its rules; the
// sampled ports' networks and the security groups.
func TestRefreshPullsIndependentTypesAtOnce(t *testing.T) {
	sg := &neutron.SecurityGroup{ID: "default", Stateful: true}
	pp := &portPuller{sg: sg}
	var ids []string
	for i := 0; i < 20; i++ {
		id := "p" + hex2(i)
		pp.ports = append(pp.ports, &neutron.Port{ID: id, NetworkID: "n", SecurityGroupIDs: []string{"default"},
			Bindings: []neutron.PortBinding{{PortID: id, Host: "me"}}})
		ids = append(ids, id)
	}
	m := &meetPuller{portPuller: pp, arrived: map[string]chan struct{}{}, pairs: map[string]string{
		neutron.TypeSecurityGroup: neutron.TypeSecurityGroupRule, neutron.TypeSecurityGroupRule: neutron.TypeSecurityGroup,
		neutron.TypeNetwork: neutron.TypeSecurityGroup}}
	s := &NeutronServer{Cache: neutron.NewCache(neutron.CacheOptions{Puller: m}), Host: "me"}
	if err := s.refreshPorts(context.Background(), ids); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.alone) > 0 {
		t.Errorf("pulls made one after the other: %v", m.alone)
	}
	if _, ok := m.arrived[neutron.TypeNetwork]; !ok {
		t.Error("the sampled ports' network was not pulled with the groups")
	}
}

// gatedPuller holds its first pull of a group's members until release is
// closed, as a slow server would.
type gatedPuller struct {
	*portPuller
	held    chan struct{} // closed when the member pull is waiting
	release chan struct{}
	once    sync.Once
}

func (g *gatedPuller) BulkPull(ctx context.Context, rtype string, f neutron.Filter) ([]neutron.Resource, error) {
	if rtype == neutron.TypePort && f["security_group_ids"] != nil {
		first := false
		g.once.Do(func() { first = true })
		if first {
			close(g.held)
			<-g.release
		}
	}
	return g.portPuller.BulkPull(ctx, rtype, f)
}

// A start's prefetch and the first batch's Devices share one pull: Devices
// asked while the prefetch's member pull is out waits for it instead of
// loading the same ports again.
func TestDevicesWaitsForPrefetch(t *testing.T) {
	pp, ids := selfReferencingGroup(100)
	g := &gatedPuller{portPuller: pp, held: make(chan struct{}), release: make(chan struct{})}
	s := &NeutronServer{Cache: neutron.NewCache(neutron.CacheOptions{Puller: g}), Host: "me"}
	ctx := context.Background()
	s.Prefetch(ctx, ids)
	<-g.held
	type result struct {
		devs   map[string]Device
		failed map[string]error
		err    error
	}
	got := make(chan result, 1)
	go func() {
		devs, failed, err := s.Devices(ctx, ids, false)
		got <- result{devs, failed, err}
	}()
	select {
	case r := <-got:
		t.Fatalf("Devices returned (%d devices, %v) while the prefetch was still out", len(r.devs), r.err)
	case <-time.After(100 * time.Millisecond):
	}
	close(g.release)
	r := <-got
	if r.err != nil || len(r.devs) != 100 || len(r.failed) != 0 || r.devs["p00"].PortID != "p00" {
		t.Fatalf("Devices: %d devices, failed %v, %v", len(r.devs), r.failed, r.err)
	}
	// 10 sampled by id, then the group's 100 members, once.
	if pp.returned != refreshSample+100 {
		t.Errorf("server returned %d ports for 100, want %d", pp.returned, refreshSample+100)
	}
	// Nothing left to prefetch: a second prefetch and Devices pull nothing.
	before := pp.returned
	s.Prefetch(ctx, ids)
	if _, _, err := s.Devices(ctx, ids, false); err != nil || pp.returned != before {
		t.Errorf("warm prefetch + Devices pulled %d ports (%v)", pp.returned-before, err)
	}
}

// blockingPuller holds every pull until released, and records how many
// were out at once.
type blockingPuller struct {
	mu          sync.Mutex
	out, maxOut int
	pulls       int
	release     chan struct{}
	askedSGs    int
}

func (p *blockingPuller) BulkPull(_ context.Context, rtype string, f neutron.Filter) ([]neutron.Resource, error) {
	p.mu.Lock()
	p.out++
	p.pulls++
	p.maxOut = max(p.maxOut, p.out)
	if rtype == neutron.TypeSecurityGroup {
		p.askedSGs += len(f["id"])
	}
	p.mu.Unlock()
	<-p.release
	p.mu.Lock()
	p.out--
	p.mu.Unlock()
	return nil, nil
}

// A burst of Port pushes bound here, each naming groups not cached (a forged
// flood, or a bulk change), used to start one goroutine and one set of
// server pulls per message. They are fetched by one goroutine, the groups
// queued meanwhile together, at most maxWarmQueued of them.
func TestWarmFromEventCoalesced(t *testing.T) {
	pl := &blockingPuller{release: make(chan struct{})}
	s := &NeutronServer{Cache: neutron.NewCache(neutron.CacheOptions{Puller: pl}), Host: "me"}
	ctx := context.Background()
	const n = 200
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("p%d", i)
		s.WarmFromEvent(ctx, neutron.Event{Type: neutron.TypePort, Kind: neutron.Updated, ID: id, New: &neutron.Port{ID: id, NetworkID: "n",
			SecurityGroupIDs: []string{fmt.Sprintf("sg%d-a", i), fmt.Sprintf("sg%d-b", i), fmt.Sprintf("sg%d-c", i)},
			Bindings:         []neutron.PortBinding{{PortID: id, Host: "me"}}}})
	}
	close(pl.release)
	for done := false; !done; time.Sleep(5 * time.Millisecond) {
		s.warmMu.Lock()
		done = !s.warmBusy
		s.warmMu.Unlock()
	}
	pl.mu.Lock()
	defer pl.mu.Unlock()
	// One round for the first port's groups (group and rule pulls at once),
	// one for all queued meanwhile.
	if pl.maxOut > 2 || pl.pulls > 4 {
		t.Errorf("%d pulls, %d at once, for %d pushes", pl.pulls, pl.maxOut, n)
	}
	// The round out when the burst came, and the queue.
	if want := 2 * maxWarmQueued; pl.askedSGs > want {
		t.Errorf("asked for %d groups, want at most %d", pl.askedSGs, want)
	}
}

// deviceOf passes the port's hints on (porthints decides on them).
func TestDeviceOfCarriesHints(t *testing.T) {
	hints := map[string]any{"openvswitch": map[string]any{"other_config": map[string]any{"tx-steering": "thread"}}}
	d := deviceOf(neutron.DeviceDetails{Device: "p", Bound: true, Hints: neutron.MiscDictOf(hints)})
	if got := fmt.Sprint(d.Hints); got != fmt.Sprint(hints) {
		t.Errorf("Device.Hints = %s, want %s", got, fmt.Sprint(hints))
	}
	if d := deviceOf(neutron.DeviceDetails{Device: "p", Bound: true}); d.Hints != nil {
		t.Errorf("no hints: Device.Hints = %v, want nil", d.Hints)
	}
}
