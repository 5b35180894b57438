package agent

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/feature"
	"github.com/ovsagent/ovsagent/internal/metrics"
)

// gateFeature is the dvr feature's report part as a test builds it: its key
// is true once its Sync (the first batch's) got the server's answer, and its
// gate opens then (feature.ReportGate).
type gateFeature struct {
	mode  atomic.Bool
	ready chan struct{}
	once  sync.Once
}

func (f *gateFeature) Name() string                    { return "gate" }
func (f *gateFeature) Extension() string               { return "" }
func (f *gateFeature) Configurations(c map[string]any) { c["in_distributed_mode"] = f.mode.Load() }
func (f *gateFeature) ReportReady() <-chan struct{}    { return f.ready }
func (f *gateFeature) Sync(context.Context) error {
	f.mode.Store(true)
	f.once.Do(func() { close(f.ready) })
	return nil
}

// gateReporter records what each report_state would carry of the
// feature's part, as cmd/ovs-agent builds the configurations at each report.
type gateReporter struct {
	srv *fakeServer
	f   feature.Reporter
	mu  sync.Mutex
	got []any
	at  []time.Time
}

func (r *gateReporter) ReportState(ctx context.Context, start bool, devices int) (string, error) {
	c := map[string]any{}
	r.f.Configurations(c)
	r.mu.Lock()
	r.got = append(r.got, c["in_distributed_mode"])
	r.at = append(r.at, time.Now())
	r.mu.Unlock()
	return r.srv.ReportState(ctx, start, devices)
}

func (r *gateReporter) reports() ([]any, []time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]any(nil), r.got...), append([]time.Time(nil), r.at...)
}

// wait polls for the first report (the harness's waitFor wakes on batches).
func (r *gateReporter) wait(t *testing.T) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if got, _ := r.reports(); len(got) > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no report_state within 10 s")
		}
	}
}

func startGate(t *testing.T, opt Options, f feature.Feature, rep *gateReporter) (*harness, *fakeSwitch) {
	t.Helper()
	sw, fl := newFakeSwitch(true), newFakeFlows()
	h := &harness{t: t, sw: sw, fl: fl, srv: rep.srv, m: metrics.New(), batches: make(chan bool, 1), done: make(chan error, 1)}
	h.a = newTestAgent(opt, Deps{Switch: sw, Flows: fl, Plugin: rep.srv, Cache: rep.srv, Reporter: rep, Metrics: h.m, Log: testLogger(),
		Features: []feature.Feature{f}})
	ctx, cancel := context.WithCancel(context.Background())
	h.cancel = cancel
	go func() { h.done <- h.a.Run(ctx) }()
	t.Cleanup(func() { h.stop() })
	return h, sw
}

// TestFirstReportWaitsForReportGate: the reference's first report_state
// already says in_distributed_mode true (its constructor got the DVR MAC
// before the heartbeat started). Ours asks in the first batch (the feature's
// Sync), after the bridges and the OVSDB snapshot: the first report waits for
// a feature.ReportGate, so it carries the answered part. Without the wait the
// first report went out at start with false.
func TestFirstReportWaitsForReportGate(t *testing.T) {
	f := &gateFeature{ready: make(chan struct{})}
	rep := &gateReporter{srv: newFakeServer(), f: f}
	opt := testOpts(false)
	opt.ReportInterval = 10 * time.Second
	_, sw := startGate(t, opt, f, rep)
	time.Sleep(100 * time.Millisecond) // a report sent at start would be out by now
	sw.snapshot()                      // the first batch: Sync answers
	rep.wait(t)
	got, _ := rep.reports()
	if got[0] != true {
		t.Fatalf("first report_state's in_distributed_mode = %v, want true (the reference's first report)", got[0])
	}
	rep.srv.mu.Lock()
	flags := rep.srv.startFlags
	rep.srv.mu.Unlock()
	if flags == 0 {
		t.Error("the first report lost its start_flag")
	}
}

// TestFirstReportGateBounded: a gate that never opens (the first batch never
// ran: no OVSDB snapshot) holds the first report at most one report
// interval; the agent is not silent toward the server because of it.
func TestFirstReportGateBounded(t *testing.T) {
	f := &gateFeature{ready: make(chan struct{})}
	rep := &gateReporter{srv: newFakeServer(), f: f}
	opt := testOpts(false)
	opt.ReportInterval = 300 * time.Millisecond
	t0 := time.Now()
	startGate(t, opt, f, rep) // no snapshot: Sync never runs
	rep.wait(t)
	got, at := rep.reports()
	if got[0] != false {
		t.Fatalf("first report_state's in_distributed_mode = %v, want false (not answered)", got[0])
	}
	if d := at[0].Sub(t0); d < opt.ReportInterval-50*time.Millisecond || d > 5*opt.ReportInterval {
		t.Errorf("first report after %v, want about one report interval (%v)", d, opt.ReportInterval)
	}
}
