//go:build integration

package openflow

import "testing"

// TestRecordRoundTrip: every flow kind we model comes back from its
// reconciler record as it went in (same text, same key), cookie included.
func TestRecordRoundTrip(t *testing.T) {
	var flows []Flow
	for _, tc := range referenceFlows() {
		flows = append(flows, tc.flow)
	}
	flows = append(flows, extraFlows()...)
	flows = append(flows, portFlows(7, 20)...)
	flows = withCookie(flows, 0x1234_0a65)
	of := NewReconciler(nil, 0x1234_0a65).newOwnerFlows("o", flows)
	if of.plain != nil {
		t.Fatal("a modelled flow did not encode")
	}
	for i := range flows {
		got := of.flow(i)
		if got.String() != flows[i].String() || got.Key() != flows[i].Key() || got.Table != of.table(i) {
			t.Errorf("flow %d:\n got %s\nwant %s", i, got.String(), flows[i].String())
		}
		if !sameRecord(of, i, of, i) {
			t.Errorf("flow %d: record differs from itself", i)
		}
	}
}

// TestDigest: the digest changes with any part of any flow, and with order.
func TestDigest(t *testing.T) {
	fs := withCookie(portFlows(3, 4), 7)
	base := Digest(fs)
	if Digest(withCookie(portFlows(3, 4), 7)) != base {
		t.Fatal("digest of equal lists differs")
	}
	changes := []func([]Flow){
		func(f []Flow) { f[1].Cookie = 8 },
		func(f []Flow) { f[2].Priority++ },
		func(f []Flow) { f[3].Actions = []Action{ResubmitTable(99)} },
		func(f []Flow) { f[0].IdleTimeout = 5 },
		func(f []Flow) { f[0], f[1] = f[1], f[0] },
	}
	for i, change := range changes {
		g := withCookie(portFlows(3, 4), 7)
		change(g)
		if Digest(g) == base {
			t.Errorf("change %d: digest unchanged", i)
		}
	}
	if Digest(fs[:3]) == base || Digest(nil) == base {
		t.Error("digest of a shorter list equals the whole's")
	}
}
