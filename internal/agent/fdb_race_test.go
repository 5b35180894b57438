package agent

import "testing"

// TestL2popFloodRemovalEndsRemote replays what neutron-server sent in
// TestTwoHostVXLAN: port B of the remote deleted, its fdb_remove, then a
// late fdb_add for B (it was going up), then the remote's last port A goes
// with the flooding entry. The remote has left the network: its tunnel
// port and every FDB flow of it go, the stale entry for B included.
func TestL2popFloodRemovalEndsRemote(t *testing.T) {
	sw, fl, srv := newFakeSwitch(true), newFakeFlows(), newFakeServer()
	srv.addPort("p1", "net-a", "vxlan", 100, "fa:16:3e:00:00:01")
	h := start(t, sw, fl, srv, testOpts(true))
	sw.snapshot()
	sw.plug("p1", "tap1", "fa:16:3e:00:00:01")
	h.waitFor("p1 ACTIVE", func() bool { return srv.status("p1") == "ACTIVE" })
	entries := func(pairs ...[2]string) FDBEntries {
		return FDBEntries{"net-a": {SegmentID: intp(100), NetworkType: "vxlan",
			Ports: map[string][][2]string{"192.0.2.2": pairs}}}
	}
	flood := [2]string{floodMAC, "0.0.0.0"}
	a := [2]string{"fa:16:3e:00:00:0a", "10.0.0.10"}
	b := [2]string{"fa:16:3e:00:00:0b", "10.0.0.11"}
	h.a.Notify(FDBAdd{Entries: entries(flood, a)})
	h.a.Notify(FDBAdd{Entries: entries(flood, b)})
	h.waitFor("tunnel port and both MACs", func() bool {
		return len(sw.Tunnels.Names()) == 1 && fl.has("br-tun", "dl_dst=fa:16:3e:00:00:0a") && fl.has("br-tun", "dl_dst=fa:16:3e:00:00:0b")
	})
	h.a.Notify(FDBRemove{Entries: entries(b)})
	h.a.Notify(FDBAdd{Entries: entries(flood, b)}) // late, for the deleted port
	h.a.Notify(FDBRemove{Entries: entries(flood, a)})
	h.waitFor("the remote's tunnel port and FDB flows gone", func() bool {
		return len(sw.Tunnels.Names()) == 0 && !fl.has("br-tun", "dl_dst=fa:16:3e:00:00:0a") && !fl.has("br-tun", "dl_dst=fa:16:3e:00:00:0b")
	})
}
