package main

import (
	"context"
	"net/http"
	"testing"

	"github.com/ovsagent/ovsagent/internal/metrics"
)

// The profiles are served only when debug_pprof mounts them.
func TestPprofMountedOnlyWhenAsked(t *testing.T) {
	for _, mount := range []bool{false, true} {
		ms, err := metrics.Listen("127.0.0.1:0", metrics.New())
		if err != nil {
			t.Fatal(err)
		}
		if mount {
			mountPprof(ms)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = ms.Serve(ctx, nil); close(done) }()
		resp, err := http.Get("http://" + ms.Addr() + "/debug/pprof/heap")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		want := http.StatusNotFound
		if mount {
			want = http.StatusOK
		}
		if resp.StatusCode != want {
			t.Errorf("mounted=%v: GET /debug/pprof/heap = %d, want %d", mount, resp.StatusCode, want)
		}
		cancel()
		<-done
	}
}
