package agent

import (
	"testing"
	"time"
)

// At most MaxInflightReports update_device_list calls are out at once;
// after a failed call the agent sends one at a time until a call succeeds,
// then widens again (a server that timed out is behind: more calls would
// only queue there and time out together).
func TestReportCallsBoundedAndNarrowedAfterFailure(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	for i, id := range []string{"p1", "p2", "p3", "p4"} {
		srv.addPort(id, "net-a", "vxlan", 100, "fa:16:3e:00:00:0"+string(rune('1'+i)))
	}
	gate := make(chan struct{})
	srv.gate = gate
	opt := testOpts(false)
	opt.MaxInflightReports = 2
	h := start(t, sw, fl, srv, opt)
	sw.snapshot()
	// The calls start on goroutines of their own, after the batch: poll.
	poll := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	out := func(n int) func() bool { return func() bool { now, _ := srv.outNow(false); return now == n } }

	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	poll("p1's call out", out(1))
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	poll("p2's call out beside it", out(2))
	sw.plug("p3", "tap3", "fa:16:3e:00:00:03")
	h.waitFor("p3 wired", func() bool { return sw.tag("tap3") == 1 && fl.owners("br-int")["port:p3"] > 0 })
	time.Sleep(100 * time.Millisecond) // the loop would send another call now if it could
	if now, most := srv.outNow(true); now != 2 || most != 2 {
		t.Fatalf("calls out with p3 wired: %d now, %d at most; want 2 (the limit)", now, most)
	}

	// Both calls fail: from now on one call at a time.
	srv.setDown(true)
	gate <- struct{}{}
	gate <- struct{}{}
	poll("both calls failed", func() bool { srv.mu.Lock(); defer srv.mu.Unlock(); return srv.udlFailed == 2 })
	poll("p3's call out after the failures", out(1))
	srv.outNow(true)
	srv.setDown(false)
	sw.plug("p4", "tap4", "fa:16:3e:00:00:04")
	h.waitFor("p4 wired", func() bool { return sw.tag("tap4") == 1 && fl.owners("br-int")["port:p4"] > 0 })
	time.Sleep(100 * time.Millisecond) // p1 and p2 are due again (retry after 2-20 ms): still one call
	if now, most := srv.outNow(true); now != 1 || most != 1 {
		t.Fatalf("calls out after a failure: %d now, %d at most; want 1", now, most)
	}

	// One success widens the limit again; everything ends ACTIVE.
	close(gate)
	h.waitFor("all ACTIVE and in sync", func() bool {
		for _, id := range []string{"p1", "p2", "p3", "p4"} {
			if srv.status(id) != "ACTIVE" {
				return false
			}
		}
		return h.inSync()
	})
	h.stop() // the loop has returned: its fields can be read
	if got := h.a.reportLimit; got != 2 {
		t.Errorf("report limit after successes = %d, want 2", got)
	}
}
