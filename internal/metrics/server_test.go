package metrics

import (
	"context"
	"errors"
	"net/http"
	"sync/atomic"
	"testing"
)

// TestProbesSplitLivenessFromReadiness: out of sync, a connection down or a
// stuck loop make the agent not ready (/readyz and, as before, /healthz) but
// leave it alive (/livez); only a failing liveness check is death, and it is
// not ready then either.
func TestProbesSplitLivenessFromReadiness(t *testing.T) {
	m := New()
	s, err := Listen("127.0.0.1:0", m)
	if err != nil {
		t.Fatal(err)
	}
	var connected, stuck, dead atomic.Bool
	connected.Store(true)
	s.Ready(Up("openflow br-int", connected.Load))
	s.Ready(func() error {
		if stuck.Load() {
			return errors.New("agent loop stuck")
		}
		return nil
	})
	s.Live(func() error {
		if dead.Load() {
			return errors.New("agent loop stopped")
		}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go s.Serve(ctx, nil)
	base := "http://" + s.Addr()
	expect := func(what, path string, code int, body string) {
		t.Helper()
		if c, b := get(t, base+path); c != code || b != body {
			t.Errorf("%s: %s = %d %q, want %d %q", what, path, c, b, code, body)
		}
	}

	expect("starting", "/healthz", http.StatusServiceUnavailable, "not in sync\n")
	expect("starting", "/readyz", http.StatusServiceUnavailable, "not in sync\n")
	expect("starting", "/livez", http.StatusOK, "ok\n")
	m.SetInSync(true)
	for _, p := range []string{"/healthz", "/readyz", "/livez"} {
		expect("in sync", p, http.StatusOK, "ok\n")
	}
	connected.Store(false)
	stuck.Store(true)
	expect("switch hung", "/readyz", http.StatusServiceUnavailable, "openflow br-int: not connected\nagent loop stuck\n")
	expect("switch hung", "/healthz", http.StatusServiceUnavailable, "openflow br-int: not connected\nagent loop stuck\n")
	expect("switch hung", "/livez", http.StatusOK, "ok\n")
	connected.Store(true)
	stuck.Store(false)
	dead.Store(true)
	expect("loop stopped", "/livez", http.StatusServiceUnavailable, "agent loop stopped\n")
	expect("loop stopped", "/readyz", http.StatusServiceUnavailable, "agent loop stopped\n")
}
