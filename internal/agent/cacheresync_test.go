package agent

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/ovsagent/ovsagent/internal/neutron"
)

// wiredP1 starts an agent whose server has port p1 (setup, if any, changes
// the server first) and waits until p1 is plugged, ACTIVE and in sync.
func wiredP1(t *testing.T, setup func(*fakeServer)) (*harness, *fakeSwitch, *fakeServer) {
	t.Helper()
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	if setup != nil {
		setup(srv)
	}
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })
	return h, sw, srv
}

// TestBrokerReconnectResyncsCache: a broker reconnect (pushes sent while it
// was down are lost) re-reads the whole cache, once, and the details fetch
// of that resync then reads the ports from the cache just re-read instead of
// pulling them again. The agent's start re-reads nothing: its cache was just
// filled.
func TestBrokerReconnectResyncsCache(t *testing.T) {
	h, sw, srv := wiredP1(t, nil)
	if n := srv.resyncs(); n != 0 {
		t.Fatalf("cache re-read %d times at the start, want 0", n)
	}
	before := len(srv.freshFetches())

	h.a.Notify(Resync{Reason: ResyncBrokerReconnect})
	h.waitFor("p1's details fetched again after the resync", func() bool { return len(srv.freshFetches()) > before && h.inSync() })
	if n := srv.resyncs(); n != 1 {
		t.Errorf("cache re-read %d times after a broker reconnect, want 1", n)
	}
	if f := srv.freshFetches()[before]; f {
		t.Errorf("the resync's details fetch bypassed the cache just re-read (ports pulled twice)")
	}
	// Later batches do not re-read it again.
	srv.addPort("p2", "net-a", "vxlan", 100, "fa:16:3e:00:00:02")
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("p2 ACTIVE and in sync", func() bool { return srv.status("p2") == "ACTIVE" && h.inSync() })
	if n := srv.resyncs(); n != 1 {
		t.Errorf("cache re-read %d times, want 1", n)
	}
}

// TestCacheResyncFailureRetried: a re-read whose pull failed (an outage) is
// retried with the back-off until it succeeds, the agent out of sync
// meanwhile; the details fetch meanwhile bypasses the cache as before.
func TestCacheResyncFailureRetried(t *testing.T) {
	h, _, srv := wiredP1(t, nil)
	before := len(srv.freshFetches())
	srv.mu.Lock()
	srv.resyncFail = 3
	srv.mu.Unlock()

	h.a.Notify(Resync{Reason: ResyncBrokerReconnect})
	h.waitFor("the first re-read failed", func() bool { return srv.resyncs() >= 1 && len(srv.freshFetches()) > before })
	if h.inSync() {
		t.Errorf("in sync while the cache is still to be re-read")
	}
	if f := srv.freshFetches()[before]; !f {
		t.Errorf("details fetched from the cache although its re-read failed")
	}
	h.waitFor("re-read retried until it succeeded, in sync", func() bool { return srv.resyncs() >= 4 && h.inSync() })
	if n := srv.resyncs(); n != 4 {
		t.Errorf("cache re-read %d times, want 4 (3 failures, 1 success)", n)
	}
}

// TestCacheResyncUndecodableNotRetried: objects the re-read could not decode
// are counted as malformed and not retried (the rest was applied).
func TestCacheResyncUndecodableNotRetried(t *testing.T) {
	h, _, srv := wiredP1(t, func(srv *fakeServer) { srv.undecodable = []string{"SecurityGroupRule r1"} })
	h.a.Notify(Resync{Reason: ResyncBrokerReconnect})
	h.waitFor("re-read, in sync", func() bool { return srv.resyncs() >= 1 && h.inSync() })
	if n := srv.resyncs(); n != 1 {
		t.Errorf("cache re-read %d times, want 1: an undecodable object is no outage", n)
	}
	if m := string(h.m.AppendText(nil)); !strings.Contains(m, `ovsagent_malformed_messages_total{reason="undecodable",topic="cache-resync"} 1`) {
		t.Errorf("undecodable object not counted:\n%s", m)
	}
}

