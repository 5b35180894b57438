//go:build integration

package trunk

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/neutron"
	"github.com/ovsagent/ovsagent/internal/ovsdb"
	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

func TestChanges(t *testing.T) {
	vm := ovsdb.BridgeIface{Name: "tap1", ExternalIDs: map[string]string{KeyBridgeName: "tbr-a", KeyTrunkID: "a", KeyIfaceID: "p"}}
	plain := ovsdb.BridgeIface{Name: "tap2", ExternalIDs: map[string]string{KeyIfaceID: "q"}}
	a1 := ovsdb.BridgeSnapshot{Name: "tbr-a", UUID: "1", Ifaces: []ovsdb.BridgeIface{{Name: "tbr-a"}, vm}}
	a2 := ovsdb.BridgeSnapshot{Name: "tbr-a", UUID: "2", Ifaces: []ovsdb.BridgeIface{{Name: "tbr-a"}}}
	b := ovsdb.BridgeSnapshot{Name: "tbr-b", UUID: "3", Ifaces: []ovsdb.BridgeIface{{Name: "tbr-b"}, plain}}
	cases := []struct {
		name       string
		prev, cur  []ovsdb.BridgeSnapshot
		added      []string
		removedIfs int
	}{
		{"start", nil, []ovsdb.BridgeSnapshot{a1, b}, []string{"tbr-a", "tbr-b"}, 0},
		{"nothing", []ovsdb.BridgeSnapshot{a1, b}, []ovsdb.BridgeSnapshot{a1, b}, nil, 0},
		{"bridge deleted", []ovsdb.BridgeSnapshot{a1, b}, []ovsdb.BridgeSnapshot{b}, nil, 1},
		{"vm left", []ovsdb.BridgeSnapshot{a1}, []ovsdb.BridgeSnapshot{{Name: "tbr-a", UUID: "1"}}, nil, 1},
		{"re-created", []ovsdb.BridgeSnapshot{a1}, []ovsdb.BridgeSnapshot{a2}, []string{"tbr-a"}, 1},
		{"no metadata", []ovsdb.BridgeSnapshot{b}, nil, nil, 0},
	}
	for _, c := range cases {
		added, removed := Changes(c.prev, c.cur)
		if !reflect.DeepEqual(added, c.added) || len(removed) != c.removedIfs {
			t.Errorf("%s: added %v removed %v", c.name, added, removed)
		}
		for _, r := range removed {
			if r.Bridge != "tbr-a" || r.ExternalIDs[KeyIfaceID] != "p" {
				t.Errorf("%s: removed %+v", c.name, r)
			}
		}
	}
}

// fakeRPC is the server side of the trunk RPC for one trunk.
type fakeRPC struct {
	mu       sync.Mutex
	trunk    neutron.Trunk
	macs     map[string]string
	unbound  map[string]bool
	statuses []string
	calls    []string
	ch       chan string
}

func (f *fakeRPC) GetTrunkDetails(_ context.Context, parent string) (*neutron.Trunk, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, "get_trunk_details")
	if parent != f.trunk.PortID {
		return nil, nil
	}
	t := f.trunk
	t.SubPorts = slices.Clone(t.SubPorts)
	return &t, nil
}

func (f *fakeRPC) UpdateSubportBindings(_ context.Context, subs []neutron.SubPort) (map[string][]neutron.BoundSubport, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, fmt.Sprintf("update_subport_bindings %d", len(subs)))
	out := map[string][]neutron.BoundSubport{}
	for _, s := range subs {
		if !f.unbound[s.PortID] {
			out[s.TrunkID] = append(out[s.TrunkID], neutron.BoundSubport{ID: s.PortID, MACAddress: f.macs[s.PortID]})
		}
	}
	return out, nil
}

func (f *fakeRPC) UpdateTrunkStatus(_ context.Context, id, status string) error {
	f.mu.Lock()
	f.statuses = append(f.statuses, status)
	f.calls = append(f.calls, "update_trunk_status "+status)
	f.mu.Unlock()
	f.ch <- status
	return nil
}

