package neutron

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"
)

func intp(i int) *int { return &i }

func boundPort(id, host string, rev int64) *Port {
	return &Port{
		ID: id, NetworkID: "net1", MACAddress: "FA:16:3E:0A:0B:0C", AdminStateUp: true,
		DeviceID: "vm-" + id, DeviceOwner: "compute:nova", Status: "DOWN",
		Bindings:         []PortBinding{{PortID: id, Host: host, Profile: MiscDictOf(map[string]any{}), VIFType: "ovs", VNICType: "normal", Status: BindingActive}},
		BindingLevels:    []PortBindingLevel{{PortID: id, Host: host, Level: 0, Driver: "openvswitch", SegmentID: "seg1", Segment: &NetworkSegment{ID: "seg1", NetworkID: "net1", NetworkType: "vxlan", SegmentationID: intp(892)}}},
		FixedIPs:         []IPAllocation{{SubnetID: "sub1", IPAddress: "10.0.0.5"}},
		SecurityGroupIDs: []string{"sg1"},
		RevisionNumber:   rev,
	}
}

type recorder struct {
	mu  sync.Mutex
	evs []Event
}

func (r *recorder) add(e Event) { r.mu.Lock(); r.evs = append(r.evs, e); r.mu.Unlock() }
func (r *recorder) take() []Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	e := r.evs
	r.evs = nil
	return e
}

func kinds(evs []Event) []string {
	var out []string
	for _, e := range evs {
		out = append(out, fmt.Sprintf("%s %s %s", e.Type, e.Kind, e.ID))
	}
	return out
}

func TestCacheRevisionOrderingAndDeletes(t *testing.T) {
	rec := &recorder{}
	c := NewCache(CacheOptions{OnEvent: rec.add})

	c.Update(boundPort("p1", "h", 2), false)
	evs := rec.take()
	if len(evs) != 1 || evs[0].Kind != Updated || evs[0].Old != nil || evs[0].New.Revision() != 2 {
		t.Fatalf("create: %+v", evs)
	}
	if !evs[0].HasChanged("bindings", "mac_address") || evs[0].HasChanged("revision_number") {
		t.Errorf("changed = %v", evs[0].Changed)
	}

	c.Update(boundPort("p1", "h", 1), false) // older: ignored
	if evs := rec.take(); len(evs) != 0 || c.Port("p1").RevisionNumber != 2 {
		t.Fatalf("stale update applied: %v", kinds(evs))
	}

	c.Update(boundPort("p1", "h", 3), false) // newer but nothing changed: stored, no event
	if evs := rec.take(); len(evs) != 0 || c.Port("p1").RevisionNumber != 3 {
		t.Fatalf("no-op update: %v", kinds(evs))
	}

	p := boundPort("p1", "h", 3) // equal revision with a change: accepted like the reference
	p.FixedIPs = []IPAllocation{{SubnetID: "sub1", IPAddress: "10.0.0.6"}}
	c.Update(p, false)
	evs = rec.take()
	if len(evs) != 1 || !reflect.DeepEqual(evs[0].Changed, []string{"fixed_ips"}) || evs[0].Old.(*Port).FixedIPs[0].IPAddress != "10.0.0.5" {
		t.Fatalf("update: %+v", evs)
	}

	c.Delete(TypePort, "p1")
	evs = rec.take()
	if len(evs) != 1 || evs[0].Kind != Deleted || evs[0].Old.(*Port).FixedIPs[0].IPAddress != "10.0.0.6" || evs[0].New != nil {
		t.Fatalf("delete: %+v", evs)
	}
	c.Delete(TypePort, "p1")
	c.Update(boundPort("p1", "h", 9), false)
	if evs := rec.take(); len(evs) != 0 || c.Port("p1") != nil || !c.IsDeleted(TypePort, "p1") {
		t.Fatalf("after delete: %v", kinds(evs))
	}

	// A delete for a never-seen id is remembered and still reported.
	c.Delete(TypePort, "p2")
	if evs := rec.take(); len(evs) != 1 || evs[0].Old != nil {
		t.Fatalf("unknown delete: %+v", evs)
	}
}

func TestCacheDeletedTTL(t *testing.T) {
	now := time.Unix(1000, 0)
	c := NewCache(CacheOptions{DeletedTTL: time.Minute, Now: func() time.Time { return now }})
	c.Delete(TypePort, "old")
	now = now.Add(2 * time.Minute)
	c.Delete(TypePort, "new") // prunes "old"
	if c.IsDeleted(TypePort, "old") || !c.IsDeleted(TypePort, "new") {
		t.Fatal("ttl pruning")
	}
	c.Update(boundPort("old", "h", 1), false)
	if c.Port("old") == nil {
		t.Fatal("id whose delete expired should be accepted again")
	}
}

func TestCacheSecurityGroupChildren(t *testing.T) {
	rec := &recorder{}
	c := NewCache(CacheOptions{OnEvent: rec.add})
	c.Update(&SecurityGroupRule{ID: "r-remote", SecurityGroupID: "sg2", RemoteGroupID: "sg1"}, false)
	rec.take()
	c.Update(&SecurityGroup{ID: "sg1", Stateful: true, RevisionNumber: 1, Rules: []SecurityGroupRule{
		{ID: "r1", SecurityGroupID: "sg1", Direction: "ingress"},
		{ID: "r2", SecurityGroupID: "sg1", Direction: "egress"},
	}}, false)
	got := kinds(rec.take())
	want := []string{"SecurityGroup updated sg1", "SecurityGroupRule updated r1", "SecurityGroupRule updated r2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sg update events %v, want %v", got, want)
	}
	if n := len(c.RulesOf("sg1")); n != 2 {
		t.Fatalf("rules of sg1: %d", n)
	}
	c.Delete(TypeSecurityGroup, "sg1")
	got = kinds(rec.take())
	want = []string{"SecurityGroup deleted sg1", "SecurityGroupRule deleted r-remote", "SecurityGroupRule deleted r1", "SecurityGroupRule deleted r2"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("sg delete events %v, want %v", got, want)
	}
	if c.Len(TypeSecurityGroupRule) != 0 {
		t.Fatal("rules left")
	}
}

