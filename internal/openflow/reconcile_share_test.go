//go:build integration

package openflow

import (
	"context"
	"errors"
	"testing"
)

// memSwitch records bundles and can refuse the next one.
type memSwitch struct {
	last []FlowMod
	fail bool
	dump []Flow
}

func (s *memSwitch) Bundle(_ context.Context, mods []FlowMod) error {
	if s.fail {
		s.fail = false
		return errors.New("refused")
	}
	s.last = append([]FlowMod(nil), mods...)
	return nil
}

func (s *memSwitch) DumpFlows(context.Context, uint8, uint64, uint64) ([]Flow, error) {
	return s.dump, nil
}

func withCookie(fs []Flow, c uint64) []Flow {
	for i := range fs {
		fs[i].Cookie = c
	}
	return fs
}

// TestReconcilerLeavesCallerSlice: the reconciler keeps its own (wire)
// copy of the flows, with its cookie; the caller's slices are left as they
// were, and Desired gives the flows back as given.
func TestReconcilerLeavesCallerSlice(t *testing.T) {
	r := NewReconciler(&memSwitch{}, 7)
	ctx := context.Background()
	mine := withCookie(portFlows(1, 3), 7)
	other := portFlows(2, 3) // cookie 0
	if err := r.Apply(ctx, map[string][]Flow{"port:1": mine, "port:2": other}); err != nil {
		t.Fatal(err)
	}
	if other[0].Cookie != 0 {
		t.Fatal("the caller's flows were modified")
	}
	for o, given := range map[string][]Flow{"port:1": mine, "port:2": withCookie(portFlows(2, 3), 7)} {
		got := r.Desired(o)
		if len(got) != len(given) {
			t.Fatalf("%s: %d flows desired, want %d", o, len(got), len(given))
		}
		want := map[string]bool{}
		for _, f := range given {
			want[f.String()] = true
		}
		for _, f := range got {
			if !want[f.String()] {
				t.Errorf("%s: desired flow %s was not given (with cookie 7)", o, f.String())
			}
		}
	}
}

// TestReconcilerContestedEntry: two owners desiring one entry install it
// once; the entry stays while the owner holding it keeps it and goes with
// that owner, as before the slot rewrite.
func TestReconcilerContestedEntry(t *testing.T) {
	sw := &memSwitch{}
	r := NewReconciler(sw, 7)
	ctx := context.Background()
	f := Flow{Table: 60, Priority: 5, Match: Match{InPort(9)}, Actions: []Action{ResubmitTable(71)}}
	if err := r.Apply(ctx, map[string][]Flow{"a": {f}, "b": {f}}); err != nil {
		t.Fatal(err)
	}
	if len(sw.last) != 1 || sw.last[0].Command != CmdAdd {
		t.Fatalf("bundle %v, want one add", sw.last)
	}
	if got := r.Installed(); len(got) != 1 || got[0].Owner != "b" {
		t.Fatalf("installed %v, want one flow owned by b", got)
	}
	if err := r.Apply(ctx, map[string][]Flow{"a": nil}); err != nil || len(sw.last) != 0 {
		t.Fatalf("removing the other owner sent %v (%v)", sw.last, err)
	}
	if err := r.Apply(ctx, map[string][]Flow{"b": nil}); err != nil || len(sw.last) != 1 || sw.last[0].Command != CmdDeleteStrict {
		t.Fatalf("removing the holder sent %v (%v), want one delete", sw.last, err)
	}
	if len(r.slots) != 0 || len(r.owners) != 0 {
		t.Fatalf("state left: %d slots, %d owners", len(r.slots), len(r.owners))
	}
}

// TestReconcilerFailedBundleKeepsState: a refused bundle changes nothing;
// the retry sends the same mods.
func TestReconcilerFailedBundleKeepsState(t *testing.T) {
	sw := &memSwitch{}
	r := NewReconciler(sw, 7)
	ctx := context.Background()
	if err := r.Apply(ctx, map[string][]Flow{"p": portFlows(1, 4)}); err != nil {
		t.Fatal(err)
	}
	next := portFlows(1, 2)
	next[1].Actions = []Action{ResubmitTable(72)}
	sw.fail = true
	if err := r.Apply(ctx, map[string][]Flow{"p": next}); err == nil {
		t.Fatal("refused bundle not reported")
	}
	if n := len(r.Desired("p")); n != 4 || len(r.Installed()) != 4 {
		t.Fatalf("after a refused bundle: %d desired, %d installed, want 4 and 4", n, len(r.Installed()))
	}
	if err := r.Apply(ctx, map[string][]Flow{"p": next}); err != nil {
		t.Fatal(err)
	}
	if c := countCmds(sw.last); c[CmdModifyStrict] != 1 || c[CmdDeleteStrict] != 2 || len(sw.last) != 3 {
		t.Fatalf("retry bundle %v, want 1 modify + 2 deletes", c)
	}
}

// TestReconcilerAdoptCompares: after Adopt, an unchanged owner's flows are
// compared with what the bridge holds: equal ones send nothing, other
// actions a modify, another cookie an add; strays go with the sweep.
func TestReconcilerAdoptCompares(t *testing.T) {
	sw := &memSwitch{}
	r := NewReconciler(sw, 7)
	ctx := context.Background()
	want := withCookie(portFlows(1, 3), 7)
	if err := r.Apply(ctx, map[string][]Flow{"p": want}); err != nil {
		t.Fatal(err)
	}
	held := withCookie(portFlows(1, 3), 7)
	held[1].Actions = []Action{ResubmitTable(72)}
	held[2].Cookie = 8
	stray := Flow{Table: 0, Priority: 1, Cookie: 8}
	sw.dump = append(held, stray)
	if err := r.Adopt(ctx); err != nil {
		t.Fatal(err)
	}
	if err := r.ApplyAndSweep(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if c := countCmds(sw.last); c[CmdModifyStrict] != 1 || c[CmdAdd] != 1 || c[CmdDeleteStrict] != 1 || len(sw.last) != 3 {
		t.Fatalf("bundle %v, want 1 modify + 1 add + 1 delete", c)
	}
	for _, s := range r.slots {
		if !s.held || s.adopted {
			t.Fatal("an adopted flow is still held after the bridge was brought to the desired one")
		}
	}
	if r.adopted != nil {
		t.Fatalf("%d adopted flows kept after the sweep replaced or deleted them all", len(r.adopted))
	}
}