// TestNoCacheResyncForOVSDBReconnectOrStart: an OVSDB reconnect loses no
// push: the cache is not re-read. Neither is it for "revived" answered to the
// start's first report (the cache was just filled by this start); "revived"
// once the agent ran in sync re-reads it.
func TestNoCacheResyncForOVSDBReconnectOrStart(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.answer = "revived" // the first report: the agent was away long
	opt := testOpts(true)
	h := start(t, sw, fl, srv, opt)
	h.waitFor("first report", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return srv.reports >= 1
	})
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })
	if !strings.Contains(string(h.m.AppendText(nil)), `ovsagent_resyncs_total{reason="revived"} 1`) {
		t.Fatalf("the start's revived resync did not run")
	}
	if n := srv.resyncs(); n != 0 {
		t.Errorf("cache re-read %d times for the start's revived, want 0", n)
	}

	before := len(srv.freshFetches())
	h.a.Notify(Resync{Reason: ResyncOVSDBReconnect})
	h.waitFor("the OVSDB resync's details fetch", func() bool { return len(srv.freshFetches()) > before && h.inSync() })
	if n := srv.resyncs(); n != 0 {
		t.Errorf("cache re-read %d times after an OVSDB reconnect, want 0", n)
	}
	if f := srv.freshFetches()[before]; !f {
		t.Errorf("the OVSDB resync's details fetch did not bypass the cache")
	}

	h.a.Notify(Resync{Reason: ResyncRevived})
	h.waitFor("re-read after revived", func() bool { return srv.resyncs() >= 1 && h.inSync() })
}

// TestInboxOverflowKeepsCacheResync: a broker reconnect folded behind
// another full resync on an inbox overflow still re-reads the cache.
func TestInboxOverflowKeepsCacheResync(t *testing.T) {
	var o inboxOverflow
	o.add(PortChanged{PortID: "p1"}, 10)
	o.add(Resync{Reason: ResyncInboxOverflow}, 10)
	o.add(Resync{Reason: ResyncBrokerReconnect}, 10)
	var reasons []string
	for _, ev := range o.events() {
		if r, ok := ev.(Resync); ok {
			reasons = append(reasons, r.Reason)
		}
	}
	if !slices.Contains(reasons, ResyncBrokerReconnect) {
		t.Errorf("resyncs after the fold %v: the broker reconnect's is lost", reasons)
	}
}

// objectServer is the server's bulk_pull over a set of objects that a test
// changes without pushing (as while the broker connection was down): by id,
// rules by security_group_id, ports by security_group_ids. fail makes every
// pull fail as a timed-out call does.
type objectServer struct {
	mu   sync.Mutex
	objs map[string]map[string]neutron.Resource
	fail bool
}

func (s *objectServer) put(r neutron.Resource) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.objs == nil {
		s.objs = map[string]map[string]neutron.Resource{}
	}
	if s.objs[r.ResourceType()] == nil {
		s.objs[r.ResourceType()] = map[string]neutron.Resource{}
	}
	s.objs[r.ResourceType()][r.ResourceID()] = r
}

func (s *objectServer) remove(rtype, id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.objs[rtype], id)
}

func (s *objectServer) setFail(v bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.fail = v
}

func (s *objectServer) BulkPull(_ context.Context, rtype string, f neutron.Filter) ([]neutron.Resource, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail {
		return nil, errors.New("fake bulk_pull: MessagingTimeout: timed out waiting for a reply")
	}
	var out []neutron.Resource
	for _, id := range slices.Sorted(maps.Keys(s.objs[rtype])) {
		r := s.objs[rtype][id]
		ok := true
		for k, vs := range f {
			switch k {
			case "id":
				ok = ok && slices.Contains(vs, id)
			case "security_group_id":
				rule, isRule := r.(*neutron.SecurityGroupRule)
				ok = ok && isRule && slices.Contains(vs, rule.SecurityGroupID)
			case "security_group_ids":
				p, isPort := r.(*neutron.Port)
				ok = ok && isPort && slices.ContainsFunc(vs, func(g string) bool { return slices.Contains(p.SecurityGroupIDs, g) })
			default:
				ok = false
			}
		}
		if ok {
			out = append(out, fresh(r))
		}
	}
	return out, nil
}

// fresh is a shallow copy of r: a pull decodes new objects.
func fresh(r neutron.Resource) neutron.Resource {
	switch o := r.(type) {
	case *neutron.Port:
		c := *o
		return &c
	case *neutron.Network:
		c := *o
		return &c
	case *neutron.SecurityGroup:
		c := *o
		return &c
	case *neutron.SecurityGroupRule:
		c := *o
		return &c
	}
	return r
}

func tcpIngress(id, sg string, port, rev int) *neutron.SecurityGroupRule {
	return &neutron.SecurityGroupRule{ID: id, SecurityGroupID: sg, Direction: "ingress", Ethertype: "IPv4",
		Protocol: "tcp", PortRangeMin: &port, PortRangeMax: &port, RevisionNumber: int64(rev)}
}

