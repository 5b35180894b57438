package feature

import (
	"context"
	"testing"
	"time"
)

type gate struct{ ch chan struct{} }

func (g gate) Name() string                  { return "gate" }
func (g gate) Extension() string             { return "" }
func (g gate) Configurations(map[string]any) {}
func (g gate) ReportReady() <-chan struct{}  { return g.ch }

type ungated struct{}

func (ungated) Name() string { return "ungated" }

// TestWaitReportGates: the first report waits for every gate (cmd/ovs-agent
// before neutron.Reporter.Run, the agent's own report loop), bounded.
func TestWaitReportGates(t *testing.T) {
	ctx := context.Background()
	if ok, cut := WaitReportGates(ctx, []Feature{ungated{}}, time.Hour); !ok || cut {
		t.Fatalf("no gate: %v %v", ok, cut)
	}
	g := gate{make(chan struct{})}
	go func() { time.Sleep(50 * time.Millisecond); close(g.ch) }()
	t0 := time.Now()
	if ok, cut := WaitReportGates(ctx, []Feature{ungated{}, g}, time.Hour); !ok || cut || time.Since(t0) < 40*time.Millisecond {
		t.Fatalf("gate opened after 50 ms: %v %v after %v", ok, cut, time.Since(t0))
	}
	never := gate{make(chan struct{})}
	if ok, cut := WaitReportGates(ctx, []Feature{never}, 30*time.Millisecond); !ok || !cut {
		t.Fatalf("bound: %v %v", ok, cut)
	}
	c, cancel := context.WithCancel(ctx)
	cancel()
	if ok, _ := WaitReportGates(c, []Feature{never}, time.Hour); ok {
		t.Fatal("ctx ended: ok")
	}
}
