package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/ovsagent/ovsagent/internal/agent"
	"github.com/ovsagent/ovsagent/internal/config"
	"github.com/ovsagent/ovsagent/internal/metrics"
)

// TestMetricsListenerMountsOnlyWhatIsAsked: /explain/ (every tenant's port
// details) is served only with explain_endpoint, the profiles only with
// debug_pprof; /metrics always.
func TestMetricsListenerMountsOnlyWhatIsAsked(t *testing.T) {
	stub := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, "explained") })
	for _, tc := range []struct {
		explain, pprof bool
	}{{false, false}, {true, false}, {false, true}} {
		cfg := config.Defaults()
		cfg.OVSAgent.MetricsListen = "127.0.0.1:0"
		cfg.OVSAgent.ExplainEndpoint, cfg.OVSAgent.DebugPprof = tc.explain, tc.pprof
		ms, err := listenMetrics(cfg, metrics.New(), stub)
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = ms.Serve(ctx, nil); close(done) }()
		status := func(path string) int {
			resp, err := http.Get("http://" + ms.Addr() + path)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		want := func(on bool) int {
			if on {
				return http.StatusOK
			}
			return http.StatusNotFound
		}
		if got := status("/explain/p1"); got != want(tc.explain) {
			t.Errorf("explain_endpoint=%v: GET /explain/p1 = %d", tc.explain, got)
		}
		if got := status("/debug/pprof/heap"); got != want(tc.pprof) {
			t.Errorf("debug_pprof=%v: GET /debug/pprof/heap = %d", tc.pprof, got)
		}
		if got := status("/metrics"); got != http.StatusOK {
			t.Errorf("GET /metrics = %d", got)
		}
		cancel()
		<-done
	}
}

// TestExplainWithoutEndpoint: with explain_endpoint off, `ovs-agent
// explain` does not take the listener's 404 for "unknown port"; it computes
// the answer itself (here it stops at the OVSDB connection it cannot make).
func TestExplainWithoutEndpoint(t *testing.T) {
	ms, err := metrics.Listen("127.0.0.1:0", metrics.New())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { _ = ms.Serve(ctx, nil); close(done) }()
	defer func() { cancel(); <-done }()
	cfg := config.Defaults()
	cfg.OVSAgent.MetricsListen = ms.Addr()
	cfg.OVS.OVSDBConnection = "ssl:127.0.0.1:6640" // refused at once by ovsdb.Dial
	var out bytes.Buffer
	err = explain(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil)), "p1", &out)
	if err == nil || errors.Is(err, agent.ErrUnknownPort) || !strings.Contains(err.Error(), "ovsdb_connection") {
		t.Fatalf("explain = %v; want the offline path's OVSDB error, not unknown port", err)
	}
}
