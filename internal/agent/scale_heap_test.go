//go:build integration

package agent

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/openflow"
)

// recFlows is Flows over real openflow.Reconcilers whose switch accepts
// every bundle and forgets it: what OFBridges keeps in memory, without a
// fake flow table beside it, so that the heap the agent and its
// reconcilers hold can be measured alone.
type recFlows struct {
	mu   sync.Mutex
	recs map[string]*openflow.Reconciler
}

type nullSwitch struct{}

func (nullSwitch) Bundle(context.Context, []openflow.FlowMod) error { return nil }
func (nullSwitch) DumpFlows(context.Context, uint8, uint64, uint64) ([]openflow.Flow, error) {
	return nil, nil
}

func newRecFlows() *recFlows { return &recFlows{recs: map[string]*openflow.Reconciler{}} }

func (f *recFlows) rec(br string) *openflow.Reconciler {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.recs[br]
	if r == nil {
		r = openflow.NewReconciler(nullSwitch{}, uint64(len(br))<<32)
		f.recs[br] = r
	}
	return r
}

func (f *recFlows) Apply(ctx context.Context, br string, ch FlowChange) error {
	if ch.Sweep {
		return f.rec(br).ApplyAndSweep(ctx, ch.Set)
	}
	return f.rec(br).Apply(ctx, ch.Set)
}

func (f *recFlows) Reset(br string)               { f.rec(br).Reset() }
func (f *recFlows) Cookie(br string) uint64       { return f.rec(br).Cookie() }
func (f *recFlows) Events() <-chan DataplaneEvent { return nil }
func (f *recFlows) Desired(br, owner string) []openflow.Flow {
	return f.rec(br).Desired(owner)
}

func (f *recFlows) DropAll(_ context.Context, br string) error {
	f.rec(br).Reset()
	return nil
}

// Reread never finds anything new: nullSwitch holds nothing.
func (f *recFlows) Reread(context.Context, string, bool) error { return nil }

func (f *recFlows) CanaryPresent(_ context.Context, br string) (bool, error) {
	return f.rec(br).Counts()[23] > 0, nil
}

func (f *recFlows) flows() (n int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, r := range f.recs {
		for _, c := range r.Counts() {
			n += c
		}
	}
	return n
}

func liveHeap() runtime.MemStats {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms
}

func mib(b uint64) float64 { return float64(b) / (1 << 20) }

// TestScaleHeap wires N ports with the OVS firewall through real
// reconcilers (over a switch that forgets every bundle) and reports the
// live heap of the agent and its reconcilers once in sync: the heap in
// sync minus the heap once both are dropped (the fake server and switch
// are in both).
//
//	OVSAGENT_SCALE_PORTS=1000 go test ./internal/agent -run TestScaleHeap -v
func TestScaleHeap(t *testing.T) {
	if os.Getenv("OVSAGENT_HEAPPROFILE") != "" {
		runtime.MemProfileRate = 4096 // a finer profile than the default 512 KiB
	}
	n := scalePorts()
	sw, srv := newFakeSwitch(true), newScaleServer(n)
	fl := newRecFlows()
	r := startScale(t, sw, fl, srv)
	sw.snapshot()
	t0 := time.Now()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("port-%05d", i)
		sw.plug(id, "tap"+id[5:], scaleMAC(i))
	}
	for !allActive(srv) { // an in-sync batch may come before the plugs
		r.waitSync("all wired")
	}
	wire := time.Since(t0)
	flows := fl.flows()
	in := liveHeap()
	rss := procRSS()
	writeHeap(t)
	r.stop()
	r.a, fl, r = nil, nil, nil
	out := liveHeap()
	runtime.KeepAlive(sw)
	runtime.KeepAlive(srv)
	live := in.HeapAlloc - out.HeapAlloc
	t.Logf("%d ports, %d flows: wired in %v; heap in sync: alloc %.1f MiB, inuse %.1f MiB, sys %.1f MiB; agent + reconcilers %.1f MiB (%.0f B/flow); test process (fakes included) %s, %d GCs",
		n, flows, wire.Round(time.Millisecond), mib(in.HeapAlloc), mib(in.HeapInuse), mib(in.HeapSys), mib(live), float64(live)/float64(max(flows, 1)), rss, in.NumGC)
}

// procRSS is this process's resident set now and at its peak (Linux).
func procRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "RSS unknown"
	}
	var rss, hwm string
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			rss = strings.TrimSpace(v)
		}
		if v, ok := strings.CutPrefix(l, "VmHWM:"); ok {
			hwm = strings.TrimSpace(v)
		}
	}
	return "RSS " + rss + " (peak " + hwm + ")"
}
