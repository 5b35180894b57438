//go:build integration

package agent

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// TestScaleRealOVSVswitchdRestart: ovs-vswitchd killed and started again
// under an agent holding scalePorts() ports on a private Open vSwitch: the
// bridges come back empty and the agent restores every flow. What the
// bench's "ovs-vswitchd restart" measures, minus the server and the old
// process's exit.
func TestScaleRealOVSVswitchdRestart(t *testing.T) {
	n := scalePorts()
	o := ovstest.Start(t)
	if err := o.AddBridge("br-phys"); err != nil {
		t.Fatal(err)
	}
	srv := newScaleServer(n)
	h, of := runScaleRealAgent(t, o, srv)
	wireScaleReal(t, o, h, srv, n)
	want := of.Installed("br-int")
	if len(want) == 0 {
		t.Fatal("no flows on br-int after wiring")
	}

	select {
	case <-h.batches: // a signal from before the restart must not count below
	default:
	}
	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	if err := o.StartVswitchd(); err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	// Flows back: br-int holds as many flows as before the kill.
	var flowsBack time.Duration
	deadline := time.Now().Add(120 * time.Second)
	for flowsBack == 0 {
		if time.Now().After(deadline) {
			t.Fatal("br-int flows not restored within 120 s")
		}
		if out, err := o.Ofctl("dump-aggregate", "br-int"); err == nil && flowCountOf(out) >= len(want) {
			flowsBack = time.Since(started)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// In sync: a batch that ends in sync after the recovery (the recovery
	// batch itself ends with br-tun and br-phys restored too).
	for {
		select {
		case in := <-h.batches:
			if in && strings.Contains(scrape(t, h.m), `ovsagent_resyncs_total{reason="ovs-restart"} 1`) {
				t.Logf("%d ports, %d br-int flows: ovs-vswitchd started again → br-int flows back %v, in sync %v",
					n, len(want), flowsBack.Round(time.Millisecond), time.Since(started).Round(time.Millisecond))
				return
			}
		case <-time.After(time.Until(deadline)):
			t.Fatal("not in sync within 120 s of the restart")
		}
	}
}

// flowCountOf reads flow_count from ovs-ofctl dump-aggregate's reply
// ("NXST_AGGREGATE reply (xid=0x4): packet_count=0 byte_count=0 flow_count=N").
func flowCountOf(aggregate string) int {
	_, rest, ok := strings.Cut(aggregate, "flow_count=")
	if !ok {
		return -1
	}
	n, err := strconv.Atoi(strings.Fields(rest)[0])
	if err != nil {
		return -1
	}
	return n
}
