//go:build integration

package openflow

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/ovsagent/ovsagent/internal/testing/ovstest"
)

// testBridge starts a private OVS with one bridge and dials it.
func testBridge(t testing.TB, opt Options) (*ovstest.OVS, string, *Conn) {
	t.Helper()
	o := ovstest.Start(t)
	br := "oft" + fmt.Sprint(time.Now().UnixNano()%100000)
	if err := o.AddBridge(br); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := Dial(ctx, o.Mgmt(br), opt)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return o, br, c
}

func genFlows(n int, cookie uint64) []Flow {
	flows := make([]Flow, n)
	for i := range flows {
		m := net.HardwareAddr{0xfa, 0x16, 0x3e, byte(i >> 16), byte(i >> 8), byte(i)}
		flows[i] = Flow{Table: 60, Priority: 100, Cookie: cookie,
			Match:   Match{InPort(1), DlVlan(uint16(i%4000 + 1)), EthDst(m)},
			Actions: []Action{PopVLAN{}, Output{2}}}
	}
	return flows
}

func adds(flows []Flow) []FlowMod {
	mods := make([]FlowMod, len(flows))
	for i, f := range flows {
		mods[i] = FlowMod{Command: CmdAdd, Flow: f}
	}
	return mods
}

func ofctlDump(t testing.TB, o *ovstest.OVS, br string) []string {
	t.Helper()
	out, err := o.Ofctl("dump-flows", br, "--no-stats")
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.TrimSpace(l) != "" {
			lines = append(lines, l)
		}
	}
	sort.Strings(lines)
	return lines
}

func TestBundleInstallsAndDumps(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	ctx := context.Background()
	flows := genFlows(500, 0xabc)
	flows = append(flows, referenceFlows()[0].flow)
	for _, tc := range referenceFlows() {
		f := tc.flow
		f.Cookie = 0xdef
		flows = append(flows, f)
	}
	if err := c.Bundle(ctx, adds(flows)); err != nil {
		t.Fatal(err)
	}
	got, err := c.DumpFlows(ctx, TableAll, 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	// our decoding of OVS's reply renders exactly as ovs-ofctl prints it
	var ours []string
	for _, f := range got {
		ours = append(ours, f.String())
	}
	sort.Strings(ours)
	theirs := ofctlDump(t, o, br)
	if strings.Join(ours, "\n") != strings.Join(theirs, "\n") {
		for i := range theirs {
			if i >= len(ours) || ours[i] != theirs[i] {
				t.Fatalf("dump differs at %d:\n ours: %v\n ovs:  %s", i, ours[i:min(i+1, len(ours))], theirs[i])
			}
		}
		t.Fatalf("dump: %d flows, ovs-ofctl %d", len(ours), len(theirs))
	}
	// dump by cookie
	byCookie, err := c.DumpFlows(ctx, TableAll, 0xabc, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(byCookie) != 500 {
		t.Fatalf("dump by cookie: %d flows, want 500", len(byCookie))
	}
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestBundleIsAtomic(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	ctx := context.Background()
	if err := c.Bundle(ctx, adds(genFlows(10, 1))); err != nil {
		t.Fatal(err)
	}
	before := ofctlDump(t, o, br)
	bad := genFlows(1000, 2)
	bad[700].Actions = []Action{Output{Port: 0xffffff80}} // a reserved port OVS rejects
	bad[700].Match = Match{InPort(7)}
	err := c.Bundle(ctx, adds(bad))
	var be *BundleError
	if !errors.As(err, &be) {
		t.Fatalf("want BundleError, got %v", err)
	}
	t.Logf("rejected as expected: %v", err)
	if be.Index != 700 || !strings.Contains(be.Flow, "in_port=7") {
		t.Errorf("error names flow %d %q, want 700", be.Index, be.Flow)
	}
	if after := ofctlDump(t, o, br); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("bridge changed by a rejected bundle: %d flows before, %d after", len(before), len(after))
	}
	// a flow OVS accepts alone but the commit rejects (unknown group)
	bad = genFlows(1000, 2)
	bad[300].Actions = []Action{Opaque{Raw: []byte{0, 22, 0, 8, 0, 0, 0x10, 0x92}}} // group:4242
	err = c.Bundle(ctx, adds(bad))
	if !errors.As(err, &be) {
		t.Fatalf("want BundleError, got %v", err)
	}
	t.Logf("rejected as expected: %v", err)
	if after := ofctlDump(t, o, br); strings.Join(after, "\n") != strings.Join(before, "\n") {
		t.Fatalf("bridge changed by a rejected bundle: %d flows before, %d after", len(before), len(after))
	}
	// the connection is still usable
	if err := c.Bundle(ctx, adds(genFlows(3, 3))); err != nil {
		t.Fatal(err)
	}
}

func TestReconnectAfterVswitchdRestart(t *testing.T) {
	re := make(chan struct{}, 4)
	o, br, c := testBridge(t, Options{OnReconnect: func() { re <- struct{}{} }, MaxBackoff: 200 * time.Millisecond})
	ctx := context.Background()
	if err := c.Barrier(ctx); err != nil {
		t.Fatal(err)
	}
	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	if err := o.StartVswitchd(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-re:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconnect")
	}
	if err := c.Bundle(ctx, adds(genFlows(5, 9))); err != nil {
		t.Fatal(err)
	}
	if n := len(ofctlDump(t, o, br)); n != 5 {
		t.Fatalf("%d flows after reconnect, want 5", n)
	}
}

// TestConnectedFollowsTheSession: Connected (what the metrics export) is
// false while ovs-vswitchd is down and true again once reconnected.
func TestConnectedFollowsTheSession(t *testing.T) {
	re := make(chan struct{}, 4)
	o, _, c := testBridge(t, Options{OnReconnect: func() { re <- struct{}{} }, MaxBackoff: 200 * time.Millisecond})
	if !c.Connected() {
		t.Fatal("not connected after Dial")
	}
	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(10 * time.Second); c.Connected(); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("still connected with ovs-vswitchd killed")
		}
	}
	if err := o.StartVswitchd(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-re:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconnect")
	}
	if !c.Connected() {
		t.Fatal("not connected after the reconnect")
	}
	c.Close()
	if c.Connected() {
		t.Fatal("connected after Close")
	}
}
