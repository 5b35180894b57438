package agent

import "testing"

// TestReconnectRereadsFlows: when a bridge's OpenFlow connection comes
// back, the agent has the bridge's flows re-read (ovs-ctl restart restores
// them itself, without their flags) — that bridge only, once.
func TestReconnectRereadsFlows(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE and in sync", func() bool { return srv.status("p1") == "ACTIVE" && h.inSync() })

	fl.events <- DataplaneEvent{Bridge: "br-tun"}
	rereads := func() map[string]int {
		fl.mu.Lock()
		defer fl.mu.Unlock()
		out := map[string]int{}
		for br, n := range fl.rereads {
			out[br] = n
		}
		return out
	}
	h.waitFor("br-tun re-read", func() bool { return rereads()["br-tun"] == 1 })
	h.waitFor("in sync again", h.inSync)
	if got := rereads(); len(got) != 1 {
		t.Errorf("re-reads %v, want br-tun once", got)
	}
	if !fl.has("br-int", "table=23") {
		t.Errorf("br-int lost its canary")
	}
}