type fakePuller struct {
	mu      sync.Mutex
	calls   []string
	byID    map[string]Resource
	err     error
	latency time.Duration
	// bad: objects ("Type/id") the server returns that cannot be decoded (a
	// *BadObjectsError naming them, the others returned); badNoID: one more such
	// object, whose id cannot be read, in every reply
	bad     map[string]bool
	badNoID bool
	// failOn: a pull asking for this id fails (an outage), the others do not
	failOn string
}

func (f *fakePuller) BulkPull(ctx context.Context, rtype string, filter Filter) ([]Resource, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	b, _ := json.Marshal(filter)
	f.calls = append(f.calls, rtype+" "+string(b))
	if f.err != nil {
		return nil, f.err
	}
	var out []Resource
	var bad []BadObject
	for _, id := range filter["id"] {
		if f.failOn != "" && id == f.failOn {
			return nil, errors.New("timeout")
		}
		if f.bad[rtype+"/"+id] {
			bad = append(bad, BadObject{ID: id, Err: errors.New("fixed_ips: not a list")})
			continue
		}
		if r, ok := f.byID[rtype+"/"+id]; ok {
			out = append(out, r)
		}
	}
	if f.badNoID {
		bad = append(bad, BadObject{Err: errors.New("no id")})
	}
	if len(bad) > 0 {
		return out, &BadObjectsError{Type: rtype, Objects: bad}
	}
	return out, nil
}

func TestCacheEnsureAndDeviceDetails(t *testing.T) {
	fp := &fakePuller{byID: map[string]Resource{
		"Port/p1":      boundPort("p1", "h", 1),
		"Port/p2":      boundPort("p2", "other", 1),
		"Network/net1": &Network{ID: "net1", MTU: 1450, QosPolicyID: "q1", RevisionNumber: 1},
	}}
	rec := &recorder{}
	c := NewCache(CacheOptions{OnEvent: rec.add, Puller: fp})
	unbound := &Port{ID: "p3", NetworkID: "net1", MACAddress: "fa:16:3e:00:00:03", RevisionNumber: 1}
	c.Update(unbound, false)
	rec.take()

	ctx := context.Background()
	details, failed := c.DevicesDetails(ctx, []string{"p1", "p2", "p3", "p4"}, "h", true)
	if len(failed) != 0 || len(details) != 4 {
		t.Fatalf("details %d failed %v", len(details), failed)
	}
	wantCalls := []string{`Port {"id":["p1","p2","p4"]}`, `Network {"id":["net1"]}`}
	if !reflect.DeepEqual(fp.calls, wantCalls) {
		t.Fatalf("pulls %v, want %v", fp.calls, wantCalls)
	}
	for _, e := range rec.take() {
		if !e.AgentRestarted {
			t.Errorf("fill event without AgentRestarted: %v", e)
		}
	}
	// Asked already: no second pull, even for the id the server did not know.
	c.DevicesDetails(ctx, []string{"p1", "p4"}, "h", false)
	if len(fp.calls) != 2 {
		t.Fatalf("repeated pulls: %v", fp.calls)
	}

	d1 := details[0]
	if !d1.Bound || d1.NetworkType != "vxlan" || *d1.SegmentationID != 892 || d1.MACAddress != "fa:16:3e:0a:0b:0c" ||
		d1.MTU != 1450 || d1.NetworkQosPolicyID != "q1" || !d1.PortSecurityEnabled {
		t.Errorf("p1 details %+v", d1)
	}
	js := func(d DeviceDetails) string { b, _ := json.Marshal(d); return string(b) }
	if got := js(details[1]); got != `{"device":"p2","no_active_binding":true}` {
		t.Errorf("p2 = %s", got)
	}
	if got := js(details[2]); got != `{"device":"p3"}` {
		t.Errorf("p3 = %s", got)
	}
	if got := js(details[3]); got != `{"device":"p4"}` {
		t.Errorf("p4 = %s", got)
	}

	// A migrating port is wired on the destination before its binding moves.
	mig := boundPort("p5", "other", 1)
	mig.Bindings[0].Profile = MiscDictOf(map[string]any{"migrating_to": "h"})
	c.Update(mig, false)
	if d, err := c.DeviceDetails("p5", "h"); err != nil || !d.Bound || d.MigratingTo != "h" {
		t.Errorf("migrating: %+v %v", d, err)
	}
	// Bound but no ACTIVE binding: the reference raises; the device fails.
	broken := boundPort("p6", "h", 1)
	broken.Bindings[0].Status = BindingInactive
	c.Update(broken, false)
	if _, failed := c.DevicesDetails(ctx, []string{"p6"}, "h", false); len(failed) != 1 || failed["p6"] == nil || errors.Is(failed["p6"], ErrUnavailable) {
		t.Errorf("failed = %v, want p6 failed, not as unavailable", failed)
	}

	// A pull that failed is an outage, not an answer about the device.
	fp.err = errors.New("boom")
	if _, failed := c.DevicesDetails(ctx, []string{"p7"}, "h", false); len(failed) != 1 || !errors.Is(failed["p7"], ErrUnavailable) {
		t.Errorf("failed on pull error = %v, want p7 unavailable", failed)
	}
}

