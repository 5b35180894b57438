package agent

import (
	"slices"
	"testing"
)

// binding_deactivate for this host (live migration away) unplugs the VIF
// from br-int as the reference does, instead of leaving it dead on VLAN
// 4095; its flows go with it.
func TestBindingDeactivatedUnplugsVIF(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.addPort("p2", "net-a", "vxlan", 100, "fa:16:3e:00:00:02")
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	sw.plug("p2", "tap2", "fa:16:3e:00:00:02")
	h.waitFor("p1, p2 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" && srv.status("p2") == "ACTIVE" })

	h.a.Notify(BindingDeactivated{PortID: "p1"})
	h.waitFor("tap1 deleted and its flows gone", func() bool {
		sw.mu.Lock()
		gone := slices.Contains(sw.deleted, "tap1") && sw.rows["tap1"] == nil
		sw.mu.Unlock()
		return gone && fl.owners("br-int")["port:p1"] == 0
	})
	sw.mu.Lock()
	defer sw.mu.Unlock()
	if sw.rows["tap2"] == nil || slices.Contains(sw.deleted, "tap2") {
		t.Errorf("tap2 was touched: deleted %v", sw.deleted)
	}
	if fl.owners("br-int")["port:p2"] == 0 {
		t.Errorf("p2's flows are gone")
	}
}
