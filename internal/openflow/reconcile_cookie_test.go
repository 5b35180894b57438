package openflow

import (
	"context"
	"fmt"
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
