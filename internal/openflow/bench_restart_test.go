//go:build integration

package openflow

import (
	"context"
	"strconv"
	"testing"
)

// BenchmarkRestart56k: the reconciler's share of ovs-agent's start at 1,000
// ports: Adopt 56k flows of our previous run (the dump itself is not
// counted), Installed() (the agent reads it to keep the cookie), then the
// first ApplyAndSweep with every owner, which finds nothing to change.
func BenchmarkRestart56k(b *testing.B) {
	const cookie = 0x1234_0a65
	all := map[string][]Flow{}
	var dump []Flow
	for p := 0; p < 5600; p++ {
		fs := withCookie(portFlows(uint32(p+1), 10), cookie)
		all["port:"+strconv.Itoa(p)] = fs
		dump = append(dump, withCookie(portFlows(uint32(p+1), 10), cookie)...)
	}
	ctx := context.Background()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		sw := &memSwitch{dump: dump}
		r := NewReconciler(sw, 1)
		if err := r.Adopt(ctx); err != nil {
			b.Fatal(err)
		}
		if n := len(r.Installed()); n != len(dump) {
			b.Fatalf("installed %d", n)
		}
		r.SetCookie(cookie)
		if err := r.ApplyAndSweep(ctx, all); err != nil || len(sw.last) != 0 {
			b.Fatalf("first apply sent %d mods (%v)", len(sw.last), err)
		}
	}
}