// TestRuleDeletedDuringBrokerOutageGoesAfterReconnect: the agent's real cache
// (NeutronServer over neutron.Cache). A security group rule deleted on the
// server while the broker connection was down (its push lost) stays
// enforced until the reconnect: after it, the cache is re-read, the rule's
// deletion reaches the firewall and its flows go. The old code only
// refreshed the ports (and forgot the answered queries): the rule stayed in
// the cache and allowed tcp/22 until the agent restarted.
func TestRuleDeletedDuringBrokerOutageGoesAfterReconnect(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01") // update_device_list's
	objs := &objectServer{}
	port := takeoverPort("p1")
	port.SecurityGroupIDs = []string{"sg1"}
	objs.put(port)
	objs.put(&neutron.Network{ID: "net-a", MTU: 1450, RevisionNumber: 1})
	objs.put(&neutron.SecurityGroup{ID: "sg1", Stateful: true, RevisionNumber: 1})
	objs.put(tcpIngress("r22", "sg1", 22, 1))
	objs.put(tcpIngress("r80", "sg1", 80, 1))
	var ag atomic.Pointer[Agent]
	cache := neutron.NewCache(neutron.CacheOptions{Puller: objs, OnEvent: func(ev neutron.Event) {
		if a := ag.Load(); a != nil {
			NotifyFromCache(a, "me", ev)
		}
	}})
	ns := &NeutronServer{Cache: cache, Host: "me"}
	h := startWithCache(t, sw, fl, srv, ovsFirewallOpts(), nil, ns, nil)
	ag.Store(h.a)
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE, in sync, tcp/22 and tcp/80 allowed", func() bool {
		return srv.status("p1") == "ACTIVE" && h.inSync() && fl.has("br-int", "tp_dst=22") && fl.has("br-int", "tp_dst=80")
	})

	// The broker connection is down: r22 is deleted on the server, its push lost.
	objs.remove(neutron.TypeSecurityGroupRule, "r22")
	objs.put(&neutron.SecurityGroup{ID: "sg1", Stateful: true, RevisionNumber: 2})
	// It comes back, first with the server's pulls still failing (retried),
	// then answering. What cmd/ovs-agent does on a reconnect:
	objs.setFail(true)
	cache.Unsatisfy()
	h.a.Notify(Resync{Reason: ResyncBrokerReconnect})
	h.waitFor("a batch with the pulls failing", func() bool { return !h.inSync() })
	if !fl.has("br-int", "tp_dst=22") {
		t.Fatalf("tcp/22 flows gone while the server answered nothing")
	}
	objs.setFail(false)
	h.waitFor("tcp/22 no longer allowed after the reconnect", func() bool {
		return !fl.has("br-int", "tp_dst=22") && h.inSync()
	})
	if !fl.has("br-int", "tp_dst=80") {
		t.Errorf("tcp/80 rule lost:\n%s", strings.Join(fl.dump("br-int"), "\n"))
	}
	if cache.SecurityGroupRule("r22") != nil {
		t.Errorf("r22 still cached")
	}
}

// typedPuller is objectServer with one type's pulls failing (an outage) and
// some objects returned undecodable; it records the types asked.
type typedPuller struct {
	*objectServer
	failType string
	bad      map[string]bool // "Type/id"
	asked    []string
}

func (p *typedPuller) BulkPull(ctx context.Context, rtype string, f neutron.Filter) ([]neutron.Resource, error) {
	p.asked = append(p.asked, rtype)
	if rtype == p.failType {
		return nil, errors.New("fake bulk_pull: MessagingTimeout")
	}
	rs, err := p.objectServer.BulkPull(ctx, rtype, f)
	var out []neutron.Resource
	var bad []neutron.BadObject
	for _, r := range rs {
		if p.bad[rtype+"/"+r.ResourceID()] {
			bad = append(bad, neutron.BadObject{ID: r.ResourceID(), Err: errors.New("protocol: not a string")})
			continue
		}
		out = append(out, r)
	}
	if len(bad) > 0 {
		return out, &neutron.BadObjectsError{Type: rtype, Objects: bad}
	}
	return out, err
}

