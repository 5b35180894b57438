//go:build integration

package openflow

import (
	"context"
	"fmt"
	"strings"
	"testing"
)

// TestKeepCookieSendsOnlyChanges: a restarted agent that finds its own
// previous cookie on the bridge keeps it (SetCookie after Adopt); the first
// in-sync bundle then carries only what changed — not one ADD per flow.
func TestKeepCookieSendsOnlyChanges(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	ctx := context.Background()
	old := NewReconciler(c, 0xaaaa)
	all := map[string][]Flow{}
	for p := uint32(1); p <= 50; p++ {
		all[fmt.Sprintf("port:%d", p)] = portFlows(p, 20)
	}
	if err := old.Apply(ctx, all); err != nil {
		t.Fatal(err)
	}
	// the next run wants the same, minus one owner, plus one changed flow
	delete(all, "port:7")
	all["port:9"][3].Actions = []Action{SetReg(5, 99), ResubmitTable(71)}

	sw := &recordingSwitch{Conn: c}
	nw := NewReconciler(sw, 0xbbbb)
	if err := nw.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	nw.SetCookie(0xaaaa)
	if got := nw.Cookie(); got != 0xaaaa {
		t.Fatalf("Cookie() = %#x after SetCookie(0xaaaa)", got)
	}
	if err := nw.ApplyAndSweep(ctx, all); err != nil {
		t.Fatal(err)
	}
	cmds := countCmds(sw.last)
	if len(sw.last) != 21 || cmds[CmdModifyStrict] != 1 || cmds[CmdDeleteStrict] != 20 {
		t.Fatalf("bundle commands %v (%d mods), want 1 modify + 20 deletes", cmds, len(sw.last))
	}
	dump := ofctlDump(t, o, br)
	if len(dump) != 49*20 {
		t.Fatalf("bridge holds %d flows, want %d", len(dump), 49*20)
	}
	byCookie, err := c.DumpFlows(ctx, TableAll, 0xaaaa, ^uint64(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(byCookie) != 49*20 {
		t.Fatalf("%d flows carry the kept cookie, want %d", len(byCookie), 49*20)
	}
}

// TestAdoptReassertsRestoredFlows: ovs-ctl restart saves the flows and
// restores them into the new ovs-vswitchd, minus flags such as
// reset_counts. The reconciler still believes its own flows are installed;
// re-reading the bridge (Adopt) and applying nothing re-sends exactly the
// flows that differ.
func TestAdoptReassertsRestoredFlows(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	ctx := context.Background()
	sw := &recordingSwitch{Conn: c}
	rec := NewReconciler(sw, 0xaaaa)
	base := []Flow{
		{Table: 71, Priority: 0, Flags: FlagResetCounts, Actions: []Action{Drop{}}},
		{Table: 94, Priority: 1, Flags: FlagResetCounts, Actions: []Action{Output{PortNormal}}},
	}
	if err := rec.Apply(ctx, map[string][]Flow{"base": base, "port:1": portFlows(1, 3)}); err != nil {
		t.Fatal(err)
	}
	// what a restore by ovs-save leaves: the same entries, no flags
	for _, f := range []string{"cookie=0xaaaa,table=71,priority=0,actions=drop", "cookie=0xaaaa,table=94,priority=1,actions=NORMAL"} {
		if _, err := o.Ofctl("add-flow", br, f); err != nil {
			t.Fatal(err)
		}
	}
	flagged := func() int {
		fs, err := c.DumpFlows(ctx, TableAll, 0, 0)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, f := range fs {
			if f.Flags&FlagResetCounts != 0 {
				n++
			}
		}
		return n
	}
	if n := flagged(); n != 0 {
		t.Fatalf("%d flows still flagged after the restore", n)
	}
	sw.last = nil
	if err := rec.Apply(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(sw.last) != 0 {
		t.Fatalf("without a re-read the reconciler sent %d mods (it cannot know)", len(sw.last))
	}
	if err := rec.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rec.Apply(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if len(sw.last) != 2 {
		t.Fatalf("re-read + apply sent %d mods, want the 2 flows that lost their flags: %v", len(sw.last), sw.last)
	}
	if n := flagged(); n != 2 {
		t.Fatalf("%d flows flagged reset_counts after the re-read, want 2", n)
	}
}

// TestSweepOnlyWhatIsOurs: a sweep deletes only the undesired flows
// SetSweepable allows; the others stay on the bridge, adopted, and a later
// Resync (re-read and sweep) leaves them too.
func TestSweepOnlyWhatIsOurs(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	ctx := context.Background()
	old := NewReconciler(c, 0xaaaa)
	if err := old.Apply(ctx, map[string][]Flow{"port:1": portFlows(1, 3), "port:2": portFlows(2, 3)}); err != nil {
		t.Fatal(err)
	}
	foreign := NewReconciler(c, 0x1234)
	if err := foreign.Apply(ctx, map[string][]Flow{"theirs": portFlows(3, 2)}); err != nil {
		t.Fatal(err)
	}
	nw := NewReconciler(c, 0xbbbb)
	nw.SetSweepable(func(f *Flow) bool { return f.Cookie == 0xaaaa || f.Cookie == 0xbbbb })
	if err := nw.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	if err := nw.ApplyAndSweep(ctx, map[string][]Flow{"port:1": portFlows(1, 3)}); err != nil {
		t.Fatal(err)
	}
	if err := nw.Resync(ctx); err != nil {
		t.Fatal(err)
	}
	dump := strings.Join(ofctlDump(t, o, br), "\n")
	if strings.Contains(dump, "cookie=0xaaaa") || strings.Count(dump, "cookie=0xbbbb") != 3 || strings.Count(dump, "cookie=0x1234") != 2 {
		t.Fatalf("after sweep and resync (want 3 of ours, 2 foreign):\n%s", dump)
	}
}
