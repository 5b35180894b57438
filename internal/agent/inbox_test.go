package agent

import (
	"fmt"
	"slices"
	"testing"

	"github.com/ovsagent/ovsagent/internal/pipeline"
)

// TestInboxBounded: a flood of notifications (a forged push naming many ports, say)
// used to queue every event until the loop drained them. The inbox holds maxInbox
// events; the rest are folded into a re-read of what they name, so nothing is lost,
// and beyond maxInbox named resources into one full resync.
func TestInboxBounded(t *testing.T) {
	a := New(Options{}, Deps{})
	// A small overflow: every port named is read again, the FDB of the network whose
	// l2pop entries were folded is asked for again, and tunnel_sync runs again.
	for i := 0; i < maxInbox+10; i++ {
		a.Notify(PortChanged{PortID: fmt.Sprintf("p%05d", i)})
	}
	a.Notify(FDBAdd{Entries: FDBEntries{"net-a": {NetworkType: "vxlan"}}})
	a.Notify(TunnelUpdate{IP: "192.0.2.7", Type: "vxlan"})
	a.Notify(SecurityGroupChanged{GroupIDs: []string{"sg"}})
	if n := len(a.inbox); n > maxInbox {
		t.Fatalf("%d events waiting, want at most %d", n, maxInbox)
	}
	seen := map[string]bool{}
	var fdb, tun, sg bool
	for _, ev := range a.drainInbox() {
		switch e := ev.(type) {
		case PortChanged:
			seen[e.PortID] = true
		case fdbRefresh:
			fdb = e.NetworkID == "net-a"
		case tunnelResync:
			tun = e.Type == "vxlan"
		case SecurityGroupChanged:
			sg = true
		case Resync:
			t.Errorf("full resync %q for an overflow of %d resources", e.Reason, 13)
		}
	}
	if len(seen) != maxInbox+10 || !fdb || !tun || !sg {
		t.Errorf("after the overflow: %d of %d ports, fdb refresh %v, tunnel resync %v, sg %v", len(seen), maxInbox+10, fdb, tun, sg)
	}

	// A flood: memory stays bounded and one full resync stands for it all.
	const flood = 20 * maxInbox
	for i := 0; i < flood; i++ {
		a.Notify(PortChanged{PortID: fmt.Sprintf("q%06d", i)})
		if n := len(a.inbox) + len(a.inOver.ports); n > 2*maxInbox+1 {
			t.Fatalf("%d events kept after %d notified", n, i+1)
		}
	}
	evs := a.drainInbox()
	if len(evs) > maxInbox+2 {
		t.Errorf("%d events drained after a flood of %d", len(evs), flood)
	}
	var full, allTunnels bool
	for _, ev := range evs {
		switch e := ev.(type) {
		case Resync:
			full = e.Reason == ResyncInboxOverflow
		case tunnelResync:
			allTunnels = e.Type == ""
		}
	}
	if !full || !allTunnels {
		t.Errorf("after a flood: full resync %v, tunnel resync %v", full, allTunnels)
	}
	if evs := a.drainInbox(); len(evs) != 0 {
		t.Errorf("inbox not empty after drain: %d", len(evs))
	}
}

// TestFoldedEventsApplied: the events an overflow folds into act like a resync of
// the resource they name.
// What the overlay makes of them: internal/overlay TestFoldedEvents.
func TestFoldedEventsApplied(t *testing.T) {
	a := New(Options{L2Population: true, TunnelTypes: []string{"vxlan", "gre"}}, Deps{})
	key := pipeline.NetKey{NetworkID: "net-a", SegID: 5, HasSeg: true}
	a.ps.Networks[key] = &pipeline.Network{Key: key, Type: pipeline.NetworkType("vxlan")}
	a.onEvent(fdbRefresh{NetworkID: "net-a"})
	a.onEvent(fdbRefresh{NetworkID: "net-other"})
	if got := a.refreshNetworks(); !slices.Equal(got, []string{"net-a"}) {
		t.Errorf("networks to refresh %v, want net-a only", got)
	}
}

// unfoldedEvent stands for an event kind inboxOverflow has no case for.
type unfoldedEvent struct{}

func (unfoldedEvent) isEvent() {}

// An event kind the overflow does not know is never lost: it costs a full resync.
func TestInboxUnknownEventFullResync(t *testing.T) {
	a := New(Options{}, Deps{})
	for i := 0; i < maxInbox; i++ {
		a.Notify(SecurityGroupChanged{})
	}
	a.Notify(unfoldedEvent{})
	full := false
	for _, ev := range a.drainInbox() {
		if r, ok := ev.(Resync); ok && r.Reason == ResyncInboxOverflow {
			full = true
		}
	}
	if !full {
		t.Error("an unknown event folded into nothing")
	}
}

// A binding deactivated while the inbox overflows still unplugs the port:
// a resync would only re-read it (dead), not remove it from br-int.
func TestInboxOverflowKeepsBindingDeactivated(t *testing.T) {
	a := New(Options{}, Deps{})
	for i := 0; i < maxInbox; i++ {
		a.Notify(SecurityGroupChanged{})
	}
	a.Notify(BindingDeactivated{PortID: "p1"})
	a.Notify(Resync{Reason: "test"})
	found := false
	for _, ev := range a.drainInbox() {
		if d, ok := ev.(BindingDeactivated); ok && d.PortID == "p1" {
			found = true
		}
	}
	if !found {
		t.Error("the deactivated binding was folded away")
	}
}
