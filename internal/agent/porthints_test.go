package agent

import (
	"maps"
	"testing"
)

func txHints(oc map[string]any) map[string]any {
	return map[string]any{"openvswitch": map[string]any{"other_config": oc}}
}

// Port hints, as the 2026.2 reference applies them in _bind_devices: the
// Interface other_config is set to the sanitized tx-steering on bind,
// re-applied when a port update changes the hints, cleared when the port has
// none (also on a port plugged with foreign keys), and left alone on a port
// that is not bound up (admin down: port_dead, no _bind_devices).
func TestPortHintsAppliedOnBindAndUpdate(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	srv.update("p1", func(d *Device) { d.Hints = txHints(map[string]any{"tx-steering": "hash"}) })
	srv.addPort("p2", "net-a", "vxlan", 100, "fa:16:3e:00:00:02")
	srv.addPort("p3", "net-a", "vxlan", 100, "fa:16:3e:00:00:03")
	srv.update("p3", func(d *Device) {
		d.AdminStateUp = false
		d.Hints = txHints(map[string]any{"tx-steering": "hash"})
	})
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	sw.plugWith("p2", "tap2", "fa:16:3e:00:00:02", map[string]string{"foreign": "yes"})
	sw.plugWith("p3", "tap3", "fa:16:3e:00:00:03", map[string]string{"foreign": "yes"})

	is := func(name string, want map[string]string) func() bool {
		return func() bool {
			oc, written := sw.ifaceOC(name)
			return written && maps.Equal(oc, want)
		}
	}
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	h.waitFor("tap1 tx-steering=hash", is("tap1", map[string]string{"tx-steering": "hash"}))
	h.waitFor("tap2 cleared (no hints)", is("tap2", map[string]string{}))
	h.waitFor("p3 DOWN", func() bool { return srv.status("p3") == "DOWN" && sw.tag("tap3") == DeadVLAN })
	sw.mu.Lock()
	oc := maps.Clone(sw.rows["tap3"].IfaceOtherConfig)
	sw.mu.Unlock()
	if !maps.Equal(oc, map[string]string{"foreign": "yes"}) {
		t.Errorf("admin-down tap3 Interface other_config %v, want untouched", oc)
	}

	// Changed hints: re-applied, sanitized (the extra key dropped).
	srv.update("p1", func(d *Device) {
		d.Hints = txHints(map[string]any{"tx-steering": "thread", "pmd-rxq-affinity": "0:3"})
	})
	h.a.Notify(PortChanged{PortID: "p1"})
	h.waitFor("tap1 tx-steering=thread", is("tap1", map[string]string{"tx-steering": "thread"}))

	// Hints removed (or invalid): the column is cleared.
	srv.update("p1", func(d *Device) { d.Hints = map[string]any{"openvswitch": map[string]any{"bogus": 1}} })
	h.a.Notify(PortChanged{PortID: "p1"})
	h.waitFor("tap1 cleared", is("tap1", map[string]string{}))
	h.waitFor("in sync", h.inSync)
}
