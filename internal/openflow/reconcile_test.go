//go:build integration

package openflow

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// recordingSwitch passes everything to a real connection and keeps the last
// bundle, so that a test can check what kind of change reached the switch.
type recordingSwitch struct {
	*Conn
	last []FlowMod
}

func (s *recordingSwitch) Bundle(ctx context.Context, mods []FlowMod) error {
	s.last = append([]FlowMod(nil), mods...)
	return s.Conn.Bundle(ctx, mods)
}

func countCmds(mods []FlowMod) map[Command]int {
	c := map[Command]int{}
	for _, m := range mods {
		c[m.Command]++
	}
	return c
}

func portFlows(port uint32, n int) []Flow {
	var fs []Flow
	for i := 0; i < n; i++ {
		fs = append(fs, Flow{Table: 60, Priority: uint16(100 + i), Match: Match{InPort(port)},
			Actions: []Action{SetReg(5, port), ResubmitTable(71)}})
	}
	return fs
}

func TestReconcilerOwners(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	sw := &recordingSwitch{Conn: c}
	r := NewReconciler(sw, 0x1111)
	ctx := context.Background()
	base := []Flow{{Table: 0, Priority: 0, Actions: []Action{GotoTable{60}}}, {Table: 60, Priority: 3, Actions: []Action{Output{PortNormal}}}}
	if err := r.Apply(ctx, map[string][]Flow{"base": base, "port:a": portFlows(3, 3), "port:b": portFlows(4, 2)}); err != nil {
		t.Fatal(err)
	}
	if n := len(ofctlDump(t, o, br)); n != 7 {
		t.Fatalf("%d flows, want 7", n)
	}
	// change port:a (one flow's actions change, one dropped), leave the rest
	pa := portFlows(3, 2)
	pa[1].Actions = []Action{SetReg(5, 3), ResubmitTable(72)}
	if err := r.Apply(ctx, map[string][]Flow{"port:a": pa}); err != nil {
		t.Fatal(err)
	}
	if got := countCmds(sw.last); got[CmdModifyStrict] != 1 || got[CmdDeleteStrict] != 1 || len(sw.last) != 2 {
		t.Fatalf("bundle: %v", sw.last)
	}
	// remove port:b
	if err := r.Apply(ctx, map[string][]Flow{"port:b": nil}); err != nil {
		t.Fatal(err)
	}
	dump := ofctlDump(t, o, br)
	if len(dump) != 4 || strings.Contains(strings.Join(dump, "\n"), "in_port=4") {
		t.Fatalf("after removing port:b: %v", dump)
	}
	if cnt := r.Counts(); cnt[60] != 3 || cnt[0] != 1 {
		t.Fatalf("counts %v", cnt)
	}
	// the cache matches the bridge, text for text
	var ours []string
	for _, f := range r.Installed() {
		ours = append(ours, f.Flow.String())
	}
	if strings.Join(sorted(ours), "\n") != strings.Join(dump, "\n") {
		t.Fatalf("Installed() != bridge:\n%v\n%v", ours, dump)
	}
	// a rejected owner changes neither the bridge nor the cache
	bad := portFlows(5, 2)
	bad[1].Actions = []Action{Opaque{Raw: []byte{0, 22, 0, 8, 0, 0, 0x10, 0x92}}} // group:4242
	if err := r.Apply(ctx, map[string][]Flow{"port:c": bad}); err == nil {
		t.Fatal("bad bundle accepted")
	}
	if after := ofctlDump(t, o, br); strings.Join(after, "\n") != strings.Join(dump, "\n") {
		t.Fatalf("bridge changed: %v", after)
	}
	if len(r.Installed()) != 4 || len(r.Desired("port:a")) != 2 || len(r.Desired("port:c")) != 0 {
		t.Fatalf("cache changed by a failed bundle")
	}
	if err := r.Apply(ctx, map[string][]Flow{"port:c": portFlows(5, 1)}); err != nil {
		t.Fatal(err)
	}
	if n := len(ofctlDump(t, o, br)); n != 5 {
		t.Fatalf("%d flows, want 5", n)
	}
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j] < out[j-1]; j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// TestAdoptSwapsCookieAtomically is the restart: a new round adopts the
// bridge, re-installs its flows under its cookie and removes the old
// round's leftovers and a foreign flow, in one bundle, without deleting any
// flow it still wants.
func TestAdoptSwapsCookieAtomically(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	ctx := context.Background()
	old := NewReconciler(c, 0xaaaa)
	all := map[string][]Flow{}
	for p := uint32(1); p <= 50; p++ {
		all["port:"+string(rune('A'+p%26))+string(rune('a'+p/26))] = portFlows(p, 20)
	}
	if err := old.Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	if _, err := o.Ofctl("add-flow", br, "cookie=0x4242,table=5,priority=7,actions=drop"); err != nil {
		t.Fatal(err)
	}
	// a foreign flow with a match field and actions the codec does not model
	if _, err := o.Ofctl("add-flow", br, "table=7,priority=1,tcp,tcp_flags=+syn,actions=clone(output:1),mod_nw_ttl:3"); err != nil {
		t.Fatal(err)
	}
	// the new round wants the same, minus one owner, plus a changed flow
	delete(all, "port:Ba")
	for k := range all {
		all[k][0].Actions = []Action{SetReg(5, 99), ResubmitTable(71)}
		break
	}
	sw := &recordingSwitch{Conn: c}
	nw := NewReconciler(sw, 0xbbbb)
	if err := nw.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	// in-sync with the new round: apply everything and sweep in one bundle
	if err := nw.ApplyAndSweep(ctx, all); err != nil {
		t.Fatal(err)
	}
	cmds := countCmds(sw.last)
	if cmds[CmdAdd] != 49*20 || cmds[CmdDeleteStrict] != 22 || cmds[CmdModifyStrict] != 0 {
		t.Fatalf("bundle commands %v, want 980 add (in-place replace), 22 delete", cmds)
	}
	for _, m := range sw.last {
		if m.Command == CmdDeleteStrict && m.Flow.Table == 60 && !strings.Contains(m.Flow.Match.String(), "in_port=1,") && m.Flow.Match.String() != "in_port=1" {
			t.Fatalf("deleted a wanted flow: %s", m.Flow.String())
		}
	}
	byOld, err := c.DumpFlows(ctx, TableAll, 0xaaaa, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	byNew, err := c.DumpFlows(ctx, TableAll, 0xbbbb, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(byOld) != 0 || len(byNew) != 980 || len(ofctlDump(t, o, br)) != 980 {
		t.Fatalf("old round %d flows, new round %d, bridge %d", len(byOld), len(byNew), len(ofctlDump(t, o, br)))
	}
	// steady state: a second identical Apply sends nothing
	sw.last = nil
	if err := nw.Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	if len(sw.last) != 0 {
		t.Fatalf("idempotent apply sent %d mods", len(sw.last))
	}
}

// TestAdoptThenSweepLater: until the agent is in sync, stale flows keep
// forwarding; the sweep removes them in the bundle that completes the state.
func TestAdoptThenSweepLater(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	ctx := context.Background()
	old := NewReconciler(c, 0xaaaa)
	if err := old.Apply(ctx, map[string][]Flow{"port:1": portFlows(1, 3), "port:2": portFlows(2, 3)}); err != nil {
		t.Fatal(err)
	}
	nw := NewReconciler(c, 0xbbbb)
	if err := nw.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nw.Apply(ctx, map[string][]Flow{"port:1": portFlows(1, 3)}); err != nil {
		t.Fatal(err)
	}
	dump := strings.Join(ofctlDump(t, o, br), "\n")
	if strings.Count(dump, "cookie=0xaaaa") != 3 || strings.Count(dump, "cookie=0xbbbb") != 3 {
		t.Fatalf("before sweep:\n%s", dump)
	}
	if err := nw.ApplyAndSweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	dump = strings.Join(ofctlDump(t, o, br), "\n")
	if strings.Contains(dump, "cookie=0xaaaa") || strings.Count(dump, "cookie=0xbbbb") != 3 {
		t.Fatalf("after sweep:\n%s", dump)
	}
}

// TestResetAfterVswitchdRestart: the switch lost its flows; Reset + Apply
// re-installs every desired flow, including owners the Apply does not name.
func TestResetAfterVswitchdRestart(t *testing.T) {
	re := make(chan struct{}, 4)
	o, br, c := testBridge(t, Options{OnReconnect: func() { re <- struct{}{} }, MaxBackoff: 200 * time.Millisecond})
	ctx := context.Background()
	r := NewReconciler(c, 0x5)
	if err := r.Apply(ctx, map[string][]Flow{"port:1": portFlows(1, 3), "port:2": portFlows(2, 3)}); err != nil {
		t.Fatal(err)
	}
	if err := o.StopVswitchd(); err != nil {
		t.Fatal(err)
	}
	if err := r.Apply(ctx, map[string][]Flow{"port:3": portFlows(3, 1)}); !errors.Is(err, ErrNotConnected) {
		t.Fatalf("apply while down: %v", err)
	}
	if err := o.StartVswitchd(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-re:
	case <-time.After(30 * time.Second):
		t.Fatal("no reconnect")
	}
	r.Reset()
	if err := r.Apply(ctx, map[string][]Flow{"port:3": portFlows(3, 1)}); err != nil {
		t.Fatal(err)
	}
	if n := len(ofctlDump(t, o, br)); n != 7 {
		t.Fatalf("%d flows after restart, want 7", n)
	}
}