// The locally computed dict has every key the server's get_devices_details_list RPC
// returned in the capture, except the two only the server variant carries.
func TestDeviceDetailsShapeMatchesServerCapture(t *testing.T) {
	c := loadCapture(t, "neutron-vo-Port-1.7_fanout__push__updated.json")
	var bound *Port
	for _, ex := range append(c.Examples, c.DeliverExample...) {
		p, err := DecodePush(ex.Decoded.Args)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Resources {
			if port := r.(*Port); port.Segment() != nil {
				bound = port
			}
		}
	}
	if bound == nil {
		t.Fatal("no bound port pushed in the capture")
	}
	d, err := ComputeDeviceDetails(bound.ID, bound, nil, "hv1")
	if err != nil || !d.Bound {
		t.Fatalf("%+v %v", d, err)
	}
	b, _ := json.Marshal(d)
	var ours map[string]any
	_ = json.Unmarshal(b, &ours)

	server := map[string]any{}
	raw := `{"admin_state_up": true, "allowed_address_pairs": [], "device": "x", "device_owner": "compute:nova",
	 "fixed_ips": [{"ip_address": "10.100.0.49", "subnet_id": "s"}], "mac_address": "fa:16:3e:7d:43:a4", "mtu": 1450,
	 "network_id": "n", "network_type": "vxlan", "physical_network": null, "port_id": "x", "port_security_enabled": true,
	 "profile": {}, "propagate_uplink_status": false, "qos_network_policy_id": null, "qos_policy_id": null, "segmentation_id": 892}`
	if err := json.Unmarshal([]byte(raw), &server); err != nil {
		t.Fatal(err)
	}
	var missing []string
	for k, v := range server {
		if k == "mtu" || k == "propagate_uplink_status" {
			continue
		}
		ov, ok := ours[k]
		if !ok {
			missing = append(missing, k)
			continue
		}
		if reflect.TypeOf(ov) != reflect.TypeOf(v) {
			missing = append(missing, k+" (type)")
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("keys missing or typed differently: %s\nours: %s", strings.Join(missing, ", "), b)
	}
	if ours["segmentation_id"].(float64) != 892 || ours["network_type"] != "vxlan" || ours["physical_network"] != nil {
		t.Errorf("segment fields: %s", b)
	}
}

func TestSynthesize(t *testing.T) {
	base := boundPort("p1", "h1", 1)
	moved := boundPort("p1", "h2", 2)
	moved.Bindings = []PortBinding{
		{PortID: "p1", Host: "h1", Status: BindingInactive},
		{PortID: "p1", Host: "h2", Status: BindingActive},
	}
	sgChange := boundPort("p1", "h1", 2)
	sgChange.SecurityGroupIDs = []string{"sg2"}

	cases := []struct {
		name string
		ev   Event
		want []Notification
	}{
		{"port new", Event{Type: TypePort, Kind: Updated, ID: "p1", New: base, Changed: changedFields(nil, base), AgentRestarted: true},
			[]Notification{{Kind: PortUpdate, PortID: "p1", AgentRestarted: true}, {Kind: SecurityGroupsMemberUpdated, SecurityGroups: []string{"sg1"}}}},
		{"binding moved", Event{Type: TypePort, Kind: Updated, ID: "p1", Old: base, New: moved, Changed: changedFields(base, moved)},
			[]Notification{{Kind: BindingDeactivate, PortID: "p1", Host: "h1"}, {Kind: BindingActivate, PortID: "p1", Host: "h2"}}},
		{"sg change", Event{Type: TypePort, Kind: Updated, ID: "p1", Old: base, New: sgChange, Changed: changedFields(base, sgChange)},
			[]Notification{{Kind: PortUpdate, PortID: "p1"}, {Kind: SecurityGroupsMemberUpdated, SecurityGroups: []string{"sg1", "sg2"}}}},
		{"port delete", Event{Type: TypePort, Kind: Deleted, ID: "p1", Old: base},
			[]Notification{{Kind: PortDelete, PortID: "p1"}, {Kind: SecurityGroupsMemberUpdated, SecurityGroups: []string{"sg1"}}}},
		{"port delete unknown", Event{Type: TypePort, Kind: Deleted, ID: "p9"},
			[]Notification{{Kind: PortDelete, PortID: "p9"}}},
		{"network", Event{Type: TypeNetwork, Kind: Updated, ID: "n"}, []Notification{{Kind: NetworkUpdate, NetworkID: "n"}}},
		{"rule delete", Event{Type: TypeSecurityGroupRule, Kind: Deleted, ID: "r", Old: &SecurityGroupRule{ID: "r", SecurityGroupID: "sg1"}},
			[]Notification{{Kind: SecurityGroupsRuleUpdated, SecurityGroups: []string{"sg1"}}}},
		{"address group", Event{Type: TypeAddressGroup, Kind: Updated, ID: "ag"}, []Notification{{Kind: AddressGroupUpdated, AddressGroupID: "ag"}}},
		{"sg itself", Event{Type: TypeSecurityGroup, Kind: Updated, ID: "sg1"}, nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := Synthesize(tc.ev); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestEventQueue(t *testing.T) {
	q := NewEventQueue()
	c := NewCache(CacheOptions{OnEvent: q.Push})
	var wg sync.WaitGroup
	for i := 0; i < 8; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for j := 0; j < 50; j++ {
				c.Update(boundPort(fmt.Sprintf("p%d-%d", i, j), "h", 1), false)
				_ = c.Ports(nil)
			}
		}(i)
	}
	got := 0
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	for got < 400 {
		select {
		case <-q.C():
			got += len(q.Drain())
		case <-done:
			got += len(q.Drain())
			if got != 400 {
				t.Fatalf("got %d events", got)
			}
		}
	}
}

func TestCacheResync(t *testing.T) {
	changed := boundPort("p1", "h", 2)
	changed.AdminStateUp = false
	fp := &fakePuller{byID: map[string]Resource{"Port/p1": changed, "Network/net1": &Network{ID: "net1", MTU: 1450, RevisionNumber: 1}}}
	rec := &recorder{}
	c := NewCache(CacheOptions{OnEvent: rec.add, Puller: fp})
	c.Update(boundPort("p1", "h", 1), false)
	c.Update(boundPort("gone", "h", 1), false)
	c.Update(&Network{ID: "net1", MTU: 1450, RevisionNumber: 1}, false)
	rec.take()
	if err := c.Resync(context.Background(), false); err != nil {
		t.Fatal(err)
	}
	got := kinds(rec.take())
	want := []string{"Port updated p1", "Port deleted gone"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("resync events %v, want %v", got, want)
	}
	if c.Port("p1").AdminStateUp || c.Port("gone") != nil || c.Network("net1") == nil {
		t.Fatal("resync state")
	}
	fp.err = errors.New("down")
	if err := c.Resync(context.Background(), false); err == nil {
		t.Fatal("resync error swallowed")
	}
}

// ResyncTypes re-reads the given types only, and forgets only their answered queries:
// an Ensure of another type is still answered from the cache.
func TestCacheResyncTypes(t *testing.T) {
	fp := &fakePuller{byID: map[string]Resource{"Network/net1": &Network{ID: "net1", MTU: 1450, RevisionNumber: 1}}}
	rec := &recorder{}
	c := NewCache(CacheOptions{OnEvent: rec.add, Puller: fp})
	ctx := context.Background()
	c.Update(boundPort("gone", "h", 1), false)
	c.Update(&Network{ID: "net1", MTU: 1450, RevisionNumber: 1}, false)
	c.Update(&SecurityGroupRule{ID: "r1", SecurityGroupID: "sg1", RevisionNumber: 1}, false)
	if err := c.Ensure(ctx, TypeSecurityGroupRule, Filter{"security_group_id": {"sg1"}}, false); err != nil {
		t.Fatal(err)
	}
	if err := c.Ensure(ctx, TypeNetwork, Filter{"router:external": {"true"}}, false); err != nil {
		t.Fatal(err)
	}
	rec.take()
	fp.calls = nil
	if err := c.ResyncTypes(ctx, []string{TypeNetwork}, false); err != nil {
		t.Fatal(err)
	}
	if got := kinds(rec.take()); len(got) != 0 {
		t.Errorf("events %v, want none (the port and the rule not re-read, the network unchanged)", got)
	}
	if c.Port("gone") == nil || c.SecurityGroupRule("r1") == nil {
		t.Errorf("a type not asked for was re-read")
	}
	if len(fp.calls) != 1 || !strings.HasPrefix(fp.calls[0], "Network ") {
		t.Errorf("pulls %v, want one of Network", fp.calls)
	}
	fp.calls = nil
	_ = c.Ensure(ctx, TypeSecurityGroupRule, Filter{"security_group_id": {"sg1"}}, false)
	_ = c.Ensure(ctx, TypeNetwork, Filter{"router:external": {"true"}}, false)
	if len(fp.calls) != 1 || !strings.HasPrefix(fp.calls[0], "Network ") {
		t.Errorf("pulls after the resync %v, want the Network query alone asked again", fp.calls)
	}
}

// ResyncIDs re-reads the given cached ids only (not the uncached ones) and forgets no
// answered query.
func TestCacheResyncIDs(t *testing.T) {
	changed := boundPort("p1", "h", 2)
	changed.AdminStateUp = false
	fp := &fakePuller{byID: map[string]Resource{"Port/p1": changed, "Port/p2": boundPort("p2", "h", 2)}}
	rec := &recorder{}
	c := NewCache(CacheOptions{OnEvent: rec.add, Puller: fp})
	ctx := context.Background()
	c.Update(boundPort("p1", "h", 1), false)
	c.Update(boundPort("p2", "h", 1), false)
	c.Update(boundPort("gone", "h", 1), false)
	if err := c.Ensure(ctx, TypePort, Filter{"security_group_ids": {"sg1"}}, false); err != nil {
		t.Fatal(err)
	}
	rec.take()
	fp.calls = nil
	if err := c.ResyncIDs(ctx, TypePort, []string{"p1", "gone", "uncached"}, false); err != nil {
		t.Fatal(err)
	}
	got := kinds(rec.take())
	if want := []string{"Port updated p1", "Port deleted gone"}; !reflect.DeepEqual(got, want) {
		t.Errorf("events %v, want %v", got, want)
	}
	if want := []string{`Port {"id":["gone","p1"]}`}; !reflect.DeepEqual(fp.calls, want) {
		t.Errorf("pulls %v, want %v", fp.calls, want)
	}
	if c.Port("p2").RevisionNumber != 1 {
		t.Errorf("p2 re-read")
	}
	fp.calls = nil
	_ = c.Ensure(ctx, TypePort, Filter{"security_group_ids": {"sg1"}}, false)
	if len(fp.calls) != 0 {
		t.Errorf("an answered query forgotten: %v", fp.calls)
	}
}

// hookPuller calls during before each pull it passes on.
type hookPuller struct {
	Puller
	during func(rtype string)
}

func (h *hookPuller) BulkPull(ctx context.Context, rtype string, filter Filter) ([]Resource, error) {
	h.during(rtype)
	return h.Puller.BulkPull(ctx, rtype, filter)
}

// An object of a resync's reply that cannot be decoded costs that object alone: the
// others of the reply are updated or deleted as without it. It still exists on the
// server, so it is not deleted, but its old copy is not kept either (a refreshed object
// that does not decode is not used from its older copy): Ensure asks for it again. The
// error names it and is no outage.
func TestCacheResyncUndecodableObject(t *testing.T) {
	changed := boundPort("p1", "h", 2)
	changed.AdminStateUp = false
	fp := &fakePuller{
		byID: map[string]Resource{"Port/p1": changed, "Port/bad": boundPort("bad", "h", 2)},
		bad:  map[string]bool{"Port/bad": true},
	}
	rec := &recorder{}
	c := NewCache(CacheOptions{OnEvent: rec.add, Puller: fp})
	for _, id := range []string{"bad", "gone", "p1"} {
		c.Update(boundPort(id, "h", 1), false)
	}
	rec.take()
	ctx := context.Background()
	err := c.Resync(ctx, false)
	bad, failed := SplitPullError(err)
	if err == nil || failed || len(bad) != 1 || bad[0].ID != "bad" || !errors.Is(err, ErrBadReply) {
		t.Fatalf("resync: %v (bad %v, failed %v); want the undecodable object named, no outage", err, bad, failed)
	}
	if got, want := kinds(rec.take()), []string{"Port updated p1", "Port deleted gone"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("resync events %v, want %v", got, want)
	}
	if c.Port("p1").AdminStateUp || c.Port("gone") != nil || !c.IsDeleted(TypePort, "gone") {
		t.Fatal("the other objects of the reply were not applied")
	}
	if c.Port("bad") != nil || c.IsDeleted(TypePort, "bad") {
		t.Fatalf("undecodable object: cached %v, deleted %v; want its old copy forgotten, not deleted", c.Port("bad") != nil, c.IsDeleted(TypePort, "bad"))
	}
	// p1's query was answered, bad's was not: Ensure asks for bad alone.
	n := len(fp.calls)
	if err := c.Ensure(ctx, TypePort, Filter{"id": {"p1", "bad"}}, false); err == nil || len(fp.calls) != n+1 || fp.calls[n] != `Port {"id":["bad"]}` {
		t.Fatalf("ensure after resync: %v, pulls %v; want bad asked for again, alone", err, fp.calls[n:])
	}
	// Decodable again: cached, and a push for it is taken (it was never deleted).
	fp.mu.Lock()
	fp.bad = nil
	fp.mu.Unlock()
	if err := c.Ensure(ctx, TypePort, Filter{"id": {"bad"}}, false); err != nil || c.Port("bad") == nil || c.Port("bad").RevisionNumber != 2 {
		t.Fatalf("decodable again: %v, %v", err, c.Port("bad"))
	}
	c.Update(boundPort("bad", "h", 3), false)
	if c.Port("bad").RevisionNumber != 3 {
		t.Fatal("a push for the object refused")
	}
}

// A copy of an undecodable object that a push brought while the resync's pull was out
// is newer than the pull: it is kept.
func TestCacheResyncKeepsCopyPushedDuringPull(t *testing.T) {
	fp := &fakePuller{byID: map[string]Resource{}, bad: map[string]bool{"Port/bad": true}}
	var c *Cache
	c = NewCache(CacheOptions{Puller: &hookPuller{Puller: fp, during: func(string) { c.Update(boundPort("bad", "h", 5), false) }}})
	c.Update(boundPort("bad", "h", 1), false)
	if err := c.Resync(context.Background(), false); err == nil {
		t.Fatal("resync error swallowed")
	}
	if p := c.Port("bad"); p == nil || p.RevisionNumber != 5 {
		t.Fatalf("cached %v, want the copy pushed during the pull (revision 5)", p)
	}
}

// A bad object whose id could not be read may be any id the reply did not return:
// none of those is deleted (or forgotten); the objects returned are updated.
func TestCacheResyncBadObjectWithoutID(t *testing.T) {
	changed := boundPort("p1", "h", 2)
	changed.AdminStateUp = false
	fp := &fakePuller{byID: map[string]Resource{"Port/p1": changed}, badNoID: true}
	rec := &recorder{}
	c := NewCache(CacheOptions{OnEvent: rec.add, Puller: fp})
	c.Update(boundPort("p1", "h", 1), false)
	c.Update(boundPort("p2", "h", 1), false)
	rec.take()
	err := c.Resync(context.Background(), false)
	if _, failed := SplitPullError(err); err == nil || failed {
		t.Fatalf("resync: %v; want the undecodable object reported, no outage", err)
	}
	if got, want := kinds(rec.take()), []string{"Port updated p1"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("resync events %v, want %v", got, want)
	}
	if c.Port("p2") == nil || c.IsDeleted(TypePort, "p2") {
		t.Fatal("an id not returned was dropped though the bad object may be it")
	}
}

// Chunks of a resync fail independently: a chunk with an undecodable object is applied
// but for it, a chunk whose pull failed changes nothing, the others are applied.
func TestCacheResyncChunksFailIndependently(t *testing.T) {
	fp := &fakePuller{byID: map[string]Resource{}, bad: map[string]bool{}}
	rec := &recorder{}
	c := NewCache(CacheOptions{OnEvent: rec.add, Puller: fp})
	var ids []string
	for i := 0; i < 2*ResyncChunk+1; i++ { // three chunks: [0,334) [334,668) [668,1001)
		id := fmt.Sprintf("p%04d", i)
		ids = append(ids, id)
		c.Update(boundPort(id, "h", 1), false)
		fp.byID["Port/"+id] = boundPort(id, "h", 1)
	}
	rec.take()
	change := func(id string) {
		p := boundPort(id, "h", 2)
		p.AdminStateUp = false
		fp.byID["Port/"+id] = p
	}
	// chunk 1: one undecodable, one changed, one deleted
	fp.bad["Port/p0010"] = true
	change("p0020")
	delete(fp.byID, "Port/p0030")
	// chunk 2: its pull fails; one changed, one deleted there are not seen
	fp.failOn = "p0400"
	change("p0410")
	delete(fp.byID, "Port/p0420")
	// chunk 3: one changed, one deleted
	change("p0700")
	delete(fp.byID, "Port/p0710")

	err := c.Resync(context.Background(), false)
	bad, failed := SplitPullError(err)
	if !failed || len(bad) != 1 || bad[0].ID != "p0010" {
		t.Fatalf("resync: %v (bad %v, failed %v); want p0010 undecodable and an outage", err, bad, failed)
	}
	got := kinds(rec.take())
	sort.Strings(got)
	want := []string{"Port deleted p0030", "Port deleted p0710", "Port updated p0020", "Port updated p0700"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("resync events %v, want %v", got, want)
	}
	if c.Port("p0010") != nil || c.IsDeleted(TypePort, "p0010") {
		t.Error("undecodable p0010: old copy kept or deleted")
	}
	if p := c.Port("p0410"); p == nil || !p.AdminStateUp || c.Port("p0420") == nil {
		t.Error("the failed chunk was applied")
	}
	if c.Len(TypePort) != len(ids)-3 {
		t.Errorf("%d cached, want %d", c.Len(TypePort), len(ids)-3)
	}
}

func TestCacheFillChunks(t *testing.T) {
	fp := &fakePuller{byID: map[string]Resource{}}
	var ids []string
	for i := 0; i < 2*ResyncChunk+1; i++ {
		id := fmt.Sprintf("p%04d", i)
		ids = append(ids, id)
		fp.byID["Port/"+id] = boundPort(id, "h", 1)
	}
	c := NewCache(CacheOptions{Puller: fp})
	if err := c.Fill(context.Background(), TypePort, Filter{"id": ids}, false); err != nil {
		t.Fatal(err)
	}
	if len(fp.calls) != 3 || c.Len(TypePort) != len(ids) {
		t.Fatalf("%d pulls, %d cached", len(fp.calls), c.Len(TypePort))
	}
	if err := c.Ensure(context.Background(), TypePort, Filter{"id": ids}, false); err != nil || len(fp.calls) != 3 {
		t.Fatalf("ensure after fill pulled again: %d %v", len(fp.calls), err)
	}
	// Resync re-reads them in the same chunks: three of 334, 334 and 333.
	if err := c.Resync(context.Background(), false); err != nil || len(fp.calls) != 6 || c.Len(TypePort) != len(ids) {
		t.Fatalf("resync: %d pulls in all, %d cached, %v", len(fp.calls), c.Len(TypePort), err)
	}
	for _, call := range fp.calls {
		var f Filter
		if err := json.Unmarshal([]byte(strings.TrimPrefix(call, TypePort+" ")), &f); err != nil || len(f["id"]) > 334 {
			t.Errorf("pull %.60s...: %d ids (%v), want at most 334", call, len(f["id"]), err)
		}
	}
}

// BenchmarkCacheUpdate measures recording a changed port (revision check, field diff,
// event) — the per-port cost of a push after decoding.
func BenchmarkCacheUpdate(b *testing.B) {
	n := 0
	c := NewCache(CacheOptions{OnEvent: func(Event) { n++ }})
	ports := make([]*Port, 1000)
	for i := range ports {
		ports[i] = boundPort(fmt.Sprintf("p%d", i), "h", 1)
		c.Update(ports[i], false)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		p := *ports[i%len(ports)]
		p.RevisionNumber = int64(i + 2)
		p.Status = []string{"ACTIVE", "DOWN"}[i%2]
		c.Update(&p, false)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "ports/s")
	if n == 0 {
		b.Fatal("no events")
	}
}

// A network_update that changes a VLAN network's segmentation id pushes the
// Network only; the ports' binding levels keep the old id. The details must
// carry the new one, or the ports stay on the old provider VLAN (the
// reference learns it from get_network_details).
func TestDetailsFollowNetworkSegmentationChange(t *testing.T) {
	p := boundPort("p1", "h", 1)
	p.BindingLevels[0].Segment = &NetworkSegment{ID: "seg1", NetworkID: "net1", NetworkType: "vlan", PhysicalNetwork: "physnet1", SegmentationID: intp(100)}
	net := &Network{ID: "net1", MTU: 1500, Segments: []NetworkSegment{{ID: "seg1", NetworkID: "net1", NetworkType: "vlan", PhysicalNetwork: "physnet1", SegmentationID: intp(101)}}}
	d, err := ComputeDeviceDetails("p1", p, net, "h")
	if err != nil || d.SegmentationID == nil || *d.SegmentationID != 101 || d.PhysicalNetwork != "physnet1" {
		t.Fatalf("details = %+v, %v; want segmentation_id 101 from the pushed network", d, err)
	}
	// A network that does not (yet) carry the port's segment leaves it alone.
	other := &Network{ID: "net1", Segments: []NetworkSegment{{ID: "segX", SegmentationID: intp(7)}}}
	if d, _ := ComputeDeviceDetails("p1", p, other, "h"); *d.SegmentationID != 100 {
		t.Errorf("segmentation_id = %d, want the port's 100", *d.SegmentationID)
	}
}

// After Unsatisfy (a broker reconnection: pushes may have been missed) Ensure
// asks the server again for a query it answered; the resources stay cached.
func TestCacheUnsatisfyPullsAgain(t *testing.T) {
	fp := &fakePuller{byID: map[string]Resource{}}
	c := NewCache(CacheOptions{Puller: fp})
	ctx := context.Background()
	f := Filter{"security_group_id": {"sg1"}}
	for i := 0; i < 2; i++ {
		if err := c.Ensure(ctx, TypeSecurityGroupRule, f, false); err != nil {
			t.Fatal(err)
		}
	}
	if len(fp.calls) != 1 {
		t.Fatalf("pulls before Unsatisfy: %v, want one", fp.calls)
	}
	c.Update(&Port{ID: "p1", RevisionNumber: 1}, false)
	c.Unsatisfy()
	if err := c.Ensure(ctx, TypeSecurityGroupRule, f, false); err != nil {
		t.Fatal(err)
	}
	if len(fp.calls) != 2 {
		t.Fatalf("pulls after Unsatisfy: %v, want a second", fp.calls)
	}
	if c.Port("p1") == nil {
		t.Fatal("Unsatisfy dropped a cached resource")
	}
}

// The 2026.2 server's get_device_details carries 'hints': port_obj.hints.hints
// (None without hints); ComputeDeviceDetails must pass them on for the agent
// to apply (porthints).
func TestDeviceDetailsCarryHints(t *testing.T) {
	c := loadCapture(t, "neutron-vo-Port-1.7_fanout__push__updated.json")
	var bound *Port
	for _, ex := range append(c.Examples, c.DeliverExample...) {
		p, err := DecodePush(ex.Decoded.Args)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range p.Resources {
			if port := r.(*Port); port.Segment() != nil {
				bound = port
			}
		}
	}
	if bound == nil {
		t.Fatal("no bound port pushed in the capture")
	}
	hinted := *bound
	h := MiscDictOf(map[string]any{"openvswitch": map[string]any{"other_config": map[string]any{"tx-steering": "hash"}}})
	hinted.Hints = &h
	for _, tc := range []struct {
		port *Port
		want string
	}{
		{bound, `null`},
		{&hinted, `{"openvswitch":{"other_config":{"tx-steering":"hash"}}}`},
	} {
		d, err := ComputeDeviceDetails(tc.port.ID, tc.port, nil, "hv1")
		if err != nil || !d.Bound {
			t.Fatalf("%+v %v", d, err)
		}
		b, _ := json.Marshal(d)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		if got, ok := m["hints"]; !ok || string(got) != tc.want {
			t.Errorf("details hints = %s (present %v), want %s", got, ok, tc.want)
		}
		if tc.port.Hints != nil && d.Hints.Get("openvswitch") == nil {
			t.Errorf("DeviceDetails.Hints %v lost the openvswitch key", d.Hints.Map())
		}
	}
}

// hintsPort is Port p1 at revision rev, with hints (a Port 1.10+ field) or without
// (the same port as a Port 1.7 copy carries it).
func hintsPort(rev int64, hints bool) *Port {
	p := &Port{ID: "p1", RevisionNumber: rev}
	if hints {
		h := MiscDictOf(map[string]any{"openvswitch": map[string]any{"other_config": map[string]any{"tx-steering": "thread"}}})
		p.Hints = &h
	}
	return p
}

// pushAt pushes p to c as an update at OVO version v.
func pushAt(c *Cache, p *Port, v string) {
	c.ApplyPushAt(&Push{EventType: EventUpdated, Resources: []Resource{p}}, v)
}

// hasHints reports whether c holds p1 with its hints.
func hasHints(c *Cache) bool { p := c.Port("p1"); return p != nil && p.Hints != nil }

// TestPushOfOlderVersionSameRevisionIgnored: while two versions' push topics are served,
// the server pushes one change on each in no set order; the older copy (here Port 1.7,
// without hints) must not replace the newer one (1.11) of the same revision, but a newer
// revision at any version is taken, and the newer version of a revision replaces the older.
func TestPushOfOlderVersionSameRevisionIgnored(t *testing.T) {
	c := NewCache(CacheOptions{})

	pushAt(c, hintsPort(5, true), "1.11")
	pushAt(c, hintsPort(5, false), "1.7")
	if !hasHints(c) {
		t.Fatal("a Port 1.7 push of the same revision replaced the 1.11 copy")
	}
	pushAt(c, hintsPort(6, false), "1.7")
	if hasHints(c) || c.Port("p1").Revision() != 6 {
		t.Fatal("a newer revision at an older version was not taken")
	}
	pushAt(c, hintsPort(6, true), "1.11")
	if !hasHints(c) {
		t.Fatal("the newer version of the same revision did not replace the older")
	}
	// a pull (no version) of the same revision is taken, as before
	c.Update(hintsPort(6, false), false)
	if hasHints(c) {
		t.Fatal("an update of unknown version was ignored")
	}
	pushAt(c, hintsPort(6, true), "1.8")
	pushAt(c, hintsPort(6, false), "1.7")
	if !hasHints(c) {
		t.Fatal("1.7 after 1.8 of the same revision replaced it")
	}
	for _, tc := range []struct {
		a, b string
		want bool
	}{{"1.7", "1.11", true}, {"1.11", "1.7", false}, {"1.7", "1.7", false}, {"1.7", "", false}, {"", "1.7", false}, {"2.0", "1.11", false}, {"1.x", "1.2", false}} {
		if got := olderVersion(tc.a, tc.b); got != tc.want {
			t.Errorf("olderVersion(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// versionedPuller is a fakePuller that pulls at version (a VersionedPuller).
type versionedPuller struct {
	*fakePuller
	version string
}

func (v *versionedPuller) BulkPullVersions(ctx context.Context, rtype string, filter Filter) ([]Resource, []string, error) {
	rs, err := v.BulkPull(ctx, rtype, filter)
	versions := make([]string, len(rs))
	for i := range versions {
		versions[i] = v.version
	}
	return rs, versions, err
}

// TestPulledVersionKeptAgainstOlderPush: an object that Fill or Resync pulled at the
// agent's version (Port 1.11, with hints) is not replaced by a push of the same revision
// at an older version (1.7, without hints), as a pushed one is not; a newer revision is
// taken. A Puller that does not tell its versions records none, as before.
func TestPulledVersionKeptAgainstOlderPush(t *testing.T) {
	fp := &fakePuller{byID: map[string]Resource{"Port/p1": hintsPort(5, true)}}
	c := NewCache(CacheOptions{Puller: &versionedPuller{fakePuller: fp, version: "1.11"}})
	ctx := context.Background()

	if err := c.Fill(ctx, TypePort, Filter{"id": {"p1"}}, false); err != nil || !hasHints(c) {
		t.Fatalf("fill: %v, hints %v", err, hasHints(c))
	}
	pushAt(c, hintsPort(5, false), "1.7")
	if !hasHints(c) {
		t.Fatal("a Port 1.7 push of the same revision replaced the copy Fill pulled at 1.11")
	}
	pushAt(c, hintsPort(6, false), "1.7")
	if hasHints(c) || c.Port("p1").Revision() != 6 {
		t.Fatal("a newer revision at an older version was not taken")
	}
	fp.byID["Port/p1"] = hintsPort(6, true)
	if err := c.Resync(ctx, false); err != nil || !hasHints(c) {
		t.Fatalf("resync: %v, hints %v (the 1.11 pull of the revision pushed at 1.7 not taken)", err, hasHints(c))
	}
	pushAt(c, hintsPort(6, false), "1.7")
	if !hasHints(c) {
		t.Fatal("a Port 1.7 push of the same revision replaced the copy Resync pulled at 1.11")
	}

	// A plain Puller: its objects' version is unknown, an older push replaces them.
	plain := NewCache(CacheOptions{Puller: &fakePuller{byID: map[string]Resource{"Port/p1": hintsPort(5, true)}}})
	if err := plain.Fill(ctx, TypePort, Filter{"id": {"p1"}}, false); err != nil || plain.Port("p1").Hints == nil {
		t.Fatalf("plain fill: %v", err)
	}
	pushAt(plain, hintsPort(5, false), "1.7")
	if hasHints(plain) {
		t.Fatal("a push replaced nothing pulled by a Puller of unknown versions")
	}
}

// capturedPortReply is the captured bulk_pull reply of ports (two, one bound to hv1),
// element by element.
func capturedPortReply(t *testing.T) []json.RawMessage {
	t.Helper()
	for _, ex := range loadCapture(t, "neutron__bulk_pull.json").Examples {
		var args struct {
			ResourceType string `json:"resource_type"`
		}
		if err := json.Unmarshal(ex.Decoded.Args, &args); err != nil {
			t.Fatal(err)
		}
		if args.ResourceType != TypePort {
			continue
		}
		var elems []json.RawMessage
		if err := json.Unmarshal(ex.Reply[0].Decoded.Result, &elems); err != nil {
			t.Fatal(err)
		}
		return elems
	}
	t.Fatal("no Port bulk_pull in the capture")
	return nil
}

// One object of a bulk_pull reply that cannot be decoded costs that port alone: the
// other ports of the batch get their details, the bad one fails as the server's answer
// (ErrBadReply), not as an outage, and is asked for again next time.
func TestUndecodableObjectFailsItsPortOnly(t *testing.T) {
	good := capturedPortReply(t)
	var ids []string
	for _, e := range good {
		r, err := DecodeResource(e)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, r.ResourceID())
	}
	bad := json.RawMessage(prim("Port", "1.7", `{"id": "bad", "network_id": "n", "fixed_ips": [3]}`))
	reply, _ := json.Marshal([]json.RawMessage{good[0], bad, good[1]})
	var mu sync.Mutex
	portPulls := 0
	rpc := &fakeRPC{answer: func(c sentCall) (any, error) {
		if c.Method != "bulk_pull" {
			return nil, fmt.Errorf("unexpected %s", c.Method)
		}
		if c.Args["resource_type"] != TypePort {
			return json.RawMessage(`[]`), nil
		}
		mu.Lock()
		portPulls++
		mu.Unlock()
		return json.RawMessage(reply), nil
	}}
	c := NewCache(CacheOptions{Puller: NewClient(rpc, "hv1")})
	ctx := context.Background()
	details, failed := c.DevicesDetails(ctx, []string{ids[0], "bad", ids[1]}, "hv1", false)
	if len(details) != 2 || details[0].Device != ids[0] || details[1].Device != ids[1] {
		t.Fatalf("details of %d devices, failed %v: the good ports of the reply must get theirs", len(details), failed)
	}
	if !details[0].Bound && !details[1].Bound {
		t.Errorf("neither captured port bound to hv1: %+v", details)
	}
	if len(failed) != 1 || !errors.Is(failed["bad"], ErrBadReply) || errors.Is(failed["bad"], ErrUnavailable) {
		t.Fatalf("failed = %v, want bad alone, as an undecodable answer", failed)
	}
	if !strings.Contains(failed["bad"].Error(), `"bad"`) {
		t.Errorf("reason %q does not name the object", failed["bad"])
	}
	// The bad one's query stays open: asked again; the good ones are cached.
	if _, failed := c.DevicesDetails(ctx, []string{ids[0], "bad"}, "hv1", false); failed["bad"] == nil || failed[ids[0]] != nil {
		t.Errorf("second call failed = %v", failed)
	}
	mu.Lock()
	defer mu.Unlock()
	if portPulls != 2 {
		t.Errorf("%d Port pulls, want 2 (the bad object asked for again, the good ones cached)", portPulls)
	}
}

// A pull that fails fails the devices it concerned as unavailable, its port's or its
// network's; a port whose network is cached does not need that pull.
func TestFailedPullIsUnavailable(t *testing.T) {
	fp := &fakePuller{byID: map[string]Resource{"Port/p1": boundPort("p1", "h", 1), "Port/p2": boundPort("p2", "h", 1)}}
	c := NewCache(CacheOptions{Puller: fp})
	ctx := context.Background()
	fp.err = errors.New("timeout")
	_, failed := c.DevicesDetails(ctx, []string{"p1"}, "h", false)
	if !errors.Is(failed["p1"], ErrUnavailable) || errors.Is(failed["p1"], ErrBadReply) {
		t.Fatalf("port pull failed: %v", failed)
	}
	// The ports come, their network's pull fails: the reference fails the device too.
	c.Update(boundPort("p1", "h", 1), false)
	_, failed = c.DevicesDetails(ctx, []string{"p1"}, "h", false)
	if !errors.Is(failed["p1"], ErrUnavailable) {
		t.Fatalf("network pull failed: %v", failed)
	}
	fp.err = nil
	c.Update(&Network{ID: "net1", MTU: 1450, RevisionNumber: 1}, false)
	details, failed := c.DevicesDetails(ctx, []string{"p1", "p2"}, "h", false)
	if len(failed) != 0 || len(details) != 2 || details[0].MTU != 1450 {
		t.Fatalf("after the outage: %+v, failed %v", details, failed)
	}
}

// A distributed router port is bound per host: without this host's distributed
// binding it is not bound here (the server swallows its update_device_up: the
// port stays DOWN for the host and l2pop sends the host no FDB of its network);
// with it, its status is that binding's, not the port's (ACTIVE as soon as any
// host's is).
func TestDVRPortBoundPerHost(t *testing.T) {
	p := boundPort("qr1", "", 1)
	p.DeviceOwner = DeviceOwnerDVRInterface
	p.Status = "ACTIVE"
	p.DistributedBindings = []PortBinding{{PortID: "qr1", Host: "hv3", Status: "ACTIVE"}}
	d, err := ComputeDeviceDetails("qr1", p, nil, "hv2")
	if err != nil || d.Bound {
		t.Fatalf("without hv2's distributed binding: %+v, %v; want not bound", d, err)
	}
	p.DistributedBindings = append(p.DistributedBindings, PortBinding{PortID: "qr1", Host: "hv2", Status: "DOWN"})
	d, err = ComputeDeviceDetails("qr1", p, nil, "hv2")
	if err != nil || !d.Bound || d.Status != "DOWN" {
		t.Fatalf("with hv2's binding (DOWN): %+v, %v; want bound, status DOWN", d, err)
	}
}
