//go:build integration

package openflow

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
)

// countingSwitch counts the bundles that reach the real switch.
type countingSwitch struct {
	*Conn
	bundles int
}

func (s *countingSwitch) Bundle(ctx context.Context, mods []FlowMod) error {
	s.bundles++
	return s.Conn.Bundle(ctx, mods)
}

// rejectedFlow is a flow OVS refuses when it is added to a bundle: an ICMP
// (v4) type match on IPv6 with IP protocol 1, which a security group rule
// of old database rows ("IPv6", protocol "1", an ICMP type) turns into.
// The match's prerequisites do not hold (OFPBMC_BAD_PREREQ).
func rejectedFlow(port uint32) Flow {
	return Flow{Table: 72, Priority: 70, Match: Match{Reg(5, port), EthType(EthTypeIPv6), IPProto(1), ICMPType(8)},
		Actions: []Action{ResubmitTable(73)}}
}

// TestApplyIsolatesRejectedOwner: one owner's flow the switch rejects
// leaves that owner as it was and every other owner's change applied, in
// the same Apply; the Apply says which owner and why, and a later Apply of
// the owner's corrected flows installs them.
func TestApplyIsolatesRejectedOwner(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	sw := &countingSwitch{Conn: c}
	r := NewReconciler(sw, 0x7)
	ctx := context.Background()
	if err := r.Apply(ctx, map[string][]Flow{"port:old": portFlows(9, 2), "port:bad": portFlows(3, 1)}); err != nil {
		t.Fatal(err)
	}
	// port:bad gains the rejected flow, port:good is new, port:old goes
	bad := append(portFlows(3, 2), rejectedFlow(3))
	sw.bundles = 0
	err := r.Apply(ctx, map[string][]Flow{"port:good": portFlows(4, 3), "port:bad": bad, "port:old": nil})
	var rej *OwnersRejectedError
	if !errors.As(err, &rej) {
		t.Fatalf("apply: %v, want an OwnersRejectedError", err)
	}
	if len(rej.Owners) != 1 || rej.Owners["port:bad"] == nil {
		t.Fatalf("rejected %v, want port:bad only", rej.Owners)
	}
	var be *BundleError
	if !errors.As(rej.Owners["port:bad"], &be) || be.Err == nil || !strings.Contains(be.Flow, "table=72") {
		t.Fatalf("port:bad's error does not name its flow: %v", rej.Owners["port:bad"])
	}
	if sw.bundles != 2 {
		t.Errorf("%d bundles, want 2 (the rejected one, the rest)", sw.bundles)
	}
	dump := strings.Join(ofctlDump(t, o, br), "\n")
	if strings.Count(dump, "in_port=4") != 3 || strings.Contains(dump, "in_port=9") {
		t.Fatalf("the other owners' changes are not applied:\n%s", dump)
	}
	// port:bad keeps its previous flow, nothing of its new ones
	if strings.Count(dump, "in_port=3") != 1 || strings.Contains(dump, "icmp") {
		t.Fatalf("port:bad changed:\n%s", dump)
	}
	if got := r.Desired("port:bad"); len(got) != 1 {
		t.Fatalf("the reconciler believes port:bad has %d flows, the bridge 1", len(got))
	}
	// retried as it is: rejected again, alone, nothing else sent
	sw.bundles = 0
	if err := r.Apply(ctx, map[string][]Flow{"port:bad": bad}); !errors.As(err, &rej) || rej.Owners["port:bad"] == nil {
		t.Fatalf("retry: %v", err)
	}
	if sw.bundles != 1 {
		t.Errorf("a retry of the rejected owner alone sent %d bundles, want 1", sw.bundles)
	}
	// corrected: accepted
	if err := r.Apply(ctx, map[string][]Flow{"port:bad": portFlows(3, 2)}); err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(strings.Join(ofctlDump(t, o, br), "\n"), "in_port=3"); n != 2 {
		t.Fatalf("port:bad has %d flows after its correction, want 2", n)
	}
}

// TestApplyIsolatesManyOwnersInOneRound: a rejected rule shared by many
// ports (one security group) is one bad flow per port owner; the switch
// names them all in one bundle, so the good owners go in with the second.
func TestApplyIsolatesManyOwnersInOneRound(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	sw := &countingSwitch{Conn: c}
	r := NewReconciler(sw, 0x7)
	changes := map[string][]Flow{}
	for p := uint32(1); p <= 40; p++ {
		fs := portFlows(p, 2)
		if p%2 == 0 {
			fs = append(fs, rejectedFlow(p))
		}
		changes["port:"+string(rune('a'+p/26))+string(rune('a'+p%26))] = fs
	}
	err := r.ApplyAndSweep(context.Background(), changes)
	var rej *OwnersRejectedError
	if !errors.As(err, &rej) || len(rej.Owners) != 20 {
		t.Fatalf("apply: %v, want 20 owners rejected", err)
	}
	if sw.bundles != 2 {
		t.Errorf("%d bundles, want 2", sw.bundles)
	}
	if n := len(ofctlDump(t, o, br)); n != 40 {
		t.Fatalf("bridge has %d flows, want the 20 good owners' 40", n)
	}
}