// NeutronServer.ResyncCache: the changes are news (not AgentRestarted), an
// undecodable object is named and is no failure, and the first type whose
// pull fails ends the re-read (the next types are not asked).
func TestNeutronServerResyncCache(t *testing.T) {
	objs := &objectServer{}
	objs.put(takeoverPort("p1"))
	objs.put(&neutron.Network{ID: "net-a", MTU: 1450, RevisionNumber: 1})
	objs.put(tcpIngress("r22", "sg1", 22, 1))
	pl := &typedPuller{objectServer: objs, bad: map[string]bool{}}
	var evs []neutron.Event
	cache := neutron.NewCache(neutron.CacheOptions{Puller: pl, OnEvent: func(ev neutron.Event) { evs = append(evs, ev) }})
	ns := &NeutronServer{Cache: cache, Host: "me"}
	ctx := context.Background()
	for _, f := range []struct {
		rtype string
		ids   []string
	}{{neutron.TypePort, []string{"p1"}}, {neutron.TypeNetwork, []string{"net-a"}}, {neutron.TypeSecurityGroupRule, []string{"r22"}}} {
		if err := cache.Fill(ctx, f.rtype, neutron.Filter{"id": f.ids}, true); err != nil {
			t.Fatal(err)
		}
	}
	evs = nil

	moved := takeoverPort("p1")
	moved.AdminStateUp, moved.RevisionNumber = false, 2
	objs.put(moved)
	objs.remove(neutron.TypeNetwork, "net-a")
	pl.bad["SecurityGroupRule/r22"] = true
	bad, err := ns.ResyncCache(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || bad[0] != "SecurityGroupRule r22" {
		t.Errorf("undecodable %v, want [SecurityGroupRule r22]", bad)
	}
	var got []string
	for _, ev := range evs {
		got = append(got, fmt.Sprintf("%s %s %s restarted=%v", ev.Type, ev.Kind, ev.ID, ev.AgentRestarted))
	}
	want := []string{"Network deleted net-a restarted=false", "Port updated p1 restarted=false"}
	if !slices.Equal(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if cache.SecurityGroupRule("r22") != nil {
		t.Errorf("the undecodable rule's old copy kept")
	}

	objs.put(&neutron.Network{ID: "net-b", MTU: 1450, RevisionNumber: 1})
	if err := cache.Fill(ctx, neutron.TypeNetwork, neutron.Filter{"id": {"net-b"}}, true); err != nil {
		t.Fatal(err)
	}
	pl.failType, pl.asked = neutron.TypeNetwork, nil
	if _, err := ns.ResyncCache(ctx); err == nil {
		t.Fatal("a failed pull not returned")
	}
	if n := len(pl.asked); n == 0 || pl.asked[n-1] != neutron.TypeNetwork || slices.Contains(pl.asked, neutron.TypePort) {
		t.Errorf("types asked %v, want none after Network (failed)", pl.asked)
	}
}

// portCounter is objectServer counting the ports each Port pull returned.
type portCounter struct {
	*objectServer
	mu      sync.Mutex
	pulled  map[string]int
	filters []string
}

func (p *portCounter) BulkPull(ctx context.Context, rtype string, f neutron.Filter) ([]neutron.Resource, error) {
	rs, err := p.objectServer.BulkPull(ctx, rtype, f)
	if rtype == neutron.TypePort {
		p.mu.Lock()
		for k := range f {
			p.filters = append(p.filters, k)
		}
		for _, r := range rs {
			p.pulled[r.ResourceID()]++
		}
		p.mu.Unlock()
	}
	return rs, err
}

// The re-read pulls no port twice: the members of the remote groups the
// cached rules name by group (new members found too), the other cached
// ports by id; the firewall's groups then need no port pull.
func TestNeutronServerResyncCachePullsPortsOnce(t *testing.T) {
	objs := &objectServer{}
	for _, id := range []string{"p1", "p2", "p3"} {
		p := takeoverPort(id)
		if id != "p3" {
			p.SecurityGroupIDs = []string{"sg1"}
		}
		objs.put(p)
	}
	objs.put(&neutron.SecurityGroup{ID: "sg1", Stateful: true, RevisionNumber: 1})
	r := tcpIngress("r22", "sg1", 22, 1)
	r.RemoteGroupID = "sg1"
	objs.put(r)
	pl := &portCounter{objectServer: objs, pulled: map[string]int{}}
	cache := neutron.NewCache(neutron.CacheOptions{Puller: pl})
	ns := &NeutronServer{Cache: cache, Host: "me"}
	ctx := context.Background()
	if err := cache.Fill(ctx, neutron.TypePort, neutron.Filter{"id": {"p1", "p2", "p3"}}, true); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ns.SecurityGroups(ctx, []string{"sg1"}); err != nil {
		t.Fatal(err)
	}
	p4 := takeoverPort("p4") // joined sg1 while the pushes were lost
	p4.SecurityGroupIDs = []string{"sg1"}
	objs.put(p4)
	clear(pl.pulled)
	pl.filters = nil

	if bad, err := ns.ResyncCache(ctx); err != nil || len(bad) != 0 {
		t.Fatal(bad, err)
	}
	for _, id := range []string{"p1", "p2", "p3"} {
		if pl.pulled[id] != 1 {
			t.Errorf("%s pulled %d times by the re-read, want 1 (%v)", id, pl.pulled[id], pl.pulled)
		}
	}
	if cache.Port("p4") == nil {
		t.Errorf("the new member p4 not found")
	}
	clear(pl.pulled)
	_, members, err := ns.SecurityGroups(ctx, []string{"sg1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(pl.pulled) != 0 {
		t.Errorf("the firewall's groups pulled ports again after the re-read: %v", pl.pulled)
	}
	if len(members["sg1"]) != 3 {
		t.Errorf("sg1 members %v, want p1, p2, p4", members["sg1"])
	}
}
