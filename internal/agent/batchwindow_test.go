package agent

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a settable Deps.Now.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// TestIdleAgentAppliesAtOnce: a port plugged on an idle agent is wired
// without waiting for the batch window — the window only gathers events
// that keep coming right after a batch. With a one-hour window, waiting
// for it would time the test out.
func TestIdleAgentAppliesAtOnce(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	opt := testOpts(true)
	opt.BatchWindow = time.Hour
	clock := &fakeClock{t: time.Date(2026, 12, 3, 8, 0, 0, 0, time.UTC)}
	h := startWithClock(t, sw, fl, srv, opt, clock.now)

	sw.snapshot() // the first batch: nothing ended before it, no window
	h.waitFor("in sync with no port", h.inSync)
	clock.advance(2 * time.Hour) // idle for longer than the window
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	// Polled, not h.waitFor: the server's reply comes back after the batch
	// that sent the report, and the batch after it (busy: one-hour window)
	// would be the next AfterBatch signal.
	deadline := time.Now().Add(10 * time.Second)
	for srv.status("p1") != "ACTIVE" {
		if time.Now().After(deadline) {
			t.Fatalf("p1 not ACTIVE: the port waited for the one-hour window")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