// TestApplyIsolatesRejectedAction: a flow whose action the switch refuses
// (output to a group it does not have) is found and left out too.
func TestApplyIsolatesRejectedAction(t *testing.T) {
	o, br, c := testBridge(t, Options{})
	r := NewReconciler(c, 0x7)
	bad := portFlows(5, 2)
	bad[1].Actions = []Action{Opaque{Raw: []byte{0, 22, 0, 8, 0, 0, 0x10, 0x92}}} // group:4242
	changes := map[string][]Flow{"port:c": bad}
	for p := uint32(10); p < 17; p++ {
		changes["port:"+string(rune('a'+p))] = portFlows(p, 1)
	}
	err := r.Apply(context.Background(), changes)
	var rej *OwnersRejectedError
	if !errors.As(err, &rej) || len(rej.Owners) != 1 || rej.Owners["port:c"] == nil {
		t.Fatalf("apply: %v, want port:c rejected", err)
	}
	dump := strings.Join(ofctlDump(t, o, br), "\n")
	if strings.Contains(dump, "in_port=5") || strings.Count(dump, "cookie=0x7") != 7 {
		t.Fatalf("bridge:\n%s", dump)
	}
}

// anonSwitch rejects every bundle holding a flow of table 72, naming no
// flow_mod (as a commit error without the failed message would), and
// records the accepted mods.
type anonSwitch struct {
	bundles int
	held    map[string]bool // accepted adds, by flow text
}

func (s *anonSwitch) Bundle(_ context.Context, mods []FlowMod) error {
	s.bundles++
	for _, m := range mods {
		if m.Flow.Table == 72 {
			return &BundleError{Index: -1, Err: &Error{Type: 17, Code: 2}} // BUNDLE_FAILED MSG_FAILED
		}
	}
	for _, m := range mods {
		if m.Command == CmdAdd {
			s.held[m.Flow.String()] = true
		}
	}
	return nil
}

func (s *anonSwitch) DumpFlows(context.Context, uint8, uint64, uint64) ([]Flow, error) {
	return nil, nil
}

// TestApplyBisectsAnonymousRejection: when the switch names no flow_mod,
// the owners to blame are found by halves; the others are applied.
func TestApplyBisectsAnonymousRejection(t *testing.T) {
	sw := &anonSwitch{held: map[string]bool{}}
	r := NewReconciler(sw, 7)
	changes := map[string][]Flow{}
	for p := uint32(1); p <= 16; p++ {
		fs := portFlows(p, 1)
		if p == 5 || p == 12 {
			fs = append(fs, rejectedFlow(p))
		}
		changes["port:"+string(rune('a'+p))] = fs
	}
	err := r.ApplyAndSweep(context.Background(), changes)
	var rej *OwnersRejectedError
	if !errors.As(err, &rej) || len(rej.Owners) != 2 || rej.Owners["port:"+string(rune('a'+5))] == nil || rej.Owners["port:"+string(rune('a'+12))] == nil {
		t.Fatalf("apply: %v, want the owners of ports 5 and 12 rejected", err)
	}
	if len(sw.held) != 14 || len(r.Installed()) != 14 {
		t.Fatalf("switch holds %d flows, reconciler %d, want the 14 good owners'", len(sw.held), len(r.Installed()))
	}
}

// BenchmarkApplyRejected10k: the first Apply of 1,000 owners (10,000 flows)
// on a real switch, every flow acceptable ("ok": one bundle) or one owner
// carrying a flow the switch rejects ("one_rejected": the rejected bundle,
// then the 999 others). op = one Apply; bundles/op is counted.
func BenchmarkApplyRejected10k(b *testing.B) {
	for _, bad := range []int{0, 1, 100} {
		name := "ok"
		if bad == 1 {
			name = "one_rejected"
		} else if bad > 1 {
			name = strconv.Itoa(bad) + "_rejected"
		}
		b.Run(name, func(b *testing.B) {
			_, _, c := testBridge(b, Options{})
			sw := &countingSwitch{Conn: c}
			all := map[string][]Flow{}
			for p := 0; p < 1000; p++ {
				fs := portFlows(uint32(p+1), 10)
				if p < bad {
					fs[9] = rejectedFlow(uint32(p + 1))
				}
				all["port:"+strconv.Itoa(p)] = fs
			}
			ctx := context.Background()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				clearBridge(b, c)
				r := NewReconciler(sw, 1)
				b.StartTimer()
				err := r.Apply(ctx, all)
				var rej *OwnersRejectedError
				if bad == 0 && err != nil || bad > 0 && (!errors.As(err, &rej) || len(rej.Owners) != bad) {
					b.Fatalf("apply: %v", err)
				}
			}
			b.ReportMetric(float64(sw.bundles)/float64(b.N), "bundles/op")
		})
	}
}