func waitStatus(t *testing.T, f *fakeRPC, want string) {
	t.Helper()
	select {
	case got := <-f.ch:
		if got != want {
			t.Fatalf("status %s, want %s (calls %v)", got, want, f.calls)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("no status reported, want %s (calls %v)", want, f.calls)
	}
}

func waitPorts(t *testing.T, o *ovstest.OVS, bridge string, want ...string) {
	t.Helper()
	slices.Sort(want)
	var got []string
	for i := 0; i < 200; i++ {
		out, err := o.Vsctl("list-ports", bridge)
		got = nil
		if err == nil {
			got = strings.Fields(out)
		}
		if slices.Equal(got, want) || (len(want) == 0 && len(got) == 0) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("%s ports %v, want %v", bridge, got, want)
}

// The handler on a private OVS with the server faked: a VM plugged into a trunk
// bridge is wired (ACTIVE), subports come and go by push, the VM's departure removes
// the br-int ends, a bridge without a VM is disposed of, an unbound subport is DEGRADED.
func TestHandlerOnOVS(t *testing.T) {
	o := ovstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := ovsdb.Dial(ctx, o.DB, ovsdb.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	vsctl := func(args ...string) {
		t.Helper()
		if _, err := o.Vsctl(args...); err != nil {
			t.Fatal(err)
		}
	}
	vsctl("add-br", "br-int", "--", "set", "Bridge", "br-int", "datapath_type=netdev")
	f := &fakeRPC{trunk: neutron.Trunk{ID: refTrunk, PortID: refParent, SubPorts: refSubPorts(refTrunk, refS1, refS2)},
		macs: refBound(), unbound: map[string]bool{}, ch: make(chan string, 8)}
	h := &Handler{IntBridge: "br-int", RPC: f, OVS: c, VMWait: time.Second, Poll: 50 * time.Millisecond}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { h.Run(runCtx, c.WatchBridgePrefix(runCtx, BridgePrefix)); close(done) }()
	defer func() { stop(); <-done }()

	tbr := BridgeName(refTrunk)
	pi, pt := ParentPatchNames(refParent)
	s1i, s1t := SubportPatchNames(refS1)
	s2i, s2t := SubportPatchNames(refS2)
	s3i, s3t := SubportPatchNames(refS3)
	// os-vif: the bridge and the VM port in one go (the handler waits for the VM anyway).
	vsctl("add-br", tbr, "--", "set", "Bridge", tbr, "datapath_type=netdev", "--",
		"add-port", tbr, refVM, "--", "set", "Interface", refVM, "type=internal",
		"external_ids:iface-id="+refParent, "external_ids:attached-mac="+refPMAC)
	waitStatus(t, f, neutron.TrunkActive)
	waitPorts(t, o, "br-int", pi, s1i, s2i)
	waitPorts(t, o, tbr, refVM, pt, s1t, s2t)

	if err := h.SubPortsPushed(ctx, &neutron.SubPortPush{EventType: neutron.TrunkEventCreated, SubPorts: refSubPorts(refTrunk, refS3)}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f, neutron.TrunkActive)
	waitPorts(t, o, "br-int", pi, s1i, s2i, s3i)
	waitPorts(t, o, tbr, refVM, pt, s1t, s2t, s3t)
	if err := h.SubPortsPushed(ctx, &neutron.SubPortPush{EventType: neutron.TrunkEventDeleted, SubPorts: refSubPorts(refTrunk, refS2)}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f, neutron.TrunkActive)
	waitPorts(t, o, "br-int", pi, s1i, s3i)
	// A subport the server does not bind: DEGRADED, nothing created for it.
	f.mu.Lock()
	f.unbound[refS4] = true
	f.mu.Unlock()
	if err := h.SubPortsPushed(ctx, &neutron.SubPortPush{EventType: neutron.TrunkEventCreated, SubPorts: refSubPorts(refTrunk, refS4)}); err != nil {
		t.Fatal(err)
	}
	waitStatus(t, f, neutron.TrunkDegraded)
	waitPorts(t, o, "br-int", pi, s1i, s3i)
	// A push for a trunk this host does not wire is ignored.
	if err := h.SubPortsPushed(ctx, &neutron.SubPortPush{EventType: neutron.TrunkEventCreated, SubPorts: refSubPorts(refTrunk2, refS4)}); err != nil {
		t.Fatal(err)
	}

	// os-vif unplugs: the bridge goes, the br-int ends follow.
	vsctl("del-br", tbr)
	waitPorts(t, o, "br-int")

	// A trunk bridge without a VM is disposed of after VMWait, with its br-int peers.
	tbr2 := BridgeName(refTrunk2)
	vsctl("add-br", tbr2, "--", "set", "Bridge", tbr2, "datapath_type=netdev", "--",
		"add-port", "br-int", "tpi-x", "--", "set", "Interface", "tpi-x", "type=patch", "options:peer=tpt-x", "--",
		"add-port", tbr2, "tpt-x", "--", "set", "Interface", "tpt-x", "type=patch", "options:peer=tpi-x")
	for i := 0; ; i++ {
		out, _ := o.Vsctl("list-br")
		if len(strings.Fields(out)) == 1 {
			break
		}
		if i > 200 {
			t.Fatalf("bridges left: %q", out)
		}
		time.Sleep(50 * time.Millisecond)
	}
	waitPorts(t, o, "br-int")
	select {
	case s := <-f.ch:
		t.Errorf("a status reported for a removal or disposal: %s", s)
	default:
	}
}
