package agent

import (
	"testing"
	"time"
)

// TestRevivedAbandonsReportsInFlight: an update_device_list call sent to a
// server that then restarted hangs (or waits out oslo's back-off) with its
// ports in flight. The "revived" resync cancels it and reports them again.
func TestRevivedAbandonsReportsInFlight(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	hung := make(chan struct{}) // never opened: the call sent to the old server
	srv.mu.Lock()
	srv.gate = hung
	srv.mu.Unlock()
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 wired", func() bool { return sw.tag("tap1") == 1 })
	time.Sleep(50 * time.Millisecond) // the report is out and waiting
	if st := srv.status("p1"); st == "ACTIVE" {
		t.Fatalf("p1 ACTIVE through a hung call")
	}

	srv.mu.Lock()
	srv.gate = nil // the server is back
	srv.mu.Unlock()
	h.a.Notify(Resync{Reason: ResyncRevived})
	deadline := time.Now().Add(10 * time.Second)
	for srv.status("p1") != "ACTIVE" {
		if time.Now().After(deadline) {
			t.Fatalf("p1 not ACTIVE after the revived resync: its hung report was not abandoned")
		}
		time.Sleep(5 * time.Millisecond)
	}
	srv.mu.Lock()
	calls := srv.udlCalls
	srv.mu.Unlock()
	if calls != 1 {
		t.Errorf("update_device_list calls that reached the server: %d, want 1", calls)
	}
}
